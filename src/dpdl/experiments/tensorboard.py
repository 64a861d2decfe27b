"""Metrics as they happen, in TensorBoard: a callback that writes every metric record of a run as
scalars (`torch.utils.tensorboard.SummaryWriter`), for `dpdl train --tensorboard DIR`,
`dpdl sweep --tensorboard DIR` and [`fit`][dpdl.experiments.fit.fit]`(callbacks=...)`.

The `tensorboard` package is an extra (`pip install 'dpdl[tensorboard]'`), imported only when a
writer is made; without it, one [`MissingDependencyError`][dpdl.errors.MissingDependencyError]
says how to install it. `metrics.csv` and `final.json` are written as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpdl.optional import require

__all__ = ["SeedLogs", "TensorBoardLog", "require_tensorboard"]


def require_tensorboard() -> None:
    """Raise [`MissingDependencyError`][dpdl.errors.MissingDependencyError] naming
    `pip install 'dpdl[tensorboard]'` unless the `tensorboard` package is installed."""
    require("tensorboard", "tensorboard", "writing metrics for TensorBoard")


class TensorBoardLog:
    """A callback `(step, metrics)` that writes each metric of the record as a scalar at `step`
    into the event files of `log_dir` (one folder is one run in TensorBoard), flushed at every
    record, so that TensorBoard shows a run while it trains. Non-finite values are written as they
    are (TensorBoard shows NaN); the record's `step` key is the x axis, not a scalar.

    ```python
    log = TensorBoardLog("runs/decor")
    dpdl.fit(..., callbacks=[log])
    log.close()
    ```
    """

    def __init__(self, log_dir: Path | str) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(log_dir)
        self._writer: Any = SummaryWriter(log_dir=str(self.log_dir))

    def __call__(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if key != "step" and isinstance(value, (int, float)):
                self._writer.add_scalar(key, float(value), global_step=step)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()

    def __enter__(self) -> TensorBoardLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class SeedLogs:
    """A callback `(seed, step, metrics)` of a run of several seeds (the `callback` of
    `dpdl.experiments.train.run_training`): each seed's records go to
    `log_dir/seed<s>`, which TensorBoard shows as one run each. Checks at once that
    `tensorboard` is installed."""

    def __init__(self, log_dir: Path | str) -> None:
        require_tensorboard()
        self.log_dir = Path(log_dir)
        self._logs: dict[int, TensorBoardLog] = {}

    def __call__(self, seed: int, step: int, metrics: dict[str, float]) -> None:
        if seed not in self._logs:
            self._logs[seed] = TensorBoardLog(self.log_dir / f"seed{seed}")
        self._logs[seed](step, metrics)

    def close(self) -> None:
        """Close every seed's event file."""
        for log in self._logs.values():
            log.close()

    def __enter__(self) -> SeedLogs:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
