"""MAFALDA-SGD's image experiment (Section 7.2, Fig. 4 and Fig. 6) as the authors' released code
runs it (``experiments_femnist.sh --graph=florentine``, ``decentralized_simulation.py``,
``femnist.py``, ``mfdl_optimizer.py`` and ``tradeoff_plotter.py --dataset femnist`` of their MFDL
repository), beside dpdl's protocol in ``mafalda-images``.

What the code does that the paper does not say: every method at clipping threshold C = 1 and the
same step size, 5.0 on the Florentine families (2.0 on the Facebook ego graph; chosen by a search
over the noise-free run, ``--hyperparameters``), multiplied by 0.1 once node 0's data loader is
reset for the fifth time, at step 81 of 320, the first of its sixth pass (the code's "learning rate
decay", for the cross-entropy task only); k = 20 passes of b = 16 batches (T = 320);
a sweep of the GDP parameter mu in {0.1, 0.2, 0.5, 1, 2, 5, 10} (noise multiplier 1 / mu) with the
noise scaled to ``C / smallest batch`` (add / remove, where dpdl's default bounds a replaced
example); eps read off mu at delta = 1e-6; the gossip ``w_ij = 1 / (|N_i| + 1)``; every node
starting from the same initial model; the CNN without a normalisation after its first convolution
(group norm with 8 groups after the second pooling only) on pixels in [0, 1], not standardised;
each node's ten FEMNIST writers split 80/20, the test set the union of the nodes' held-out 20%;
and the metric of ``tradeoff_plotter.py``: at the last step, the first row of a seed's table, that
is the test accuracy of node 0's model alone (the Florentine families' Acciaiuoli, a leaf), not
the mean over nodes; the test set evaluated every pass (once at the end here: the figure
needs the final accuracy only).

The engine is dpdl's: its cyclic batches are weighted by their own size (the code divides the
clipped sum by the node's smallest batch), one noise multiplier serves every agent (the code's is
per node, from its own smallest batch: the same here, every agent holds as many examples), and
the MAFALDA encoder is dpdl's (Lemma 12, Algorithm 2) for this gossip.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from torch import nn

from dpdl.accounting import gdp
from dpdl.data.idx import load_idx_dataset
from dpdl.experiments.reproduce.mafalda_authors import PLOTTED_NODE, PROTOCOL, RULE, authors_noise
from dpdl.experiments.reproduce.mafalda_tradeoff import DELTA, METHODS, mixing
from dpdl.jobspec.engine import DSGDConfig, StepSize
from dpdl.seeding import purpose_rng
from dpdl.simulation import run_dsgd
from dpdl.tasks import partition
from dpdl.tasks.catalog import CNN_EVAL_CHUNK
from dpdl.tasks.torch_model import TorchModelTask

__all__ = [
    "AGENT_ACCURACY",
    "MUS",
    "DecayedStepSize",
    "authors_cnn",
    "authors_task",
    "jobs",
    "run_job",
]

PASSES, CYCLE = 20, 16
#: ``experiments_femnist.sh --graph=florentine``: ``lrs=(5.0)``; C is the optimizer's default.
STEP_SIZE, CLIP = 5.0, 1.0
#: ``decentralized_simulation.py``: the step size times 0.1 once node 0's data loader has been
#: reset 5 times, at the first step of its sixth pass: steps 1 to 81 at the step size, then 0.1x.
DECAY_AFTER, DECAY = 5 * CYCLE + 1, 0.1
#: The GDP parameters of the code's FEMNIST trade-off figure (``tradeoff_plotter.py``).
MUS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
QUICK_MUS = (0.5, 10.0)
SEEDS = 3
#: The examples in one of a FEMNIST node's 16 batches in the code, roughly: ten writers of about 226
#: characters each (814,277 images of 3,597 writers), 80% of them for training.
FEMNIST_BATCH = 113
#: The run's field holding every agent's final test accuracy (JSON list, agent order).
AGENT_ACCURACY = "test_accuracy_agents"
#: The job fields beside the seed; bump when run_job's output changes.
VERSION = 1


def jobs(
    tasks: tuple[str, ...],
    graph: str,
    agents: int,
    quick: bool,
    examples: int,
    test_examples: int,
    mus: tuple[float, ...] = MUS,
    seeds: int = SEEDS,
) -> list[dict[str, Any]]:
    """Every method at every mu of ``mus`` on each of ``seeds`` seeds per task, no noise once a
    seed (it has no budget); each agent holds ``examples`` training images, ``test_examples`` are
    evaluated. ``--quick``: 2 passes, mu 0.5 and 10, one seed. Seed by seed, MAFALDA's runs
    first: a worker computes MAFALDA's encoder once (about a minute) for the runs it takes in a
    row, and a run cut short leaves whole seeds."""
    passes, mus, seeds = (2, QUICK_MUS, 1) if quick else (PASSES, mus, seeds)
    base = {
        "graph": graph,
        "n": agents,
        "steps": passes * CYCLE,
        "cycle": CYCLE,
        "lr": STEP_SIZE,
        "decay_after": DECAY_AFTER,
        "clip": CLIP,
        "examples": examples,
        "test_examples": test_examples,
        "protocol": PROTOCOL,
        "version": VERSION,
    }
    order = ("mafalda", *(m for m in METHODS if m != "mafalda"), "none")
    return [
        {**base, "task": task, "method": method, "mu": mu, "seed": seed}
        for seed in range(seeds)
        for method in order
        for task in tasks
        for mu in (mus if method != "none" else (0.0,))
    ]


def authors_cnn(classes: int = 10) -> nn.Sequential:
    """``FEMNIST_tiny_CNN`` of ``femnist.py``: two 3x3 convolutions of 16 and 32 channels with
    ReLU and 2x2 max-pooling, group norm (8 groups) after the second only, a linear layer; with
    ``classes`` outputs (FEMNIST's 62; 10 here). 20,554 parameters for 10 classes."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.GroupNorm(8, 32), nn.Flatten(), nn.Linear(32 * 7 * 7, classes),
    )  # fmt: skip


def _cross_entropy(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(outputs, targets, reduction="none")


def authors_task(
    name: str, n_agents: int, seed: int, examples: int, test_examples: int
) -> TorchModelTask:
    """MNIST (``mnist-*``) or Fashion-MNIST as the code feeds FEMNIST: pixels in [0, 1]
    (torchvision's ``ToTensor``, no standardisation), ``examples`` training images per agent dealt
    uniformly at random (a FEMNIST node's ten writers each write every character, so its labels
    are not skewed; MNIST's files name no writers), a fixed random ``test_examples`` of the test
    split, and :func:`authors_cnn` initialised from the seed."""
    folder = "mnist" if name.startswith("mnist") else "fashion_mnist"
    train_images, train_labels = load_idx_dataset(folder, "train")
    test_images, test_labels = load_idx_dataset(folder, "t10k")
    parts = partition.iid(len(train_labels), n_agents, purpose_rng(seed, "partition"))
    rng = purpose_rng(seed, "examples per agent")
    parts = [np.sort(rng.choice(part, examples, replace=False)) for part in parts]
    test = np.sort(
        purpose_rng(seed, "test examples").choice(
            len(test_labels), min(test_examples, len(test_labels)), replace=False
        )
    )
    torch.manual_seed(int(purpose_rng(seed, "model init").integers(2**31)))
    return TorchModelTask(
        name, authors_cnn(), _cross_entropy,
        train_images.astype(np.float32)[:, None] / 255.0, train_labels, parts,
        test_images[test].astype(np.float32)[:, None] / 255.0, test_labels[test], 0.0,
        eval_chunk=CNN_EVAL_CHUNK,
    )  # fmt: skip


@dataclass(frozen=True)
class DecayedStepSize(StepSize):
    """``eta`` for steps ``t <= after``, then ``factor * eta`` (the code's one decay)."""

    after: int = DECAY_AFTER
    factor: float = DECAY

    def __call__(self, t: int) -> float:
        return self.eta if t <= self.after else self.factor * self.eta


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of the code's protocol: noise ``C_local^-1 Z`` with ``Z ~ N(0, sigma^2)``,
    ``sigma = sens(C_local) (C / smallest batch) / mu`` (Theorem 8: mu-GDP against LDP's attacker),
    on one thread; the final test accuracy of every agent and their mean."""
    weights = mixing(job["graph"], RULE)
    task = authors_task(
        job["task"], weights.shape[0], job["seed"], job["examples"], job["test_examples"]
    )
    steps, cycle = job["steps"], job["cycle"]
    noise, sensitivity = authors_noise(job, weights.shape[0], int(task.agent_sizes.min()))
    private, sigma = not noise.is_noiseless, noise.sigma
    config = DSGDConfig(
        steps,
        DecayedStepSize(job["lr"], after=job["decay_after"]),
        clip=job["clip"],
        clip_level="example",
        sampling="cyclic",
        cycle=cycle,
        eval_every=steps,
    )
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        result = run_dsgd(task, weights, noise, config, seed=job["seed"])
    final = {key: value for key, value in result.final_metrics.items() if key != "step"}
    agents = list(task.agent_metrics["test_accuracy"])
    return {
        **final,
        AGENT_ACCURACY: json.dumps(agents),
        "test_accuracy_node0": agents[PLOTTED_NODE],
        "eps": gdp.epsilon(job["mu"], DELTA) if private else math.inf,
        "sigma": sigma,
        "sensitivity": sensitivity,
    }
