"""MAFALDA-SGD's image experiment (Section 7.2, Fig. 4 and Fig. 6) as the authors' released code
runs it (`experiments_femnist.sh --graph=florentine`, `decentralized_simulation.py`,
`femnist.py`, `mfdl_optimizer.py` and `tradeoff_plotter.py --dataset femnist` of their MFDL
repository), beside dpdl's protocol in `mafalda-images`.

What the code does that the paper does not say: every method at clipping threshold C = 1 and the
same step size, 5.0 on the Florentine families (2.0 on the Facebook ego graph; chosen by a search
over the noise-free run, `--hyperparameters`), multiplied by 0.1 once node 0's data loader is
reset for the fifth time, at step 81 of 320, the first of its sixth pass (the code's "learning rate
decay", for the cross-entropy task only); k = 20 passes of b = 16 batches (T = 320);
a sweep of the GDP parameter mu in {0.1, 0.2, 0.5, 1, 2, 5, 10} (noise multiplier 1 / mu) with the
noise scaled to `C / smallest batch` (add / remove, where dpdl's default bounds a replaced
example); eps read off mu at delta = 1e-6; the gossip `w_ij = 1 / (|N_i| + 1)`; every node
starting from the same initial model; the CNN without a normalisation after its first convolution
(group norm with 8 groups after the second pooling only) on pixels in [0, 1], not standardised;
each node's ten FEMNIST writers split 80/20, the test set the union of the nodes' held-out 20%;
and the metric of `tradeoff_plotter.py`: at the last step, the first row of a seed's table, that
is the test accuracy of node 0's model alone (the Florentine families' Acciaiuoli, a leaf), not
the mean over nodes; the test set evaluated every pass (once at the end here: the figure
needs the final accuracy only).

Each run is a training configuration (`config_of`; `dpdl train` runs it, and the sweep
file of `mafalda-images` states them): the code's network is the task `mnist-tiny-cnn` (or
`fashion-tiny-cnn`), its decay the schedule `step`, its noise mu-GDP under add / remove
(`neighbouring = "add-remove"`: each batch's clipped sum divided by its agent's smallest batch,
as the code; every agent holds as many examples, so one noise multiplier serves all of them, as
the code's per-node one does), and the MAFALDA encoder is dpdl's (Lemma 12, Algorithm 2) for this
gossip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dpdl.errors import ConfigError
from dpdl.experiments.train import TrainConfig, run_training
from dpdl.settings import TaskOptions
from dpdl.threads import job_threads
from dpdl_reproductions.mafalda_authors import (
    PLOTTED_NODE,
    PROTOCOL,
    budget_of,
    code_options,
)

__all__ = ["AGENT_ACCURACY", "TASKS", "config_of", "job_of", "run_job"]

#: The code's cyclic participation: ``b = 16`` batches a pass (``experiments_femnist.sh``).
CYCLE = 16
#: ``experiments_femnist.sh --graph=florentine``: ``lrs=(5.0)``; the sweep file's authors' grids
#: run every method at it and at C = 1 (the optimizer's default), the code's mu grid (``tradeoff_
#: plotter.py``: 0.1 to 10) from mu = 1 up.
STEP_SIZE = 5.0
#: ``decentralized_simulation.py``: the step size times 0.1 once node 0's data loader has been
#: reset 5 times, at the first step of its sixth pass: steps 1 to 81 at the step size, then 0.1x.
DECAY_AFTER, DECAY = 5 * CYCLE + 1, 0.1
#: The examples in one of a FEMNIST node's 16 batches in the code, roughly: ten writers of about 226
#: characters each (814,277 images of 3,597 writers), 80% of them for training.
FEMNIST_BATCH = 113
#: The run's field holding every agent's final test accuracy (JSON list, agent order).
AGENT_ACCURACY = "test_accuracy_agents"
#: The job fields beside the seed; bump when run_job's output changes.
VERSION = 1
#: The training task of each data set of the figure (a job's ``task``, as dpdl's protocol names
#: it): the code's network on the code's [0, 1] pixels.
TASKS = {"mnist-cnn": "mnist-tiny-cnn", "fashion-cnn": "fashion-tiny-cnn"}


def config_of(job: Mapping[str, Any]) -> TrainConfig:
    """The training configuration of one seed of the code's protocol (`dpdl train` runs it as
    `run_job` does): the code's network on its pixels (`TASKS`), `examples` training
    images per agent dealt uniformly at random (a FEMNIST node's ten writers each write every
    character, so its labels are not skewed; MNIST's files name no writers), a fixed random
    `test_examples` of the test split, no regularisation; the step size times `DECAY`
    after step `decay_after`; and the gossip and noise of the code's housing runs
    (`mafalda_authors.code_options`: mu-GDP for the job's mu under add / remove, no noise for
    method `none`)."""
    return TrainConfig(
        **code_options(job),
        task=TASKS[job["task"]],
        p=0.0,
        schedule="step",
        decay_after=job["decay_after"],
        decay_factor=DECAY,
        eval_every=job["steps"],
        task_options=TaskOptions(
            partition="iid",
            l2=0.0,
            examples_per_agent=job["examples"],
            test_examples=job["test_examples"],
        ),
    )


def job_of(options: Mapping[str, Any]) -> dict[str, Any]:
    """The job of one run of the code's protocol stated as a sweep file's run (the options of a
    [`TrainConfig`][dpdl.jobspec.config.TrainConfig], its one seed as a number): the fields of
    its cache key, from which `config_of` gives those options back. A private method's budget is
    a GDP mu (`gdp-mu`), as the code states it (`mafalda_authors.budget_of`)."""
    mu = budget_of(options)
    figure = {task: name for name, task in TASKS.items()}
    if options["task"] not in figure:
        raise ConfigError(
            "a run of MAFALDA-SGD's code's image protocol trains the code's network, task "
            f"{' or '.join(TASKS.values())}; got {options['task']!r}"
        )
    return {
        "graph": options["graph"],
        "n": options["n"],
        "steps": options["steps"],
        "cycle": options["cycle"],
        "lr": options["lr"],
        "decay_after": options["decay_after"],
        "clip": options["clip"],
        "examples": options["examples_per_agent"],
        "test_examples": options["test_examples"],
        "protocol": PROTOCOL,
        "version": VERSION,
        "task": figure[options["task"]],
        "method": options["mechanism"],
        "mu": mu,
        "seed": options["seed"],
    }


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """One seed of the code's protocol: its training configuration (`config_of`) as `dpdl
    train` runs it, on the executor's threads (one by default: `dpdl.threads.job_threads`;
    the MAFALDA encoder's optimisation on one whatever they are); the final test
    accuracy of every agent and their mean."""
    with job_threads():
        run = run_training(config_of(job)).runs[0]
    agents = [float(value) for value in run.agent_metrics["test_accuracy"]]
    return {
        **{key: value for key, value in run.final.items() if key != "step"},
        AGENT_ACCURACY: json.dumps(agents),
        "test_accuracy_node0": agents[PLOTTED_NODE],
        "eps": run.privacy[0].epsilon,
        "sigma": run.mechanism["sigma"],
        "sensitivity": run.mechanism["sensitivity"],
    }
