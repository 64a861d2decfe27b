"""A simulated run's checkpoints: files of [`EngineState`][dpdl.simulation.resume.EngineState]s that
`dpdl train --resume` and [`fit`][dpdl.experiments.fit.fit]`(resume_from=...)` continue from.

A checkpoint is a checksummed archive ([`dpdl.archives`][dpdl.archives], the layout of the
runtime's checkpoints: read with `allow_pickle=False`, written atomically, so a run killed while
writing leaves the previous checkpoint whole). Its arrays are the parameters (`params`), the
engine's other variables (`variables/<name>`) and torch's generator state (`torch_rng`); its
manifest (JSON) holds the format and version, the engine version
(`dpdl.jobspec.ENGINE_VERSION`), the run's settings (plain data: every option)
and fingerprint (a hash of what else makes the run, such as its data and noise design), the step,
the metric history and what the caller adds (`extra`). Python's JSON writes a float so that it
reads back the same float, so the history continues bit for bit.

[`load_state`][dpdl.experiments.checkpoints.load_state] refuses, with one
[`FileFormatError`][dpdl.errors.FileFormatError] naming the file, a file that is not such a
checkpoint, whole and unaltered, one of another engine version, and one of another run: then it
names every setting that differs, with both values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.archives import read_checked_archive, setting_changes, write_archive
from dpdl.errors import FileFormatError
from dpdl.files import json_safe
from dpdl.jobspec import ENGINE_VERSION
from dpdl.simulation.resume import EngineState

__all__ = ["FORMAT", "FORMAT_VERSION", "load_state", "plain_settings", "save_state"]

#: Name and version of the layout above; a change of layout bumps the version.
FORMAT, FORMAT_VERSION = "dpdl-run-checkpoint", 1

_AFRESH = "start afresh (without resuming)"


def plain_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` as they read back from a checkpoint's JSON (tuples as lists, non-finite floats
    as strings), so that a run's settings compare equal to the ones it saved."""
    return json.loads(json.dumps(json_safe(dict(settings))))


def save_state(
    path: Path,
    state: EngineState,
    settings: Mapping[str, Any],
    fingerprint: str,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """Write `state` of the run of `settings` and `fingerprint` to `path`, atomically, with
    `extra` (JSON data) in its manifest."""
    arrays = {"params": state.params}
    arrays.update({f"variables/{name}": value for name, value in state.variables.items()})
    if state.torch_rng is not None:
        arrays["torch_rng"] = state.torch_rng
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "engine": ENGINE_VERSION,
        "settings": plain_settings(settings),
        "run": fingerprint,
        "step": state.step,
        "history": state.history,
        "tail": state.tail,
        "extra": dict(extra or {}),
    }
    write_archive(path, json.dumps(manifest).encode(), arrays)


def _manifest(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The manifest and arrays of the checkpoint at `path`, checked whole and of this format."""
    expected = f"expected a checkpoint of a dpdl run (format {FORMAT} {FORMAT_VERSION})"
    return read_checked_archive(path, FORMAT, FORMAT_VERSION, expected)


def load_state(
    path: Path, settings: Mapping[str, Any], fingerprint: str | None = None
) -> tuple[EngineState, dict[str, Any]]:
    """The state saved at `path` and its `extra`, if the file is a checkpoint of the run of
    `settings` (and `fingerprint`, when given) under this engine version.

    Raises [`FileFormatError`][dpdl.errors.FileFormatError] naming `path` otherwise: for another
    run, one message naming every setting that differs with both values (or, where the settings
    agree, that the data, graph or noise design differ)."""
    path = Path(path)
    manifest, arrays = _manifest(path)
    if manifest.get("engine") != ENGINE_VERSION:
        raise FileFormatError(
            f"{path} was written by engine version {manifest.get('engine')}, this is version "
            f"{ENGINE_VERSION}: its run would not continue the same numbers; {_AFRESH}"
        )
    changes = setting_changes(manifest.get("settings"), plain_settings(settings))
    if changes or (fingerprint is not None and manifest.get("run") != fingerprint):
        what = (
            "; ".join(changes)
            if changes
            else "the settings agree, but its data, graph or noise design differ from this one's"
        )
        raise FileFormatError(
            f"{path} is a checkpoint of another run ({what}): resuming would continue other "
            f"numbers under another privacy claim; resume with the settings it was started with, "
            f"or {_AFRESH}"
        )
    try:
        params = arrays.pop("params")
        torch_rng = arrays.pop("torch_rng", None)
        prefix = "variables/"
        variables = {
            name[len(prefix) :]: arrays.pop(name)
            for name in list(arrays)
            if name.startswith(prefix)
        }
        if arrays:
            raise ValueError(f"unknown entries {sorted(arrays)[:5]}")
        step, history, tail = manifest["step"], manifest["history"], manifest["tail"]
        if not isinstance(step, int) or params.ndim != 2 or params.dtype.kind != "f":
            raise ValueError("its step or parameters are malformed")
        if torch_rng is not None and torch_rng.dtype != np.uint8:
            raise ValueError("its torch generator state is not bytes")
        for record in [*history, *tail]:
            if not isinstance(record, dict) or not all(
                isinstance(v, (int, float)) for v in record.values()
            ):
                raise ValueError("a metric record is not a mapping of numbers")
        state = EngineState(step, params, history, tail, variables, torch_rng)
        return state, dict(manifest["extra"])
    except (ValueError, KeyError, TypeError) as error:
        raise FileFormatError(
            f"{path} has a checksum but not the layout of a run checkpoint ({error})"
        ) from None
