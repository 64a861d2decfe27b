"""The names and defaults the command line offers (tasks, mechanisms, graphs, ...), apart from the
code they name.

They live here, in a module that imports nothing heavy, so that `dpdl --help` builds its parser
without importing torch, scipy or networkx (seconds) for names it only prints. Each home module
re-exports its names from here (`dpdl.tasks.TASKS`, `dpdl.accounting.CALIBRATIONS`, ...).

Mechanisms, tasks, graph sources, mixing rules, threat models, calibrations, DECOR's couple
searches and the quadratics' starting points are open: each has one
[`Registry`][dpdl.registry.Registry] here (`MECHANISM_REGISTRY`, `TASK_REGISTRY`,
`GRAPH_SOURCES`, `MIXING_RULE_REGISTRY`, `THREAT_REGISTRY`,
`CALIBRATION_REGISTRY`, `DECOR_SEARCH_REGISTRY`, `START_REGISTRY`) whose built-in
entries name their code by import path, imported on first use; code outside the package registers
more with `@REGISTRY.register(name, help=...)`. The tuples and dicts of names below
(`MECHANISM_NAMES`, `TASKS`, ...) are the built-in entries, read from the registries;
the command line reads the registries themselves, so it offers what plugins registered too.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpdl.errors import GraphError, MixingMatrixError
from dpdl.registry import Registry

__all__ = [
    "ADJACENCY_KEY",
    "ALGORITHMS",
    "BACKENDS",
    "BLT_BUFFER",
    "CALIBRATIONS",
    "CALIBRATION_REGISTRY",
    "CLIP_LEVELS",
    "DECOR_SEARCHES",
    "DECOR_SEARCH_REGISTRY",
    "DEFAULT_TRIALS",
    "DISTRIBUTIONS",
    "EXECUTORS",
    "FACTORIZED_NAMES",
    "FACTORIZED_OPTIONS",
    "FACTORIZED_REGISTRY",
    "GRAPH_FILE_FORMATS",
    "GRAPH_SOURCES",
    "IMAGE_TASKS",
    "INJECTIONS",
    "MACS",
    "MECHANISM_NAMES",
    "MECHANISM_REGISTRY",
    "MIXING_RULE_NAMES",
    "MIXING_RULE_REGISTRY",
    "MULTISEED_MAX_N",
    "NEIGHBOURING",
    "PARTITIONS",
    "RANDOM_GRAPHS",
    "REAL_GRAPHS",
    "REPRODUCTIONS_INSTALL",
    "REPRODUCTION_REGISTRY",
    "SAMPLERS",
    "SCHEDULES",
    "START_REGISTRY",
    "SWEEP_REGISTRY",
    "SYNTHETIC_GRAPHS",
    "TASKS",
    "TASK_METRICS",
    "TASK_REGISTRY",
    "THREAT_NAMES",
    "THREAT_REGISTRY",
    "VIEW_MECHANISMS",
    "TaskMetrics",
    "mechanism_names",
]

#: Graph sources by CLI name: each target is called ``source(spec, n, p, seed)`` and returns a
#: networkx graph (:func:`dpdl.graphs.build_graph`). Graph files (``FORMAT:PATH``) are apart.
GRAPH_SOURCES = Registry("graph", GraphError)
for _name, _help in {
    "er": "Erdos-Renyi G(n, p) (with --n, --p, --seed)",
    "er-directed": "strongly connected directed Erdos-Renyi G(n, p), LPPA's (mix with sinkhorn)",
    "ring": "cycle of n agents",
    "torus": "2-d torus grid with n = rows * cols agents",
    "complete": "complete graph of n agents",
    "star": "star with centre 0 and n - 1 leaves",
    "exponential": "static exponential graph: agent i linked to i +/- 2^k mod n",
}.items():
    GRAPH_SOURCES.add(_name, f"dpdl.graphs.sources:{_name.replace('-', '_')}", _help)

#: The built-in graph sources that draw the graph from the seed (``--graph-seed`` fixes it).
RANDOM_GRAPHS = ("er", "er-directed")

#: Synthetic topologies by CLI name (``er`` also takes ``p`` and ``seed``;
#: :func:`dpdl.graphs.build_graph`): the built-in synthetic :data:`GRAPH_SOURCES`.
SYNTHETIC_GRAPHS = GRAPH_SOURCES.names()

#: Real graphs, by CLI name, with what is kept of them (:func:`dpdl.graphs.real_graph`).
REAL_GRAPHS: dict[str, str] = {
    "florentine": "Padgett's Florentine families (15 nodes, 20 edges)",
    "karate": "Zachary's karate club (34 nodes, 78 edges)",
    "davis": "Davis Southern Women, bipartite women/events (32 nodes, 89 edges)",
    "les-miserables": "Les Miserables co-appearances (77 nodes, 254 edges)",
    "facebook-ego-<id>": "SNAP ego-Facebook ego network <id> (0, 107, 348, 414, 686, 698, 1684, "
    "1912, 3437, 3980): largest component of the alters' friendships",
    "facebook": "SNAP ego-Facebook combined graph (4039 nodes, 88234 edges)",
    "gnutella": "SNAP p2p-Gnutella08 overlay, largest connected component (6299 nodes)",
    "gnutella-<k>": "the first k nodes a breadth-first search of the Gnutella overlay reaches "
    "from its best-connected peer, with their links (a connected sample of a real P2P overlay)",
    "collegemsg": "UC Irvine CollegeMsg messages as a static undirected graph, largest component",
}
for _name, _help in REAL_GRAPHS.items():
    GRAPH_SOURCES.add(_name, "dpdl.graphs.sources:real", _help)

#: The array of an ``.npz`` graph file that holds a dense adjacency matrix
#: (:mod:`dpdl.graphs.readers`).
ADJACENCY_KEY = "adjacency"

#: Graph file formats by prefix, with what each expects
#: (:func:`dpdl.graphs.readers.read_graph_file`).
GRAPH_FILE_FORMATS: dict[str, str] = {
    "edgelist": "text, one edge 'u v' per line, integer ids ('#' or '%' comments, extra columns "
    "ignored, .gz read)",
    "decentralizepy": "decentralizepy's edges file: the node count n on the first line, then 'u "
    "v' per line, ids 0..n-1",
    "npz": f"numpy .npz with a symmetric adjacency matrix under the key '{ADJACENCY_KEY}', "
    "or a scipy.sparse matrix saved by scipy.sparse.save_npz (nonzero off-diagonal entries are "
    "edges)",
    "graphml": "GraphML (as networkx.write_graphml writes it; .gz read)",
    "gml": "GML (nodes named by their 'id'; .gz read)",
}

#: Mixing rules by CLI name: each target is called ``rule(graph)`` and returns the mixing matrix
#: (:func:`dpdl.graphs.mixing.mixing_matrix` validates it).
MIXING_RULE_REGISTRY = Registry("mixing rule", MixingMatrixError)
MIXING_RULE_REGISTRY.add(
    "metropolis-hastings",
    "dpdl.graphs.mixing:metropolis_hastings",
    "Metropolis-Hastings weights 1 / (1 + max(d_i, d_j))",
)
MIXING_RULE_REGISTRY.add(
    "local-degree",
    "dpdl.graphs.mixing:local_degree",
    "the papers' rule 1 / (|N_i| + 1), row-stochastic",
)
MIXING_RULE_REGISTRY.add(
    "max-degree", "dpdl.graphs.mixing:max_degree", "uniform weights 1 / (max degree + 1)"
)
MIXING_RULE_REGISTRY.add(
    "sinkhorn", "dpdl.graphs.mixing:sinkhorn_knopp", "Sinkhorn-Knopp scaling of A + I"
)

#: Mixing rules, the built-in keys of :data:`MIXING_RULE_REGISTRY` (and of
#: :data:`dpdl.graphs.mixing.MIXING_RULES`).
MIXING_RULE_NAMES = MIXING_RULE_REGISTRY.names()

#: Calibrated mechanisms by CLI name: each target is called ``factory(graph, weights, calibration,
#: options)`` (a networkx graph, its mixing matrix, a :class:`dpdl.accounting.Calibration` and
#: :class:`dpdl.settings.DesignOptions`) and returns a
#: :class:`dpdl.mechanisms.base.NoiseMechanism` calibrated to the budget
#: (:func:`dpdl.mechanisms.build_mechanism`; "none" takes no budget and is not registered).
MECHANISM_REGISTRY = Registry("mechanism")
for _name, _target, _help in (
    ("ldp", "_ldp", "local DP: independent Gaussian noise at each agent"),
    ("cdp", "_cdp", "central DP baseline: noise on the network average only"),
    ("decor", "_decor", "DECOR: private noise plus pairwise-cancelling correlated noise"),
    ("whisper", "_whisper", "Whisper: correlated noise designed for the mixing matrix"),
    ("whisper-multiseed", "_multiseed", "Whisper with group seeds, robust to q colluders"),
    ("zero-sum", "_zero_sum", "zero-sum correlated noise over the graph"),
    ("lppa", "_lppa", "LPPA's noise flow"),
):
    MECHANISM_REGISTRY.add(_name, f"dpdl.mechanisms.registry:{_target}", _help)

#: Mechanisms of noise correlated over time (MF-D-SGD with a local encoder, MAFALDA-SGD Algorithm
#: 1) by CLI name: each target is called ``factory(weights, participation)`` (the mixing matrix and
#: a :class:`dpdl.factorization.Participation`) and returns the local encoder ``C_local``
#: (``T x T``, or one per agent, ``n x T x T``; :mod:`dpdl.factorization.encoders`). They are
#: accounted by the encoder's sensitivity under cyclic participation, not by a per-round
#: covariance, and calibrated in :mod:`dpdl.jobspec.factorized`.
FACTORIZED_REGISTRY = Registry("time-correlated mechanism")
for _name, _target, _help in (
    ("dp-dsgd", "dp_dsgd", "DP-D-SGD: independent noise (the identity factorization C = I)"),
    ("antipgd", "antipgd", "anti-correlated noise z_t - z_{t-1} (AntiPGD), cyclic participation"),
    ("mafalda", "mafalda", "MAFALDA-SGD: noise correlated over time for the gossip"),
    ("mafalda-l", "mafalda_l", "MAFALDA-L-SGD: every agent's own encoder for its share"),
    ("sqrt", "sqrt", "square-root factorization C = A^(1/2) (Fichtenberger et al. 2023)"),
    ("bsr", "bsr", "banded square root: sqrt's first --bands coefficients (Kalinin, Lampert)"),
    ("bandmf", "bandmf", "BandMF: banded Toeplitz C, --bands coefficients fit to the gossip"),
    ("bisr", "bisr", "banded inverse square root: C^-1 banded to --bands (Kalinin et al. 2026)"),
    ("blt", "blt", "buffered linear Toeplitz, --buffer parameters optimised (Dvijotham et al.)"),
):
    FACTORIZED_REGISTRY.add(_name, f"dpdl.factorization.encoders:{_target}", _help)

#: The options (`TrainConfig` fields) each time-correlated mechanism takes, passed to its target
#: as keyword arguments; a mechanism not listed takes none, and an option given to a mechanism
#: that does not take it is an error. A plugin adds its mechanism's here.
FACTORIZED_OPTIONS: dict[str, tuple[str, ...]] = {
    "bsr": ("bands",),
    "bandmf": ("bands",),
    "bisr": ("bands",),
    "blt": ("buffer",),
}

#: The buffer size of `blt` when `--buffer` is not given (`dpdl.factorization.blt.DEFAULT_BUFFER`,
#: where it is justified).
BLT_BUFFER = 4

#: Time-correlated mechanisms, the built-in keys of :data:`FACTORIZED_REGISTRY`.
FACTORIZED_NAMES = FACTORIZED_REGISTRY.names()

#: Calibrated mechanisms, the built-in keys of :data:`MECHANISM_REGISTRY` (and of
#: :data:`dpdl.mechanisms.registry.MECHANISMS`; "none" takes no budget).
MECHANISM_NAMES = MECHANISM_REGISTRY.names()


def mechanism_names() -> tuple[str, ...]:
    """Every name `--mechanism` takes: none, the calibrated mechanisms and the time-correlated
    ones, plugins' included, and the noise gradient tracking injects (`INJECTIONS`)."""
    names = ("none", *MECHANISM_REGISTRY.names(), *FACTORIZED_REGISTRY.names(), *INJECTIONS)
    return tuple(dict.fromkeys(names))


#: Threat models by name: each target is called ``factory()``, or ``factory(text)`` for a
#: template's parameter, and returns a :class:`dpdl.threats.ThreatModel`
#: (:func:`dpdl.threats.threat_by_name`).
THREAT_REGISTRY = Registry("threat model")
THREAT_REGISTRY.add(
    "eavesdropper", "dpdl.threats:Eavesdropper", "external eavesdropper, sees all messages"
)
THREAT_REGISTRY.add(
    "honest-but-curious",
    "dpdl.threats:honest_but_curious",
    "each agent, curious, knowing its own seeds",
)
THREAT_REGISTRY.add("colluding-<q>", "dpdl.threats:colluding", "any q agents pooling their seeds")
THREAT_REGISTRY.add("central", "dpdl.threats:CentralObserver", "observer of the network average")

#: Threat models, the built-in names of :data:`THREAT_REGISTRY`.
THREAT_NAMES = THREAT_REGISTRY.names()

#: How DECOR picks its noise couple (``DesignOptions.decor_search``): each target is called
#: ``search(graph, weights, calibration, threat, objective)``, with a template's parameter text
#: after them, and returns a :class:`dpdl.mechanisms.decor.Decor` meeting the calibration against
#: the threat (:func:`dpdl.mechanisms.registry.build_mechanism`).
DECOR_SEARCH_REGISTRY = Registry("DECOR search")
DECOR_SEARCH_REGISTRY.add(
    "trace",
    "dpdl.mechanisms.decor:design_decor",
    "the couple of least Tr(W R W^T) (or of the horizon objective) under the budget",
)
DECOR_SEARCH_REGISTRY.add(
    "appendix-d",
    "dpdl.mechanisms.decor:appendix_d_search",
    "DECOR Appendix D.1's grid of couples, the one of least Tr(W R W^T) among them",
)

#: How DECOR picks its noise couple, the built-in names of :data:`DECOR_SEARCH_REGISTRY`.
DECOR_SEARCHES = DECOR_SEARCH_REGISTRY.names()

#: What a correlated-noise design minimises (:class:`dpdl.settings.DesignOptions`): the variance one
#: gossip round leaves, ``Tr(W R W^T)``, or the loss the noise leaves after the whole run
#: (:mod:`dpdl.mechanisms.horizon`).
OBJECTIVES = ("one-step", "horizon")

#: Distributions of the noise gradient tracking injects
#: (:class:`dpdl.mechanisms.lppa.TrackingOptions`).
DISTRIBUTIONS = ("laplace", "gaussian")

#: How a target epsilon becomes a noise scale (:func:`dpdl.accounting.calibrate`): each target is
#: called ``mu_step(eps, delta, steps, neighbouring)`` (a :class:`dpdl.accounting.neighbouring
#: .Neighbouring`) and returns the per-step sensitivity over noise the budget allows.
CALIBRATION_REGISTRY = Registry("calibration")
CALIBRATION_REGISTRY.add(
    "exact",
    "dpdl.accounting.calibration:exact_mu_step",
    "the largest per-step sensitivity whose exact accounting meets the budget",
)
CALIBRATION_REGISTRY.add(
    "paper",
    "dpdl.accounting.calibration:paper_calibration_mu_step",
    "the papers' forms: mu^2 = eps^2 / (4 T log(1/delta)) per agent, Renyi DP per example",
)

#: How a target epsilon becomes a noise scale, the built-in names of :data:`CALIBRATION_REGISTRY`.
CALIBRATIONS = CALIBRATION_REGISTRY.names()

#: Where every agent's model starts on the quadratic tasks (``TaskOptions.start``): each target is
#: called ``start(dim)`` and returns the starting model, a vector of ``dim`` numbers.
START_REGISTRY = Registry("starting point")
START_REGISTRY.add("zeros", "dpdl.tasks.quadratic:zeros", "every coordinate 0")

#: The engines a training job can run: D-SGD, and gradient tracking (DSGT).
ALGORITHMS = ("dsgd", "dsgt")

#: Whose gradient is clipped: each agent's batch gradient, or each example's
#: (:class:`dpdl.jobspec.engine.DSGDConfig`).
CLIP_LEVELS = ("agent", "example")

#: How a training step draws its batches (:class:`dpdl.jobspec.sampling.UniformSampler`,
#: ``PoissonSampler``, ``CyclicSampler``).
SAMPLERS = ("uniform", "poisson", "cyclic")

#: What two neighbouring datasets of an example-level guarantee of the time-correlated mechanisms
#: differ in: one example replaced, or one added or removed (:mod:`dpdl.jobspec.factorized`).
NEIGHBOURING = ("replace", "add-remove")

#: Noise gradient tracking can inject into its tracking variable
#: (:func:`dpdl.mechanisms.lppa.build_injection`).
INJECTIONS = ("none", "lppa", "dp")

#: Step-size schedules (:class:`dpdl.jobspec.engine.StepSize`).
SCHEDULES = ("constant", "inv-sqrt", "step")

#: The convolutional image tasks among :data:`TASKS`.
IMAGE_TASKS = (
    "mnist-cnn",
    "fashion-cnn",
    "mnist-lenet",
    "fashion-lenet",
)

#: Learning tasks by CLI name: each target is called ``factory(name, n_agents, seed, options)``
#: (options a :class:`dpdl.settings.TaskOptions`) and returns a :class:`dpdl.tasks.base.Task`
#: (:func:`dpdl.tasks.build_task`).
TASK_REGISTRY = Registry("task")
for _name, _target, _help in (
    ("quadratic", "_quadratic", "Whisper's quadratic objective (no data)"),
    ("least-squares", "_least_squares", "DECOR's synthetic least squares"),
    ("logreg-a9a", "_logreg_a9a", "logistic regression on a9a"),
    ("mnist-mlp", "_mnist_mlp", "MNIST, one-hidden-layer network"),
    ("mnist-linear", "_mnist_linear", "MNIST, linear softmax model"),
    ("housing-mlp", "_housing_mlp", "California housing regression, one-hidden-layer network"),
    ("adult-mlp", "_adult_mlp", "UCI Adult income, one-hidden-layer sigmoid network"),
    ("mnist-cnn", "_image_task", "MNIST, MAFALDA-SGD's convolutional network"),
    ("fashion-cnn", "_image_task", "Fashion-MNIST, MAFALDA-SGD's convolutional network"),
    ("mnist-lenet", "_image_task", "MNIST, DLG's LeNet"),
    ("fashion-lenet", "_image_task", "Fashion-MNIST, DLG's LeNet"),
):
    TASK_REGISTRY.add(_name, f"dpdl.tasks.catalog:{_target}", _help)

#: Learning tasks, the built-in names of :data:`TASK_REGISTRY`.
TASKS = TASK_REGISTRY.names()


@dataclass(frozen=True)
class TaskMetrics:
    """The metrics a task's evaluation reports (`names`, as every record of a run holds them) and
    whether it also keeps each agent's own final metrics (`per_agent`: the torch models'), known
    without building the task, so that a sweep file is checked before anything runs."""

    names: tuple[str, ...]
    per_agent: bool = False


_QUADRATIC = TaskMetrics(
    (
        "optimality_gap",
        "optimality_gap_average_model",
        "paper_optimality_gap",
        "train_loss",
        "consensus_distance",
        "squared_distance",
        "squared_distance_average_model",
    )
)
_CLASSIFIER = TaskMetrics(
    (
        "test_loss",
        "test_loss_average_model",
        "test_accuracy",
        "test_accuracy_average_model",
        "consensus_distance",
    ),
    per_agent=True,
)

TASK_METRICS: dict[str, TaskMetrics] = {
    "quadratic": _QUADRATIC,
    "least-squares": _QUADRATIC,
    "logreg-a9a": TaskMetrics(
        (
            "test_loss",
            "test_loss_average_model",
            "test_accuracy",
            "test_accuracy_average_model",
            "train_objective",
            "consensus_distance",
        )
    ),
    "housing-mlp": TaskMetrics(
        ("test_loss", "test_loss_average_model", "consensus_distance"), per_agent=True
    ),
    **dict.fromkeys(
        (
            "mnist-mlp",
            "mnist-linear",
            "adult-mlp",
            "mnist-cnn",
            "fashion-cnn",
            "mnist-lenet",
            "fashion-lenet",
        ),
        _CLASSIFIER,
    ),
}
"""The built-in tasks' metrics by task name ([`Task.evaluate`][dpdl.tasks.base.Task.evaluate]);
a task registered by a plugin may add its own (`dpdl.tasks.metrics` re-exports it). A task not in
the table is taken to report the metrics of `dpdl.tasks.metrics.METRIC_RANGES` (through its
suffixes)."""


#: How a task's data are split over agents (:mod:`dpdl.tasks.partition`).
PARTITIONS = ("iid", "dirichlet", "quantity-skew", "labels-per-agent")

#: Message authentication per link of the runtime (:class:`dpdl.runtime.channel.NeighbourChannel`).
MACS = ("aes-gmac", "poly1305", "hmac-sha256")

#: ``torch.distributed`` backends of the runtime's messages (:mod:`dpdl.runtime.backend`).
BACKENDS = ("gloo", "nccl")

#: Where the points of a grid run (``dpdl sweep``, ``dpdl reproduce``; ``--executor``): each
#: target is called ``executor(options)`` (a :class:`dpdl.experiments.executors.ExecutorOptions`)
#: and returns an :class:`dpdl.experiments.executors.Executor`.
EXECUTORS = Registry("executor")
EXECUTORS.add(
    "local", "dpdl.experiments.executors:LocalExecutor", "worker processes on this machine"
)
EXECUTORS.add(
    "ray",
    "dpdl.experiments.executors:RayExecutor",
    "Ray tasks: a Ray started here, or the cluster at --address (pip install 'dpdl[ray]')",
)

#: Reproductions of the papers' figures and tables by name (``dpdl reproduce NAME``): each target
#: is a :class:`dpdl.experiments.reproduction.Reproduction`. dpdl registers none: they are the
#: ``dpdl-reproductions`` package beside it in the source tree, a plugin (:data:`PLUGIN_GROUP
#: <dpdl.registry.PLUGIN_GROUP>`) that registers them here and their sweep files in
#: :data:`SWEEP_REGISTRY`.
REPRODUCTION_REGISTRY = Registry("reproduction")

#: Sweep files by name (``dpdl sweep NAME``): each target is a
#: :class:`dpdl.experiments.sweeps.spec.NamedSweep` (the file, and the one of ``--quick``).
SWEEP_REGISTRY = Registry("named sweep")

#: Where the reproductions come from, as an error says it when none is installed.
REPRODUCTIONS_INSTALL = (
    "they are the dpdl-reproductions package in dpdl's source tree: 'pip install -e "
    "reproductions' there ('make setup' installs it)"
)

#: Membership-test trials per hypothesis of the empirical lower bounds
#: (:func:`dpdl.attacks.membership_lower_bound`; about a second per mechanism at n = 10, T = 100).
DEFAULT_TRIALS = 20_000
#: Mechanisms `dpdl audit --views` audits by default (the per-view canary audit).
VIEW_MECHANISMS = ("ldp", "decor", "whisper")

#: The multi-seed design is a CVXPY SDP with C(n, q) n constraints: ``dpdl audit`` includes it by
#: default up to this n (:func:`dpdl.experiments.audit.audit_mechanisms`).
MULTISEED_MAX_N = 12
