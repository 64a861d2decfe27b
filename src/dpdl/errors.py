"""Errors that dpdl raises on bad input.

Every error a user can cause (a disconnected graph, a non-stochastic mixing matrix, a privacy budget
out of range, a missing data file) is a [`DpdlError`][dpdl.errors.DpdlError]; the CLI prints its
message as one line and exits non-zero instead of showing a traceback. The errors of a bad value are
also `ValueError` (and a missing dependency an `ImportError`), so code that catches the standard
exceptions keeps working. A run that started on good input and failed on the way (its models or
metrics stopped being finite) raises a [`DivergenceError`][dpdl.errors.DivergenceError], which the
CLI reports with its own exit status (3).
"""

from __future__ import annotations


class DpdlError(Exception):
    """Base class of the errors dpdl raises for bad input."""


class GraphError(DpdlError, ValueError):
    """The communication graph is unusable (disconnected, empty, unreadable)."""


class MixingMatrixError(DpdlError, ValueError):
    """The mixing matrix is not stochastic, not supported on the graph, or does not mix."""


class PrivacyParameterError(DpdlError, ValueError):
    """A privacy parameter (epsilon, delta, clipping threshold, steps) is out of its range."""


class DataError(DpdlError, ValueError):
    """A data set or data file is missing or malformed."""


class FileFormatError(DpdlError, ValueError):
    """A file dpdl reads back (a checkpoint) is not one it wrote for this run: truncated, altered,
    of another format (a pickle, random bytes) or of another configuration. The message names the
    file and what was expected."""


class ConfigError(DpdlError, ValueError):
    """An option or combination of options is not supported."""


class ResourceError(ConfigError):
    """A job that cannot fit: its estimated memory exceeds what this machine has available, or its
    estimated time a bound (`dpdl.jobspec.resources`); raised before anything large is
    allocated, naming the estimate, its largest term and the limit."""


class PeerFailure(DpdlError):
    """A neighbour of a runtime agent died or did not answer in time (names the agent and round)."""

    def __init__(self, message: str, agent: int, round_: int) -> None:
        super().__init__(message)
        self.agent = agent
        self.round = round_


class AuthenticationError(DpdlError):
    """A runtime message failed authentication: forged, altered, replayed or from another round."""


class DivergenceError(DpdlError):
    """A run's state (models, gradients after clipping, noise-added messages) or metrics stopped
    being finite: the message names the step, the agent where known and the likely cause (a step
    size too large, a loss returning NaN). Not a `ValueError`: the input was accepted, the run
    failed. `step`: the first step found not finite; `agent`: the first agent found (None where
    unknown); `cause`: the likely cause, in words; `seed`: the replicate, where a job has several
    (None where not known)."""

    #: The `dpdl` command's exit status for it (2 is bad input, found before the work).
    exit_status = 3

    def __init__(
        self,
        message: str,
        step: int,
        agent: int | None = None,
        cause: str = "",
        seed: int | None = None,
    ) -> None:
        super().__init__(message)
        self.step = step
        self.agent = agent
        self.cause = cause
        self.seed = seed

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:  # pickled back from a worker process
        return (DivergenceError, (str(self), self.step, self.agent, self.cause, self.seed))

    def of_seed(self, seed: int) -> DivergenceError:
        """This error, of replicate `seed` (its message prefixed with it)."""
        return DivergenceError(f"seed {seed}, {self}", self.step, self.agent, self.cause, seed)

    def record(self) -> dict[str, object]:
        """What a results folder's `FAILED.json` holds: the seed, step, agent, cause and
        message."""
        return {
            "seed": self.seed,
            "step": self.step,
            "agent": self.agent,
            "cause": self.cause,
            "message": str(self),
        }


class MissingDependencyError(DpdlError, ImportError):
    """A feature needs an optional dependency that is not installed (names the pip extra)."""
