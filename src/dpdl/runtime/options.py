"""How an agent runs, apart from the training configuration every agent shares:
[`AgentOptions`][dpdl.runtime.options.AgentOptions].

Declared with [`dpdl.settings.setting`][dpdl.settings.setting], like
[`dpdl.jobspec.config.TrainConfig`][dpdl.jobspec.config.TrainConfig]: the runtime options of `dpdl
run-agent` and `run-local` are generated from these fields. Light (the standard library,
[`dpdl.choices`][dpdl.choices], [`dpdl.errors`][dpdl.errors] and [`dpdl.settings`][dpdl.settings]
only), so the parser reads it without importing torch; [`dpdl.runtime.agent`][dpdl.runtime.agent]
re-exports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpdl.choices import BACKENDS, MACS
from dpdl.errors import ConfigError
from dpdl.settings import check_fields, setting

__all__ = ["AgentOptions"]


@dataclass(frozen=True)
class AgentOptions:
    """How an agent runs, apart from the training configuration every agent shares."""

    #: Where agent i keeps ``agent<i>/``: its checkpoints and its final model.
    workdir: Path = setting(  # noqa: RUF009 - setting() returns a dataclasses.field
        help="folder of the agents' checkpoints and final models", group="runtime"
    )
    #: None: fresh X25519 keys from the operating system (a deployment). A number: keys derived
    #: from it, so that ``dpdl train --key-seed`` reproduces the run (a check, never a deployment).
    #: On the command line, the training configuration's ``--key-seed``.
    key_seed: int | None = setting(
        None, "the agents' key seed (the command line's is the job's --key-seed)", cli=False
    )
    timeout: float = setting(
        60.0,
        "seconds to wait for a neighbour before declaring it failed (default 60)",
        group="runtime",
    )
    checkpoint_every: int = setting(
        100, "rounds between checkpoints (default 100)", positive=True, group="runtime"
    )
    resume: bool = setting(False, "resume from the latest round every agent saved", group="runtime")
    mac: str = setting(
        "aes-gmac",
        "message authentication per link: aes-gmac (fastest with AES instructions), poly1305 "
        "(fast without them) or hmac-sha256 (default aes-gmac)",
        choices=MACS,
        group="runtime",
    )
    backend: str = setting(
        "gloo",
        "torch.distributed backend of the messages: gloo (CPU, any machine) or nccl (one GPU per "
        "agent, cuda:LOCAL_RANK; gradients on it, models sent GPU to GPU, tags checked on the "
        "host) (default gloo)",
        choices=BACKENDS,
        group="runtime",
    )
    #: Agents that left for good: the others resume (``resume`` is required) as a second phase on
    #: the remaining graph, with the noise design recomputed for it (:mod:`dpdl.jobspec.departure`).
    departed: tuple[int, ...] = setting(
        (),
        "agents that left for good: with --resume, the others continue as a second phase on the "
        "remaining graph, the noise design recomputed for it and both phases accounted together",
        metavar="AGENT",
        group="runtime",
        interval="[0, inf)",
        unique=True,
    )

    def __post_init__(self) -> None:
        check_fields(self)
        if self.timeout <= 0:
            raise ConfigError(f"the timeout must be > 0 seconds, got {self.timeout}")
        if self.departed and not self.resume:
            raise ConfigError(
                "departed: agents that left can only be dropped when the others resume from "
                "their checkpoints (--resume)"
            )
