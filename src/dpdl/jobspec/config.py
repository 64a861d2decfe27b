"""A training run's settings, declared once: [`TrainConfig`][dpdl.jobspec.config.TrainConfig].

Each field carries its default, help text, command-line option, choices and range
([`dpdl.settings.setting`][dpdl.settings.setting]); the `dpdl train`, `run-agent` and `run-local`
options are generated from them ([`dpdl.settings.add_arguments`][dpdl.settings.add_arguments]), the
parsed options become a `TrainConfig` by [`dpdl.settings.from_options`][dpdl.settings.from_options],
and a `TrainConfig` made in Python is checked against the same declarations. Light: this module
imports the standard library, [`dpdl.choices`][dpdl.choices], [`dpdl.errors`][dpdl.errors] and
[`dpdl.settings`][dpdl.settings] only, so `dpdl --help` stays fast.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from dpdl.choices import (
    ALGORITHMS,
    CALIBRATION_REGISTRY,
    CLIP_LEVELS,
    FACTORIZED_OPTIONS,
    FACTORIZED_REGISTRY,
    GRAPH_FILE_FORMATS,
    GRAPH_SOURCES,
    INJECTIONS,
    MECHANISM_REGISTRY,
    MIXING_RULE_REGISTRY,
    NEIGHBOURING,
    RANDOM_GRAPHS,
    REAL_GRAPHS,
    SCHEDULES,
    SYNTHETIC_GRAPHS,
    TASK_REGISTRY,
)
from dpdl.errors import ConfigError
from dpdl.settings import DesignOptions, TaskOptions, TrackingOptions, check_fields, setting

__all__ = ["DEFAULT_STEP_SIZES", "TrainConfig"]

#: Step size and schedule used when the user gives none: the papers' choices where they state one
#: (Whisper's quadratic: 1e-2 / sqrt(t)); for a9a the largest value of the papers' grid.
DEFAULT_STEP_SIZES: dict[str, tuple[float, str]] = {
    "quadratic": (1e-2, "inv-sqrt"),
    "least-squares": (0.1, "constant"),
    "logreg-a9a": (0.1, "constant"),
    "mnist-mlp": (0.1, "constant"),
    "mnist-linear": (0.1, "constant"),
    "housing-mlp": (0.05, "constant"),
    "adult-mlp": (0.5, "constant"),
    "mnist-cnn": (0.05, "constant"),
    "fashion-cnn": (0.05, "constant"),
    "mnist-lenet": (0.1, "constant"),
    "fashion-lenet": (0.1, "constant"),
}


def _graph_help() -> str:
    """The `--graph` help, with the graph sources registered when it is read."""
    others = [
        name for name in GRAPH_SOURCES.names() if name not in SYNTHETIC_GRAPHS + tuple(REAL_GRAPHS)
    ]
    registered = f"; a registered graph source ({', '.join(others)})" if others else ""
    return (
        f"topology: one of {', '.join(SYNTHETIC_GRAPHS)}; a real graph ({', '.join(REAL_GRAPHS)})"
        f"{registered}; "
        "or a graph file, file:PATH (format told by the extension .npz/.graphml/.gml, else by the "
        "content) or FORMAT:PATH, "
        "FORMAT one of: "
        f"{'; '.join(f'{name}: {what}' for name, what in GRAPH_FILE_FORMATS.items())}. "
        "Default: er"
    )


def _mechanism_help() -> str:
    """The `--mechanism` help, with the mechanisms registered when it is read."""
    return (
        f"noise mechanism: none, {', '.join(MECHANISM_REGISTRY.names())}; or noise correlated "
        f"over time under cyclic participation (example-level, see --cycle): "
        f"{', '.join(FACTORIZED_REGISTRY.names())} (default ldp)"
    )


def _drawn_at_random(graph: str) -> bool:
    """Whether `graph` names a graph drawn from a seed: a built-in random source, or a source a
    plugin registered (its own code takes the seed); not another built-in topology, a real graph
    or a graph file."""
    if graph not in GRAPH_SOURCES:
        return False  # a graph file
    target = GRAPH_SOURCES.entry(graph).target
    module = target.partition(":")[0] if isinstance(target, str) else target.__module__
    return graph in RANDOM_GRAPHS or module != "dpdl.graphs.sources"


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training job (the resolved form is saved with its results).

    Every field is checked on construction (type, choices, range), with a
    [`ConfigError`][dpdl.errors.ConfigError] naming the field;
    [`resolved`][dpdl.jobspec.config.TrainConfig.resolved] checks how the fields fit together."""

    task: str = setting(
        "logreg-a9a", "learning task (default logreg-a9a)", choices=TASK_REGISTRY.names
    )
    graph: str = setting("er", _graph_help, group="graph")
    n: int = setting(
        20, "number of agents for synthetic graphs (default 20)", positive=True, group="graph"
    )
    p: float = setting(
        0.5, "Erdos-Renyi edge probability (default 0.5)", group="graph", interval="[0, 1]"
    )
    #: Draw random topologies from this seed instead of each replicate's: one graph for every seed.
    graph_seed: int | None = setting(
        None,
        "draw a random topology (er, er-directed) from this seed, the same graph for every --seed "
        "(LPPA's experiments fix one graph); default: each seed draws its own",
        group="graph",
        interval="[0, inf)",
    )
    mixing: str = setting(
        "metropolis-hastings",
        "mixing rule (default metropolis-hastings)",
        choices=MIXING_RULE_REGISTRY.names,
        group="graph",
    )
    mechanism: str = setting("ldp", _mechanism_help)
    eps: float = setting(10.0, "target epsilon (default 10)", group="privacy", interval="(0, inf)")
    delta: float = setting(1e-5, "target delta (default 1e-5)", group="privacy", interval="(0, 1)")
    #: A budget in Gaussian DP (mu-GDP) in place of ``eps`` for the time-correlated mechanisms,
    #: whose accountant is Gaussian DP (MAFALDA-SGD Thm. 8); the run states ``eps`` as what mu
    #: gives at ``delta`` (:func:`dpdl.jobspec.factorized.with_gdp_budget`).
    gdp_mu: float | None = setting(
        None,
        "for the time-correlated mechanisms: a budget of mu-Gaussian DP in place of --eps (the "
        "MAFALDA-SGD code's trade-off grid): the noise meets mu exactly, never above it, and eps "
        "is what mu gives at --delta (default: none, --eps is the budget)",
        group="privacy",
        interval="(0, inf)",
        metavar="MU",
    )
    #: What neighbouring datasets differ in at example level, for the time-correlated mechanisms.
    neighbouring: str = setting(
        "replace",
        "for the time-correlated mechanisms: replace (one example replaced: a batch mean moves by "
        "at most 2C / smallest batch) or add-remove (one example added or removed: each clipped "
        "batch sum is divided by its agent's smallest batch, fixed, and moves by at most C / "
        "smallest batch, as the MAFALDA-SGD code) (default replace)",
        choices=NEIGHBOURING,
        group="privacy",
    )
    steps: int = setting(
        5000, "number of D-SGD steps T (default 5000)", positive=True, group="privacy"
    )
    #: A length in epochs of the mean agent's data in place of ``steps``, resolved against the
    #: built task (:func:`dpdl.jobspec.job.with_epochs`): LPPA's protocol counts epochs.
    epochs: int | None = setting(
        None,
        "the run's length in epochs of the mean agent's data, in place of --steps: T = epochs x "
        "ceil(mean agent's examples / --batch-size), with an evaluation every epoch (LPPA's "
        "protocol; default: none, --steps is the length)",
        positive=True,
        group="training",
        metavar="E",
    )
    #: ``inf``: no clipping, for gradient tracking, whose injected noise is not calibrated.
    clip: float = setting(
        0.1,
        "clipping threshold C; inf: no clipping, for --algorithm dsgt, whose injected noise is "
        "not calibrated (default 0.1)",
        group="privacy",
        interval="(0, inf]",
    )
    clip_level: str = setting(
        "agent",
        "agent: clip each agent's batch gradient; example: clip each example's gradient, Poisson "
        "batches, example-level PLD accounting (default agent)",
        choices=CLIP_LEVELS,
        group="training",
    )
    calibration: str = setting(
        "exact",
        lambda: f"how eps becomes the noise: {CALIBRATION_REGISTRY.described()} (default exact)",
        choices=CALIBRATION_REGISTRY.names,
        group="privacy",
    )
    batch_size: int = setting(
        128, "batch size per agent (default 128)", positive=True, group="training"
    )
    lr: float | None = setting(
        None,
        "step size eta (default: the task's, 0.1 for logreg-a9a)",
        group="training",
        interval="(0, inf)",
    )
    schedule: str | None = setting(
        None,
        "step-size schedule: constant, inv-sqrt (eta / sqrt(t)) or step (eta up to --decay-after, "
        "then --decay-factor x eta) (default: the task's)",
        choices=SCHEDULES,
        group="training",
    )
    #: The ``step`` schedule's decay (:class:`~dpdl.jobspec.engine.StepSize`): MAFALDA-SGD's
    #: released image code multiplies its step size by 0.1 once, after step 81 of 320.
    decay_after: int | None = setting(
        None,
        "for --schedule step: the last step at the full step size (default: none)",
        positive=True,
        group="training",
        metavar="T",
    )
    decay_factor: float = setting(
        0.1,
        "for --schedule step: the step size after --decay-after, times eta (default 0.1)",
        group="training",
        interval="(0, inf)",
    )
    #: Batches per pass over each agent's data (b of cyclic (k, b)-participation) for the
    #: mechanisms of :data:`~dpdl.choices.FACTORIZED_REGISTRY`; None: the smallest agent's examples
    #: // ``batch_size``.
    cycle: int | None = setting(
        None,
        "for the time-correlated mechanisms (dp-dsgd, antipgd, mafalda, ...): batches per "
        "pass over each agent's data, which is cut once into that many batches used in turn "
        "(b of cyclic (k, b)-participation; default: the smallest agent's examples // "
        "--batch-size); with --mechanism none, the same batches without noise (their "
        "reference)",
        positive=True,
        group="training",
        metavar="B",
    )
    #: Bands of the banded strategies (``bsr``, ``bandmf``, ``bisr``); None: the cycle b.
    bands: int | None = setting(
        None,
        "for the banded time-correlated mechanisms (bsr, bandmf: C banded; bisr: C^-1 banded): "
        "how many of C's (C^-1's) Toeplitz coefficients are nonzero, at most --steps (default: "
        "the cycle b, so that no two steps of one cyclic pattern share a band)",
        positive=True,
        group="training",
        metavar="P",
    )
    #: The buffer size d of ``blt`` (buffered linear Toeplitz); None: 4.
    buffer: int | None = setting(
        None,
        "for --mechanism blt: the buffer size d, how many (theta, omega) pairs define C, and the "
        "floats of noise state kept per agent and coordinate (default 4)",
        positive=True,
        group="training",
        metavar="D",
    )
    eval_every: int = setting(
        100, "evaluate every k steps (default 100)", positive=True, group="training"
    )
    #: Report every metric also averaged over the iterates of the last ``average_last`` steps.
    average_last: int = setting(
        0,
        "also report each metric averaged over the iterates of the last N steps, as "
        "<metric>_tail (DECOR's released least squares averages its last 200); 0: none (default "
        "0)",
        group="training",
        interval="[0, inf)",
        metavar="N",
    )
    seeds: tuple[int, ...] = setting(
        (0,),
        "one or more seeds; each is a full replicate (default 0)",
        option="seed",
        group="training",
        interval="[0, inf)",
        unique=True,
    )
    #: Probability that an agent misses a round (:mod:`dpdl.jobspec.dropouts`), drawn from the
    #: run seed; 0: none.
    dropout: float = setting(
        0.0,
        "each agent misses each round (computes and sends nothing; its neighbours mix what "
        "arrived) independently with this probability, drawn from the seed: the same rounds in "
        "train and run-local (default 0)",
        group="dropouts",
        interval="[0, 1)",
        metavar="RATE",
    )
    #: A CSV file of ``round,agent`` rows, the rounds each agent misses (instead of a rate).
    dropout_schedule: str | None = setting(
        None,
        "read the rounds agents miss from this CSV file (header round,agent; rounds 1..T), "
        "instead of drawing them at --dropout's rate",
        group="dropouts",
        metavar="FILE",
    )
    #: Dropout-robust seed recovery: the alive holders of a shared seed add the missing holders'
    #: share (:meth:`dpdl.accounting.noise.GaussianNoise.after_dropouts`).
    dropout_recovery: bool = setting(
        False,
        "dropout-robust correlated noise: in each round the alive holders of a shared seed add "
        "the share of its missing holders, so pairwise-cancelling noise still cancels (the "
        "round's privacy is accounted as it is, and may be lower)",
        group="dropouts",
    )
    task_options: TaskOptions = setting(default_factory=TaskOptions)  # noqa: RUF009 - setting() returns a dataclasses.field
    design: DesignOptions = setting(default_factory=DesignOptions)  # noqa: RUF009 - setting() returns a dataclasses.field
    #: Draw batches and noise agent by agent, from the seeds agents with keys derived from this
    #: number agree on: the models of a runtime run with the same key seed (:mod:`dpdl.runtime`).
    key_seed: int | None = setting(
        None,
        "derive the agents' X25519 keys from this number; every agent then draws its batches and "
        "noise from the seeds they agree on, so train and run-local/run-agent with the same key "
        "seed give the same models (a reproducibility check; a deployment leaves it out and draws "
        "fresh keys)",
        group="secrets",
    )
    #: ``"dsgd"``, or ``"dsgt"``: gradient tracking (LPPA eqs. (2)-(3)), whose ``mechanism`` is then
    #: the noise injected into the tracking variable (none, lppa, dp; see ``tracking``), not
    #: calibrated to (eps, delta): no privacy guarantee is reported (``dpdl audit`` attacks it).
    algorithm: str = setting(
        "dsgd",
        "dsgd, or dsgt: gradient tracking, with --mechanism none, lppa (LPPA's noise flow) or dp "
        "(i.i.d.) injected into the tracking variable, not calibrated to (eps, delta) (default "
        "dsgd)",
        choices=ALGORITHMS,
        group="gradient tracking",
    )
    tracking: TrackingOptions = setting(default_factory=TrackingOptions)  # noqa: RUF009 - setting() returns a dataclasses.field

    def __post_init__(self) -> None:
        check_fields(self)
        self.design.check_applies(self.mechanism)
        self._check_dropouts()
        self.tracking.check_applies(self.algorithm)
        self.task_options.check_applies(self.task)

    def resolved(self) -> TrainConfig:
        """Fill the task's default step size and schedule; check the options fit together."""
        if not self.seeds:
            raise ConfigError("give at least one seed")
        if math.isinf(self.clip) and self.algorithm != "dsgt":
            raise ConfigError(
                f"clip (--clip) inf: D-SGD's mechanism {self.mechanism!r} is accounted for a "
                "clipping threshold; give a finite one (no clipping is for --algorithm dsgt, whose "
                "injected noise is not calibrated)"
            )
        if self.algorithm == "dsgt" and self.mechanism not in INJECTIONS:
            raise ConfigError(
                f"gradient tracking injects {', '.join(INJECTIONS)} noise, not {self.mechanism!r}"
            )
        self._check_strategy_options()
        if self.cycled:
            self._check_factorized()
        else:
            given = [
                f"{name} (--{option})"
                for name, option, value, default in (
                    ("cycle", "cycle", self.cycle, None),
                    ("gdp_mu", "gdp-mu", self.gdp_mu, None),
                    ("neighbouring", "neighbouring", self.neighbouring, "replace"),
                )
                if value != default
            ]
            if given:
                raise ConfigError(
                    f"{', '.join(given)} applies to the time-correlated mechanisms "
                    f"({', '.join(FACTORIZED_REGISTRY.names())}) and to none in cyclic batches, "
                    f"not to {self.mechanism!r}"
                )
        if self.epochs is not None:
            self._check_epochs()
        if self.graph_seed is not None and not _drawn_at_random(self.graph):
            raise ConfigError(
                f"graph_seed (--graph-seed) {self.graph_seed}: graph {self.graph!r} is not drawn "
                f"from a seed (the built-in random graphs are {', '.join(RANDOM_GRAPHS)}); leave "
                "it unset"
            )
        if self.average_last > self.steps:
            raise ConfigError(
                f"average_last (--average-last) is {self.average_last}, more than the "
                f"{self.steps} steps"
            )
        if self.task not in DEFAULT_STEP_SIZES and self.lr is None:  # a registered task
            raise ConfigError(f"task {self.task!r} has no default step size: give one (--lr)")
        eta, schedule = DEFAULT_STEP_SIZES.get(self.task, (self.lr, "constant"))
        schedule = self.schedule or schedule
        if (schedule == "step") != (self.decay_after is not None) or (
            schedule != "step" and self.decay_factor != TrainConfig.decay_factor
        ):
            raise ConfigError(
                "schedule (--schedule) step decays the step size after --decay-after steps by "
                "--decay-factor, and no other schedule does; got schedule "
                f"{schedule!r}, decay after {self.decay_after}, decay factor {self.decay_factor}"
            )
        return replace(self, lr=self.lr if self.lr is not None else eta, schedule=schedule)

    def _check_strategy_options(self) -> None:
        """`bands` and `buffer` go to the time-correlated mechanisms that take them
        (`FACTORIZED_OPTIONS`), and fit in the run's steps."""
        takes = FACTORIZED_OPTIONS.get(self.mechanism, ())
        for name in ("bands", "buffer"):
            value = getattr(self, name)
            if value is None:
                continue
            if name not in takes:
                users = [key for key, names in FACTORIZED_OPTIONS.items() if name in names]
                raise ConfigError(
                    f"{name} (--{name}) {value} applies to the time-correlated mechanisms "
                    f"{', '.join(users)}, not to {self.mechanism!r}"
                )
            if value > self.steps:
                raise ConfigError(
                    f"{name} (--{name}) is {value}, more than the {self.steps} steps (--steps)"
                )

    def _check_epochs(self) -> None:
        """A length in epochs replaces the steps and the evaluation's period, which it sets."""
        given = [
            f"{name} (--{name.replace('_', '-')})"
            for name in ("steps", "eval_every")
            if getattr(self, name) != getattr(TrainConfig, name)
        ]
        if given:
            raise ConfigError(
                f"epochs (--epochs) {self.epochs} sets the run's steps and evaluates every epoch; "
                f"give it or {' and '.join(given)}, not both"
            )
        if self.cycled:
            raise ConfigError(
                f"epochs (--epochs) {self.epochs}: mechanism {self.mechanism!r} cycles each "
                "agent's examples in --cycle batches; its length is passes x cycle (--steps)"
            )

    def _check_dropouts(self) -> None:
        """A rate and a file are two ways to say one thing; recovery needs some dropouts and
        noise made of shared seeds; dropouts are implemented for D-SGD with per-round noise."""
        if self.dropout and self.dropout_schedule is not None:
            raise ConfigError(
                "give --dropout RATE or --dropout-schedule FILE, not both "
                f"(got {self.dropout} and {self.dropout_schedule!r})"
            )
        dropouts = bool(self.dropout) or self.dropout_schedule is not None
        if self.dropout_recovery and not dropouts:
            raise ConfigError(
                "--dropout-recovery acts on dropouts: give --dropout RATE or --dropout-schedule"
            )
        if dropouts and (self.algorithm != "dsgd" or self.mechanism in FACTORIZED_REGISTRY):
            raise ConfigError(
                "dropouts are implemented for D-SGD with noise drawn afresh each round, not for "
                f"--algorithm {self.algorithm} with --mechanism {self.mechanism}"
            )

    @property
    def cycled(self) -> bool:
        """Whether the run cycles each agent's examples in fixed batches: a time-correlated
        mechanism, or no noise with `cycle` given (their non-private reference)."""
        return self.mechanism in FACTORIZED_REGISTRY or (
            self.mechanism == "none" and self.cycle is not None
        )

    def _check_factorized(self) -> None:
        """The time-correlated mechanisms are accounted for examples cycled in fixed batches
        (MAFALDA-SGD Theorem 8 under cyclic participation), by their own calibration, in the
        simulation's D-SGD."""
        problems = [
            f"{name} {value!r}, not {wanted!r}"
            for name, value, wanted in (
                ("clip_level (--clip-level)", self.clip_level, "example"),
                ("calibration (--calibration)", self.calibration, "exact"),
                ("algorithm (--algorithm)", self.algorithm, "dsgd"),
            )
            if value != wanted
        ]
        if self.key_seed is not None:
            problems.append("key_seed (--key-seed) given: its agents draw no shared seeds")
        if problems:
            what = (
                "no noise in cyclic batches (--cycle), the reference of the time-correlated "
                "mechanisms, runs as they do"
                if self.mechanism == "none"
                else f"mechanism {self.mechanism!r} correlates each agent's noise over time"
            )
            raise ConfigError(
                f"{what}: examples clipped one by one and cycled in fixed batches, with its own "
                "exact calibration, in the simulation's D-SGD: " + "; ".join(problems)
            )

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seeds"] = list(self.seeds)
        return data
