"""The names and defaults the command line offers (tasks, mechanisms, graphs, ...), apart from the
code they name.

They live here, in a module that imports nothing, so that ``dpdl --help`` builds its parser without
importing torch, scipy or networkx (seconds) for names it only prints. Each home module re-exports
its names from here (``dpdl.tasks.TASKS``, ``dpdl.accounting.CALIBRATIONS``, ...). Where the home
holds a registry from name to implementation (:data:`dpdl.mechanisms.registry.MECHANISMS`,
:data:`dpdl.graphs.mixing.MIXING_RULES`), a test checks that its keys are the names here, in order.
"""

from __future__ import annotations

__all__ = [
    "ADJACENCY_KEY",
    "ALGORITHMS",
    "CALIBRATIONS",
    "CLIP_LEVELS",
    "DECOR_SEARCHES",
    "DEFAULT_TRIALS",
    "DISTRIBUTIONS",
    "GRAPH_FILE_FORMATS",
    "IMAGE_TASKS",
    "INJECTIONS",
    "MACS",
    "MECHANISM_NAMES",
    "MIXING_RULE_NAMES",
    "PARTITIONS",
    "REAL_GRAPHS",
    "SAMPLERS",
    "SCHEDULES",
    "SYNTHETIC_GRAPHS",
    "TASKS",
]

#: Synthetic topologies by CLI name (``er`` also takes ``p`` and ``seed``;
#: :func:`dpdl.graphs.build_graph`).
SYNTHETIC_GRAPHS = ("er", "ring", "torus", "complete", "star", "exponential")

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

#: Mixing rules, the keys of :data:`dpdl.graphs.mixing.MIXING_RULES`.
MIXING_RULE_NAMES = ("metropolis-hastings", "local-degree", "max-degree", "sinkhorn")

#: Calibrated mechanisms, the keys of :data:`dpdl.mechanisms.registry.MECHANISMS` ("none" takes no
#: budget).
MECHANISM_NAMES = ("ldp", "cdp", "decor", "whisper", "whisper-multiseed", "zero-sum", "lppa")

#: How DECOR picks its noise couple (:class:`dpdl.mechanisms.registry.DesignOptions`).
DECOR_SEARCHES = ("trace", "appendix-d")

#: Distributions of the noise gradient tracking injects
#: (:class:`dpdl.mechanisms.lppa.TrackingOptions`).
DISTRIBUTIONS = ("laplace", "gaussian")

#: How a target epsilon becomes a noise scale (:func:`dpdl.accounting.calibrate`).
CALIBRATIONS = ("exact", "paper")

#: The engines a training job can run: D-SGD, and gradient tracking (DSGT).
ALGORITHMS = ("dsgd", "dsgt")

#: Whose gradient is clipped: each agent's batch gradient, or each example's
#: (:class:`dpdl.jobspec.engine.DSGDConfig`).
CLIP_LEVELS = ("agent", "example")

#: How a training step draws its batches (:class:`dpdl.jobspec.sampling.UniformSampler`,
#: ``PoissonSampler``, ``CyclicSampler``).
SAMPLERS = ("uniform", "poisson", "cyclic")

#: Noise gradient tracking can inject into its tracking variable
#: (:func:`dpdl.mechanisms.lppa.build_injection`).
INJECTIONS = ("none", "lppa", "dp")

#: Step-size schedules (:class:`dpdl.jobspec.engine.StepSize`).
SCHEDULES = ("constant", "inv-sqrt")

#: The convolutional image tasks among :data:`TASKS`.
IMAGE_TASKS = ("mnist-cnn", "fashion-cnn", "mnist-lenet", "fashion-lenet")

#: Learning tasks by CLI name (:func:`dpdl.tasks.build_task`).
TASKS = (
    "quadratic",
    "least-squares",
    "logreg-a9a",
    "mnist-mlp",
    "housing-mlp",
    "adult-mlp",
    *IMAGE_TASKS,
)

#: How a task's data are split over agents (:mod:`dpdl.tasks.partition`).
PARTITIONS = ("iid", "dirichlet", "quantity-skew", "labels-per-agent")

#: Message authentication per link of the runtime (:class:`dpdl.runtime.channel.NeighbourChannel`).
MACS = ("aes-gmac", "poly1305", "hmac-sha256")

#: Membership-test trials per hypothesis of the empirical lower bounds
#: (:func:`dpdl.attacks.membership_lower_bound`; about a second per mechanism at n = 10, T = 100).
DEFAULT_TRIALS = 20_000
