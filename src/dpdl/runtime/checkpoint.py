"""A runtime agent's checkpoints: its states of some rounds, saved as data that cannot run code.

A checkpoint is an `.npz` archive read with `allow_pickle=False` (no object arrays, so
reading it never unpickles anything). It holds

- `manifest`: UTF-8 JSON: the format and its version, `ENGINE_VERSION`, the fingerprint of the run
  it belongs to ([`run_fingerprint`][dpdl.runtime.checkpoint.run_fingerprint]), the agent, and per
  saved state its round and its batch generators' states (JSON dicts);
- per state `k`: `state<k>/params` and the batch samplers' arrays `state<k>/batches/<name>`;
- `sha256`: the SHA-256 of the manifest and every array (name, dtype, shape, bytes).

[`load_checkpoint`][dpdl.runtime.checkpoint.load_checkpoint] refuses, with a
[`FileFormatError`][dpdl.errors.FileFormatError] naming the file, anything else: a truncated or
altered file (the archive or the checksum fails), a foreign file (a pickle, random bytes, another
format), a checkpoint of another agent, of another run (its configuration, seed or noise design
differ) or of another engine version. Files are written atomically (`dpdl.files.atomic_write`): a
crash leaves the previous checkpoint whole.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dpdl.archives import read_checked_archive, setting_changes, write_archive
from dpdl.errors import FileFormatError
from dpdl.files import atomic_write, json_safe, read_regular
from dpdl.jobspec import ENGINE_VERSION
from dpdl.jobspec.config import TrainConfig
from dpdl.jobspec.job import Job

__all__ = [
    "AgentState",
    "BatchState",
    "load_agent_key",
    "load_checkpoint",
    "run_fingerprint",
    "run_settings",
    "save_agent_key",
    "save_checkpoint",
]

#: Name and version of the layout above; a change of layout bumps the version. Version 2: the
#: agent's key is saved beside its checkpoints (:func:`save_agent_key`); a version-1 checkpoint
#: has no key to replay its rounds' noise with, and is refused.
FORMAT, FORMAT_VERSION = "dpdl-agent-checkpoint", 2
#: The agent key file's format and version.
KEY_FORMAT, KEY_FORMAT_VERSION = "dpdl-agent-key", 1

#: An agent's batch streams as :meth:`dpdl.jobspec.sampling.AgentBatches.state` gives them.
BatchState = tuple[dict[str, Any], dict[str, np.ndarray]]


@dataclass
class AgentState:
    """What an agent needs to continue after round `round`: its parameters (the model, or
    model, tracking variable and last gradient) and its batch streams (None: full gradients)."""

    round: int
    params: np.ndarray
    batches: BatchState | None


def run_settings(config: TrainConfig, seed: int) -> dict[str, Any]:
    """Replicate `seed` of `config` (resolved) as plain JSON data: the configuration with its
    list of seeds replaced by this seed. A checkpoint keeps it, so that a resume with another
    setting can name the setting and both values."""
    return json_safe({**config.as_dict(), "seeds": [seed]})


def run_fingerprint(config: TrainConfig, seed: int, job: Job) -> str:
    """SHA-256 (hex) naming replicate `seed` of `config` (resolved) as built in `job` (the first
    phase's, before any departure): [`run_settings`][dpdl.runtime.checkpoint.run_settings] as
    canonical JSON, and the digest of the mixing matrix and noise covariance that the agents
    compare in the handshake ([`design_digest`][dpdl.jobspec.job.Job.design_digest]). A
    checkpoint of another run has another fingerprint."""
    text = json.dumps(run_settings(config, seed), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode() + job.design_digest()).hexdigest()


def save_checkpoint(
    path: Path,
    states: list[AgentState],
    run: str,
    agent: int,
    settings: Mapping[str, Any] | None = None,
) -> None:
    """Write `states` of agent `agent` of run `run` (a
    [`run_fingerprint`][dpdl.runtime.checkpoint.run_fingerprint]) to `path`, atomically, with the
    run's `settings` ([`run_settings`][dpdl.runtime.checkpoint.run_settings]) when given."""
    arrays: dict[str, np.ndarray] = {}
    described = []
    for k, state in enumerate(states):
        arrays[f"state{k}/params"] = state.params
        generators = None
        if state.batches is not None:
            generators, sampler_arrays = state.batches
            arrays.update(
                {f"state{k}/batches/{name}": array for name, array in sampler_arrays.items()}
            )
        described.append({"round": state.round, "generators": generators})
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "engine": ENGINE_VERSION,
        "run": run,
        "settings": None if settings is None else dict(settings),
        "agent": agent,
        "states": described,
    }
    write_archive(path, json.dumps(manifest, sort_keys=True).encode(), arrays)


def saved_settings(path: Path) -> dict[str, Any] | None:
    """The run settings ([`run_settings`][dpdl.runtime.checkpoint.run_settings]) that the
    checkpoint at `path` keeps; None where there is no such file, or it is not a checkpoint whole
    and unaltered (the agent that loads it says why)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        manifest, _ = read_checked_archive(path, FORMAT, FORMAT_VERSION, "a checkpoint")
    except FileFormatError:
        return None
    settings = manifest.get("settings") if isinstance(manifest, dict) else None
    return settings if isinstance(settings, dict) else None


def require_same_run(paths: list[Path], settings: Mapping[str, Any], workdir: Path) -> None:
    """Refuse, once and before any agent starts, a resume whose checkpoints (`paths`) were saved
    by a run with other `settings`, naming every setting that differs with both values."""
    for path in paths:
        saved = saved_settings(path)
        if saved is None or saved == dict(settings):
            continue
        changes = setting_changes(saved, settings)
        raise FileFormatError(
            f"--resume: the checkpoints in {workdir} belong to a run with other settings "
            f"({'; '.join(changes) or 'its noise design differs'}); resuming them would continue "
            "other numbers under another privacy claim. Resume with the options that run was "
            "started with, or start this run in another --workdir"
        )


def load_checkpoint(
    path: Path, run: str, agent: int, settings: Mapping[str, Any] | None = None
) -> list[AgentState]:
    """The states saved at `path` by agent `agent` of run `run`; [] when there is no file.

    Raises [`FileFormatError`][dpdl.errors.FileFormatError] naming `path` for a file that is not
    such a checkpoint, whole and unaltered; for a checkpoint of another run, it names every
    setting that differs from `settings` (this run's
    [`run_settings`][dpdl.runtime.checkpoint.run_settings]) with both values."""
    path = Path(path)
    if not path.exists():  # a FIFO or a folder in its place is refused, not taken as no file
        return []
    expected = (
        f"expected a checkpoint of agent {agent} of this run, written by dpdl (format {FORMAT} "
        f"{FORMAT_VERSION})"
    )
    manifest, arrays = read_checked_archive(path, FORMAT, FORMAT_VERSION, expected)
    try:
        if manifest["engine"] != ENGINE_VERSION:
            raise FileFormatError(
                f"{path} was written by engine version {manifest['engine']}, this is version "
                f"{ENGINE_VERSION}: its run "
                "would not continue the same numbers; start afresh (without resume)"
            )
        if manifest["agent"] != agent:
            raise FileFormatError(
                f"{path} is a checkpoint of agent {manifest['agent']}, not of agent {agent}"
            )
        if manifest["run"] != run:
            changes = setting_changes(manifest.get("settings"), settings or {}) if settings else []
            what = (
                "; ".join(changes)
                if changes
                else "its configuration, seed or noise design differ from this one's"
            )
            raise FileFormatError(
                f"{path} belongs to another run ({what}): resuming would continue other numbers "
                "under another privacy claim; resume with the options it was started with, or "
                "start afresh (without resume)"
            )
        states = []
        for k, described in enumerate(manifest["states"]):
            params = arrays.pop(f"state{k}/params")
            prefix = f"state{k}/batches/"
            sampler = {
                name[len(prefix) :]: arrays.pop(name)
                for name in list(arrays)
                if name.startswith(prefix)
            }
            generators = described["generators"]
            malformed_generators = not isinstance(generators, dict) and (
                generators is not None or sampler
            )
            if (
                not isinstance(described["round"], int)
                or params.dtype != np.float64
                or malformed_generators
            ):
                raise ValueError(f"state {k} is malformed")
            states.append(
                AgentState(
                    described["round"],
                    params,
                    None if generators is None else (generators, sampler),
                )
            )
        if arrays:
            raise ValueError(f"entries of no state: {sorted(arrays)[:5]}")
    except FileFormatError:  # of another run or engine: said as it is, not as a torn layout
        raise
    except (ValueError, KeyError, TypeError, RecursionError) as error:
        raise FileFormatError(
            f"{path} has a checksum but not the layout of a checkpoint ({error}); {expected}"
        ) from None
    return states


def _key_record(run: str, agent: int, epoch: int, key: str) -> dict[str, Any]:
    return {
        "format": KEY_FORMAT,
        "version": KEY_FORMAT_VERSION,
        "run": run,
        "agent": agent,
        "epoch": epoch,
        "key": key,
    }


def _key_checksum(record: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def save_agent_key(path: Path, raw: bytes, run: str, agent: int, epoch: int) -> None:
    """Write agent `agent`'s private key of phase `epoch` of run `run`, checksummed and bound to
    the run, atomically and readable by its owner only (as its checkpoints): a resumed agent
    reads it back ([`load_agent_key`][dpdl.runtime.checkpoint.load_agent_key]), so every seed it
    holds, and so the noise of every round it replays, is the one it drew before (the round's
    message is the same bytes)."""
    record = _key_record(run, agent, epoch, raw.hex())
    text = json.dumps({**record, "sha256": _key_checksum(record)}, sort_keys=True) + "\n"
    atomic_write(path, text.encode())  # a temporary file of mode 0600, renamed


def load_agent_key(path: Path, run: str, agent: int, epoch: int) -> bytes | None:
    """The private key [`save_agent_key`][dpdl.runtime.checkpoint.save_agent_key] wrote at `path`
    for agent `agent`, phase `epoch` of run `run`; None when there is no file. A file that is not
    such a record, whole and unaltered, or that belongs to another agent, phase or run, raises
    [`FileFormatError`][dpdl.errors.FileFormatError] naming it (another run's key would correlate
    this run's noise with that run's)."""
    path = Path(path)
    if not path.exists():
        return None
    data = read_regular(path, "agent key file", FileFormatError)
    try:
        stored = json.loads(data)
        checksum = stored.pop("sha256")
        expected = _key_record(run, agent, epoch, stored.get("key"))
        if not hmac.compare_digest(str(checksum), _key_checksum(stored)):
            raise ValueError("its checksum fails: altered or torn after it was written")
        if stored != expected:
            other = {
                k: stored.get(k) for k in ("run", "agent", "epoch") if stored.get(k) != expected[k]
            }
            raise ValueError(f"it is the key of another {', '.join(other)}")
        return bytes.fromhex(stored["key"])
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:
        raise FileFormatError(
            f"{path} is not agent {agent}'s key of this run ({error}); resume with the folder the "
            "run was started in, or start afresh (without resume)"
        ) from None
