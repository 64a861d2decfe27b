"""What a job will cost, from its sizes alone: peak memory (with its main terms named) and time,
checked before anything large is allocated.

A job's sizes are n agents, |E| edges, d parameters, whether W is dense, the mechanism, the data
(examples, features, the activations a torch model keeps per example) and the batch, steps and seeds
(`JobSizes`). `estimate` turns them into the bytes of each term that is live at the peak (the
networkx graph, W and its eigendecomposition, a dense noise design and its accounting, the agents'
`(n, d)` state and noise draws, the models kept per seed, the data, the per-example gradients `n B
d` of example-level clipping, a torch model's activations in training and in its evaluation chunk, a
quadratic task's curvatures) and into seconds (floating-point work of one step: gradient, mixing,
noise and clipping, plus the evaluations, at a rate measured on a 2-core machine, and the set-up:
graph, eigendecompositions, dense designs; approximate, within a few times either way).
`require_fits` raises a [`ResourceError`][dpdl.errors.ResourceError] naming the estimate, its
largest term and the limit when the memory exceeds `dpdl.scale.memory_limit` or the time
`time_limit` (30 days unless `DPDL_TIME_LIMIT` says otherwise), and logs the estimate otherwise (a
warning from an hour on).

`require_job_fits` is the check of a [`TrainConfig`][dpdl.jobspec.config.TrainConfig], which
[`dpdl.jobspec.job.build_job`][dpdl.jobspec.job.build_job] makes (so `dpdl train`, `run-local`,
`run-agent`, the points of `dpdl sweep` and options files); [`dpdl.fit`][dpdl.experiments.fit.fit],
[`dpdl.design_noise`][dpdl.experiments.fit.design_noise] and `dpdl noise` make theirs from their own
arguments.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field

from dpdl.choices import BLT_BUFFER, FACTORIZED_REGISTRY
from dpdl.errors import ConfigError, GraphError, ResourceError
from dpdl.graphs.readers import detect_format, graph_file_spec
from dpdl.graphs.sizes import declared_size
from dpdl.jobspec.config import TrainConfig
from dpdl.scale import (
    SPARSE_MIN_AGENTS,
    agent_test_count,
    format_bytes,
    graph_terms,
    memory_limit,
)
from dpdl.settings import TaskOptions

__all__ = [
    "DENSE_DESIGN_MATRICES",
    "TIME_LIMIT_ENV",
    "Estimate",
    "JobSizes",
    "TaskShape",
    "estimate",
    "format_seconds",
    "graph_size",
    "job_sizes",
    "noise_state",
    "require_design_fits",
    "require_fits",
    "require_job_fits",
    "task_shape",
    "time_limit",
    "toeplitz_fit_operations",
]

logger = logging.getLogger(__name__)

#: Environment variable bounding a run's estimated time (seconds, or with a suffix s, m, h, d),
#: or ``inf`` to check nothing.
TIME_LIMIT_ENV = "DPDL_TIME_LIMIT"
#: The bound without it: a run estimated beyond 30 days is refused as a mistake (``--steps 1e26``).
DEFAULT_TIME_LIMIT = 30 * 86400.0
#: Runs estimated beyond this are announced by a warning, shorter ones at INFO.
LONG_RUN_SECONDS = 3600.0

#: Floating-point operations per second the engine reaches on its numpy and torch kernels, and the
#: fixed cost of one step (Python, batch sampling): 2.5e9 to 3.5e9 measured on a 2-core machine
#: (logistic regression on a9a, least squares, DECOR on least squares), taken lower.
FLOP_RATE = 2e9
STEP_OVERHEAD = 1e-4
#: Floating-point operations per second of a torch model's forward and backward passes (float32
#: convolutions and matrix products through oneDNN and BLAS, agent by agent or vmapped): 21e9 to
#: 28e9 measured on a loaded 2-core machine (the MNIST MLP at the example level, LeNet and the
#: CNN on 148 agents; BENCHMARKS.md, "Estimates against runs"), about 1.5x more on a quiet one.
MODEL_FLOP_RATE = 25e9
#: Seconds of a job's set-up whatever its size: importing torch, numpy, scipy and dpdl (3.2 s
#: measured on a loaded 2-core machine), data, calibration, accounting.
SETUP_SECONDS = 3.0
#: Operations worth one Gaussian draw (numpy's ziggurat, per coordinate).
NORMAL_COST = 10

#: Dense n x n float64 matrices each mechanism's design and exact accounting hold at once: the
#: certified accountant's (:mod:`dpdl.accounting.sensitivity`: the agents' factor B, n x 2n for
#: Whisper's one secret and for DECOR on a graph of about n edges, its QR's Q, the right inverse,
#: their magnitudes and the residual's bound, about 16 n^2; 21 n^2 measured for DECOR on a ring of
#: 500 agents, the simulation's square root of R included), above the Whisper dual's 6.
#: Independent noise (ldp, cdp) is accounted in closed form.
DENSE_DESIGN_MATRICES = {
    "whisper": 16,
    "whisper-multiseed": 16,
    "decor": 16,
    "zero-sum": 16,
    "lppa": 16,
}
#: T x T float64 matrices an encoder optimisation holds besides the encoder and its inverse
#: (:func:`dpdl.factorization.mafalda.optimize_local`: X, its Cholesky factor, the gradient, the
#: utility's Gram matrix, its solves and the L-BFGS memory of 10 pairs).
OPTIMISER_MATRICES = 28
#: L-BFGS iterations an encoder optimisation takes per participation of a record (k of cyclic
#: (k, b)-participation: 79, 171 and 364 iterations at k = 10, 20, 40 on a ring), at most
#: :func:`~dpdl.factorization.mafalda.optimize_local`'s 2000, and the operations of one iteration
#: in units of T^3 at :data:`FLOP_RATE` (Cholesky factorisations and solves of the line search:
#: 0.45 to 0.63 measured, 1.29 s for 175 iterations at T = 320, k = 20, and 0.10 s for 79 at
#: T = 160, k = 10, on one thread of a loaded 2-core machine; taken higher). It was 200 until the
#: 148 encoders of MAFALDA-L-SGD on the Facebook ego graph (289 s) were estimated at 1.1 days.
OPTIMISER_ITERATIONS_PER_PARTICIPATION = 10
OPTIMISER_MAX_ITERATIONS = 2000
OPTIMISER_ITERATION_CUBES = 1
#: Time-correlated mechanisms whose few Toeplitz parameters are fit to the gossip by L-BFGS-B
#: (:mod:`dpdl.factorization.toeplitz`, :mod:`dpdl.factorization.blt`), the T x T float64 matrices
#: a fit holds (H, its diagonal tails, the lagged products' prefix sums, the exact losses' inverse
#: and Gram matrix), the evaluations of the objective a fit takes (measured on the Florentine
#: families at T = 320, k = 4, 20 and 40: BandMF 9 or 10, BLT 25 to 35; taken higher), the
#: operations of one in units of T^2 at :data:`FLOP_RATE` (power series and prefix sums: 36 at T =
#: 320, 16 at T = 2000; taken higher), and those of the exact losses that pick the fit over its
#: start in units of T^3 (two dense inverses and sensitivities: 0.54 T^3 each at T = 2000).
TOEPLITZ_FITTED = ("bandmf", "blt")
TOEPLITZ_MATRICES = 10
TOEPLITZ_EVALUATIONS = 50
TOEPLITZ_EVALUATION_SQUARES = 40
TOEPLITZ_CANDIDATE_CUBES = 2
#: DECOR's design from 1000 agents on (:data:`dpdl.mechanisms.decor.SPECTRAL_MIN_AGENTS`, the
#: sparse threshold): one eigendecomposition of the Laplacian and a certified account of a sparse
#: factor, in units of n^3 at :data:`FLOP_RATE` (a ring of 4039 agents, where the search runs:
#: 9.65 s, 0.29 n^3; the SNAP Facebook graph, where a bound settles it: 0.20 s).
DECOR_SPECTRAL_CUBES = 0.3
#: Mechanisms that draw one normal per edge and coordinate (a secret per edge).
EDGE_SECRETS = ("decor", "zero-sum", "lppa")
#: float64 copies of every agent's ``(n, d)`` parameters live in a step (parameters, gradients,
#: noise, the local step, its product with W, clipping's temporaries).
STATE_COPIES = 6
#: Bytes of one metric record kept in memory: 480 measured for the quadratic task's 7 metrics
#: (a dict of floats; tracemalloc over 20,000 records), doubled: a checkpoint copies the records
#: and the results write them as text. `--steps 1e9 --eval-every 1` keeps 10^9 of them.
RECORD_BYTES = 1000
#: Entries of the temporaries logistic regression works in per block of agents
#: (:data:`dpdl.tasks.logistic.BLOCK_ENTRIES`).
LOGREG_BLOCK_ENTRIES = 1 << 23


@dataclass(frozen=True)
class TaskShape:
    """The sizes of a task that cost memory and time.

    `dim`: parameters d. `examples` and `test_examples`: over all agents (0 for a task of
    full gradients). `features`: input values per example, stored `itemsize` bytes each, in
    `copies` copies (loaded, converted, ordered by agent). `kind`: `"quadratic"`,
    `"logreg"` or `"torch"`. A torch model keeps `activations` values per example for its
    backward pass, `widest` in its widest layer, and does `macs` multiply-adds per example
    forward; its evaluation takes `eval_chunk` agent x test-example pairs at once (None: all).
    """

    dim: int
    kind: str
    examples: int = 0
    test_examples: int = 0
    features: int = 0
    itemsize: int = 8
    copies: int = 3
    activations: int = 0
    widest: int = 0
    macs: int = 0
    eval_chunk: int | None = None


def _mlp(inputs: int, hidden: int, outputs: int, examples: int, tests: int) -> TaskShape:
    dim = inputs * hidden + hidden + hidden * outputs + outputs
    return TaskShape(dim, "torch", examples, tests, inputs, 4, 4, 2 * hidden + outputs, hidden, dim)


def task_shape(task: str, n: int, options: TaskOptions) -> TaskShape | None:
    """The shape of a named task of the catalogue on its full data (`dpdl.tasks.catalog`), for
    `n` agents; None for a task registered elsewhere (its shape is read once it is built)."""
    hidden, share = options.hidden, options.test_fraction
    if task == "quadratic":
        return TaskShape(2, "quadratic")
    if task == "least-squares":
        return TaskShape(options.dim, "quadratic")
    kept = options.data_fraction
    if task == "logreg-a9a":
        rows = round(48842 * kept)
        test = round(16281 * kept) if options.split == "files" else round(rows * share)
        return TaskShape(123, "logreg", rows - test, test, 123)
    if task in ("mnist-mlp", "mnist-linear"):
        images = round(70000 * kept)
        test = round(10000 * kept) if options.split == "files" else round(images * share)
        if task == "mnist-linear":
            return TaskShape(7850, "torch", images - test, test, 784, 4, 4, 10, 10, 7850)
        return _mlp(784, hidden, 10, images - test, test)
    if task == "housing-mlp":
        test = round(20640 * share)
        return _mlp(8, hidden, 1, 20640 - test, test)
    if task == "adult-mlp":
        return _mlp(108, hidden, 2, 32561, 16281)
    if task.endswith(("-cnn", "-lenet")):
        cnn = task.endswith("-cnn")
        examples = 60000 if options.examples_per_agent is None else n * options.examples_per_agent
        tests = 10000 if options.test_examples is None else min(options.test_examples, 10000)
        return TaskShape(
            20586 if cnn else 9814,
            "torch",
            examples,
            tests,
            784,
            4,
            3,
            activations=47000 if cnn else 5300,
            widest=12544 if cnn else 2352,
            macs=1_032_000 if cnn else 241_000,
            eval_chunk=20_000,
        )
    return None


def graph_size(spec: str, n: int | None, p: float | None) -> tuple[int, int] | None:
    """`(agents, edges)` of a built-in synthetic topology (the expected edges of `er`, arcs of
    `er-directed`) or of a graph file (as its header declares it:
    [`declared_size`][dpdl.graphs.sizes.declared_size]), without building it; None for a real
    graph, a registered source or a file too malformed to say (its reader names the problem)."""
    if isinstance(spec, str) and (file := graph_file_spec(spec)) is not None:
        fmt, path = file
        try:
            size = declared_size(path, detect_format(path) if fmt == "file" else fmt)
        except GraphError:
            return None
        return (size.nodes, max(size.edges, size.nodes - 1)) if size.nodes > 0 else None
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None  # the graph's own checks name a bad size
    p = p if isinstance(p, (int, float)) and 0 <= p <= 1 else 1.0
    edges = {
        "er": p * n * (n - 1) / 2,
        "er-directed": p * n * (n - 1),
        "ring": n,
        "torus": 2 * n,
        "complete": n * (n - 1) / 2,
        "star": n - 1,
        "exponential": n * max(1.0, math.log2(max(n, 2))),
    }.get(spec)
    return None if edges is None else (n, max(n - 1, round(edges)))


@dataclass(frozen=True)
class JobSizes:
    """What `estimate` reads: the graph (`n`, `edges`, `dense` W), the mechanism, and,
    for training, the task's shape and the run (`batch`, `clip_level`, `steps`, `seeds`,
    `eval_every`); `shape` None: the noise design alone (`dpdl noise`)."""

    n: int
    edges: int
    mechanism: str
    dense: bool
    shape: TaskShape | None = None
    batch: int = 1
    clip_level: str = "agent"
    steps: int = 0
    seeds: int = 1
    eval_every: int = 1
    #: Batches per cycle of a time-correlated mechanism's cyclic participation (None: not known,
    #: taken as 1, every step a participation).
    cycle: int | None = None
    #: Steps whose iterates are evaluated again to report each metric's average over them.
    average_last: int = 0
    #: Floats of noise state a time-correlated mechanism keeps per agent and coordinate (None:
    #: every step's seed, T; :func:`noise_state`).
    noise_state: int | None = None

    @property
    def records(self) -> int:
        """Metric records the run keeps: step 0, every `eval_every` steps and the last, and
        the last `average_last` iterates' (per seed)."""
        steps = max(self.steps, 0)
        return self.seeds * (steps // max(self.eval_every, 1) + 2 + min(self.average_last, steps))

    @property
    def encoders(self) -> int:
        """Local encoders a time-correlated mechanism holds (one per agent for `mafalda-l`;
        0 for the other mechanisms)."""
        if self.mechanism not in FACTORIZED_REGISTRY:
            return 0
        return self.n if self.mechanism == "mafalda-l" else 1

    @property
    def optimised(self) -> bool:
        """Whether the encoders are optimised (MAFALDA-SGD's), not fixed (DP-D-SGD's, AntiPGD's)."""
        return self.mechanism.startswith("mafalda")

    @property
    def fitted(self) -> bool:
        """Whether the encoder is a Toeplitz strategy fit to the gossip (BandMF's, BLT's): a few
        parameters, each evaluation of the objective `O(T^3)`."""
        return self.mechanism in TOEPLITZ_FITTED


@dataclass(frozen=True)
class Estimate:
    """Peak memory as named terms (bytes), and the run's time in seconds (None: no training)."""

    terms: dict[str, float] = field(default_factory=dict)
    seconds: float | None = None
    steps: int = 0

    @property
    def memory(self) -> float:
        """Estimated peak bytes: the terms added up (all live at once, an upper-leaning guess)."""
        return float(sum(self.terms.values()))

    @property
    def largest(self) -> tuple[str, float]:
        """The largest term, `(name, bytes)`."""
        return max(self.terms.items(), key=lambda item: item[1])

    def describe(self) -> str:
        """One line: the memory, its largest term, and the time when training."""
        name, size = self.largest
        text = (
            f"about {format_bytes(self.memory)} of memory (largest: {name}, {format_bytes(size)})"
        )
        if self.seconds is not None:
            text += f", about {format_seconds(self.seconds)} for {self.steps:,} steps"
        return text


def format_seconds(seconds: float) -> str:
    """`seconds` in the largest unit that keeps it above 1 (`3.2 h`, `4.1e+18 years`)."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.3g} {unit}" if value < 1e6 else f"{value:.2g} {unit}"
    return f"{seconds:.2g} s"


def _design_terms(sizes: JobSizes) -> dict[str, float]:
    """The graph, W (with its eigendecomposition when dense) and the noise design."""
    n = sizes.n
    terms = graph_terms(n, sizes.edges, sizes.dense)
    matrices = DENSE_DESIGN_MATRICES.get(sizes.mechanism, 0)
    if matrices:
        terms[
            f"{sizes.mechanism} design and accounting ({matrices} dense {n:,} x {n:,} float64)"
        ] = 8.0 * matrices * n * n
    if sizes.encoders and sizes.steps:
        steps = sizes.steps
        count = 2 * sizes.encoders + (sizes.encoders + OPTIMISER_MATRICES) * sizes.optimised
        count += TOEPLITZ_MATRICES * sizes.fitted
        terms[
            f"{sizes.mechanism} encoders, their inverses and optimisation ({count:,} x {steps:,} "
            f"x {steps:,} float64)"
        ] = 8.0 * count * steps * steps
    return terms


def _task_terms(sizes: JobSizes, shape: TaskShape) -> dict[str, float]:
    """The task's data and arrays, the agents' state and noise, a step's gradient temporaries and
    an evaluation's."""
    n, d, batch = sizes.n, shape.dim, sizes.batch
    terms = {
        f"agents' parameters, gradients and noise ({STATE_COPIES} x {n:,} x {d:,} float64)": 8.0
        * STATE_COPIES
        * n
        * d,
        f"final models of {sizes.seeds} seed(s) ({n:,} x {d:,} float64 each)": 8.0
        * sizes.seeds
        * n
        * d,
    }
    if sizes.steps:
        every = f"every {sizes.eval_every:,} of {sizes.steps:,} steps"
        terms[f"recorded metrics ({sizes.records:,} records, {every}, {sizes.seeds} seed(s))"] = (
            float(RECORD_BYTES) * sizes.records
        )
    if sizes.mechanism in EDGE_SECRETS:
        terms[f"noise draws, one per edge ({sizes.edges:,} x {d:,} float64)"] = (
            8.0 * sizes.edges * d
        )
    if sizes.encoders:
        kept = sizes.steps if sizes.noise_state is None else sizes.noise_state
        terms[f"noise state of {sizes.mechanism}, kept ({kept:,} x {n:,} x {d:,} float64)"] = (
            8.0 * kept * n * d
        )
    if shape.examples:
        rows = shape.examples + shape.test_examples
        terms[f"data ({rows:,} examples x {shape.features:,} values, {shape.copies} copies)"] = (
            float(shape.copies * shape.itemsize * rows * shape.features)
        )
    if shape.kind == "quadratic":
        terms[f"quadratic curvatures ({n:,} x {d:,} x {d:,} float64)"] = 8.0 * n * d * d
        if n < SPARSE_MIN_AGENTS:
            terms[f"evaluation of every agent on every objective ({n:,} x {n:,} x {d:,})"] = (
                3 * 8.0 * n * n * d
            )
    elif shape.kind == "logreg":
        rows = min(n * batch * d, LOGREG_BLOCK_ENTRIES)
        terms["batch rows of a block of agents"] = 2 * 8.0 * rows
        terms["evaluation margins of a block of agents"] = 8.0 * min(
            shape.test_examples * n, LOGREG_BLOCK_ENTRIES
        )
    elif shape.kind == "torch":
        terms[f"activations of a step ({n:,} agents x {batch:,} examples)"] = (
            2 * 4.0 * n * batch * shape.activations
        )
        if sizes.clip_level == "example":
            terms[f"per-example gradients ({n:,} x {batch:,} x {d:,} float32)"] = (
                2 * 4.0 * n * batch * d
            )
        pairs = n * shape.test_examples
        if shape.eval_chunk is not None:
            pairs = min(pairs, max(shape.eval_chunk, shape.test_examples))
        terms[f"evaluation activations ({pairs:,} agent x test-example pairs)"] = (
            2 * 4.0 * pairs * shape.widest
        )
    return terms


def _step_flops(sizes: JobSizes, shape: TaskShape) -> tuple[float, float]:
    """Floating-point work of one step, the evaluations spread over the steps between them: that
    of the engine's kernels (gradients of the linear tasks, mixing, noise, clipping, update), at
    `FLOP_RATE`, and that of a torch model's passes, at `MODEL_FLOP_RATE`."""
    n, d, batch = sizes.n, shape.dim, sizes.batch
    model = 0.0
    if shape.kind == "quadratic":
        gradient = 2.0 * n * d * d
        evaluation = 3.0 * n * (n if n < SPARSE_MIN_AGENTS else 1) * d * d
    elif shape.kind == "logreg":  # per-example clipping gathers and scales every example's row
        gradient = (4.0 if sizes.clip_level == "agent" else 40.0) * n * batch * d
        evaluation = 2.0 * n * shape.test_examples * d
    else:
        per_example = 3.0 if sizes.clip_level == "agent" else 5.0  # forward, backward, (norms)
        # every agent on its sample of the test set, the average model on all of it
        pairs = n * agent_test_count(shape.test_examples, n, None) + shape.test_examples
        model = 2.0 * max(shape.macs, d) * (
            per_example * n * batch + pairs / sizes.eval_every
        )  # fmt: skip
        gradient = evaluation = 0.0
    mixing = 2.0 * d * (n * n if sizes.dense else 2 * sizes.edges + n)
    draws = n + (sizes.edges if sizes.mechanism in EDGE_SECRETS else 0)
    noise = 0.0 if sizes.mechanism == "none" else NORMAL_COST * draws * d
    if sizes.encoders:  # dense: step t weighs the seeds of steps 0..t, T / 2 on average
        kept = sizes.steps / 2 if sizes.noise_state is None else sizes.noise_state
        noise += kept * n * d
    return gradient + mixing + noise + 10.0 * n * d + evaluation / sizes.eval_every, model


def _setup_seconds(sizes: JobSizes) -> float:
    """Building the graph, W's eigendecomposition when dense, and a dense design (a few dozen
    n x n factorisations; Whisper's dual at n = 600 took 9 s here)."""
    n = float(sizes.n)
    dense = 10.0 * n**3 if sizes.dense else 0.0
    design = 20.0 * DENSE_DESIGN_MATRICES.get(sizes.mechanism, 0) * n**3
    if sizes.mechanism == "decor" and n >= SPARSE_MIN_AGENTS:  # one eigendecomposition of L
        design = DECOR_SPECTRAL_CUBES * n**3
    if sizes.encoders and sizes.optimised:
        participations = -(-sizes.steps // (sizes.cycle or 1))
        iterations = min(
            OPTIMISER_ITERATIONS_PER_PARTICIPATION * participations, OPTIMISER_MAX_ITERATIONS
        )
        design += sizes.encoders * iterations * OPTIMISER_ITERATION_CUBES * float(sizes.steps) ** 3
    if sizes.fitted:
        design += toeplitz_fit_operations(sizes.steps)
    return SETUP_SECONDS + 2e-6 * (n + sizes.edges) + (dense + design) / FLOP_RATE


def toeplitz_fit_operations(steps: int) -> float:
    """Operations of one fit of a Toeplitz strategy over `steps` steps (BandMF's, BLT's): the
    objective's evaluations, `O(T^2)` each, and the exact losses, `O(T^3)`."""
    steps_f = float(steps)
    return (
        TOEPLITZ_EVALUATIONS * TOEPLITZ_EVALUATION_SQUARES * steps_f**2
        + TOEPLITZ_CANDIDATE_CUBES * steps_f**3
    )


def estimate(sizes: JobSizes) -> Estimate:
    """The peak memory of a job of these sizes, by term, and its time (module doc)."""
    terms = _design_terms(sizes)
    shape = sizes.shape
    if shape is None:
        return Estimate(terms)
    terms.update(_task_terms(sizes, shape))
    engine, model = _step_flops(sizes, shape)
    per_seed = _setup_seconds(sizes) + sizes.steps * (
        engine / FLOP_RATE + model / MODEL_FLOP_RATE + STEP_OVERHEAD
    )
    return Estimate(terms, sizes.seeds * per_seed, sizes.steps * sizes.seeds)


def _parse_seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}
    stripped = text.strip().lower()
    unit = next((u for u in sorted(units, key=len, reverse=True) if stripped.endswith(u)), "")
    try:
        value = float(stripped[: len(stripped) - len(unit)]) * units.get(unit, 1)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise ConfigError(
            f"{TIME_LIMIT_ENV}={text!r} is not a duration: give seconds, or a number with s, m, "
            "h or d (12h), or inf"
        )
    return value


def time_limit() -> float:
    """The longest estimated run allowed, in seconds: `DPDL_TIME_LIMIT`, else 30 days."""
    text = os.environ.get(TIME_LIMIT_ENV)
    return _parse_seconds(text) if text else DEFAULT_TIME_LIMIT


#: What a job refused for its memory is told to make smaller, unless its check says otherwise.
MEMORY_ADVICE = (
    "use fewer agents, fewer parameters, a smaller batch, a sparse design (ldp, cdp) or fewer "
    "evaluations (--eval-every)"
)


def require_fits(
    found: Estimate, what: str = "the job", log: bool = True, advice: str | None = None
) -> None:
    """Raise a [`ResourceError`][dpdl.errors.ResourceError] when `found` exceeds the memory a job
    may use (`dpdl.scale.memory_limit`) or its time `time_limit`, naming the estimate, its
    largest term and the limit, and `advice` (what to make smaller; by default a training job's
    sizes); else log it when `log` (a warning for a run longer than an hour)."""
    limit = memory_limit()
    if limit is not None and found.memory > limit[0]:
        name, size = found.largest
        raise ResourceError(
            f"{what} cannot fit in memory: it needs about {format_bytes(found.memory)} "
            f"(largest term: {name}, {format_bytes(size)}), more than the "
            f"{format_bytes(limit[0])} of {limit[1]}; "
            + (advice or MEMORY_ADVICE)
            + ", or set DPDL_MEMORY_LIMIT to override"
        )
    bound = time_limit()
    if found.seconds is not None and found.seconds > bound:
        raise ResourceError(
            f"{what} would take about {format_seconds(found.seconds)} ("
            + (f"{found.steps:,} steps, " if found.steps else "")
            + f"estimated from its sizes), more than the limit of {format_seconds(bound)}; "
            + (advice or "use fewer steps")
            + f", or set {TIME_LIMIT_ENV} (seconds, or 12h, 40d, inf) to allow it"
        )
    long_run = found.seconds is not None and found.seconds > LONG_RUN_SECONDS
    if log:
        level = logging.WARNING if long_run else logging.INFO
        logger.log(level, "%s: estimated %s", what, found.describe())


def job_sizes(
    config: TrainConfig,
    agents: tuple[int, int] | None = None,
    shape: TaskShape | None = None,
) -> JobSizes | None:
    """The sizes of `config` (resolved), with the graph's `(agents, edges)` once it is known
    (else those of a synthetic topology, or None) and the task's `shape` once it is built (else
    the catalogue's, or none: then the design alone is estimated)."""
    agents = agents or graph_size(config.graph, config.n, config.p)
    if agents is None:
        return None
    n, edges = agents
    shape = shape or task_shape(config.task, n, config.task_options)
    cycle = config.cycle
    if cycle is None and shape is not None and shape.examples:
        cycle = max(1, shape.examples // n // config.batch_size)  # the default, on a mean agent
    return JobSizes(
        n,
        edges,
        config.mechanism,
        dense=n < SPARSE_MIN_AGENTS,
        shape=shape,
        batch=config.batch_size,
        clip_level=config.clip_level,
        steps=config.steps,
        seeds=len(config.seeds),
        eval_every=config.eval_every,
        cycle=cycle,
        average_last=config.average_last,
        noise_state=noise_state(config, cycle),
    )


def noise_state(config: TrainConfig, cycle: int | None) -> int | None:
    """The floats of noise state per agent and coordinate `config`'s time-correlated mechanism
    keeps ([`plan`][dpdl.mechanisms.noise_streams.plan] of its encoder): none for DP-D-SGD, one
    seed for AntiPGD, `bands - 1` for the banded strategies (`bands` by default the cycle, at
    most T), the buffer for BLT; None (every seed, T) for the dense ones and any other."""
    steps = config.steps
    bands = config.bands or cycle or steps
    banded = bands - 1 if bands < steps else None  # T bands: drawn densely
    buffer = config.buffer or BLT_BUFFER
    return {
        "dp-dsgd": 0 if steps > 1 else None,
        "antipgd": 1 if steps > 2 else None,
        "bsr": banded,
        "bandmf": banded,
        "bisr": banded,
        "blt": buffer if buffer < steps else None,
    }.get(config.mechanism)


def require_job_fits(
    config: TrainConfig,
    agents: tuple[int, int] | None = None,
    shape: TaskShape | None = None,
    log: bool = True,
) -> bool:
    """Check `config`'s estimate (`job_sizes`, `require_fits`) when its sizes are
    known; returns whether they were."""
    sizes = job_sizes(config, agents, shape)
    if sizes is not None:
        require_fits(estimate(sizes), f"the job (n = {sizes.n:,} agents, {config.task})", log)
    return sizes is not None


def require_design_fits(mechanism: str, agents: tuple[int, int] | None, what: str) -> bool:
    """Check the noise design of `mechanism` alone (graph, W, dense design: memory and time) on
    a graph of `agents` = `(n, edges)`, when known; returns whether it was."""
    if agents is None:
        return False
    n, edges = agents
    sizes = JobSizes(n, edges, mechanism, dense=n < SPARSE_MIN_AGENTS)
    advice = "use fewer agents or a design accounted in closed form (ldp, cdp)"
    require_fits(Estimate(estimate(sizes).terms, _setup_seconds(sizes)), what, advice=advice)
    return True
