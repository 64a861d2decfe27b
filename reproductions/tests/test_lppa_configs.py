"""LPPA's reproductions train configurations that ``dpdl train`` runs: each is the run put
together by hand from the engine's parts."""

from __future__ import annotations

import pytest

from dpdl.experiments.train import run_training
from dpdl.graphs import erdos_renyi, sinkhorn_knopp
from dpdl.mechanisms.lppa import dp_noise, lppa_noise
from dpdl.simulation import DSGDConfig, StepSize
from dpdl.simulation.tracking import run_dsgt
from dpdl.tasks import build_task
from dpdl_reproductions import lppa_tables


@pytest.mark.parametrize(
    "job",
    [
        lppa_tables.train_job("adult-mlp", "lppa", 0.5, 1, 1),
        lppa_tables.train_job("adult-mlp", "dp", 0.5, 2, None, rounds=4, local_steps=3, scale=0.1),
    ],
    ids=["lppa", "dp-local-steps"],
)
def test_lppa_training_configuration_is_the_run_assembled_by_hand(job: dict) -> None:
    """The LPPA reproductions' training runs are configurations (``dpdl train`` runs them): DSGT
    without clipping on the directed Erdos-Renyi graph of seed 0, Sinkhorn-Knopp's W, batches of
    128, the method's Laplace injection; bit for bit the run put together by hand from the
    engine's parts (the reproductions' run before ``dpdl train`` ran it), evaluated every epoch,
    or at its end for a run in communication rounds."""
    config = lppa_tables.config_of(job)
    task = build_task(job["task"], 5, job["seed"], lppa_tables.TASK_OPTIONS)
    graph = erdos_renyi(5, 0.5, 0, directed=True)
    scale = job.get("scale", 0.025)
    injection = (
        lppa_noise(graph, scale, "laplace", every_round=False)
        if job["method"] == "lppa"
        else dp_noise(5, scale, "laplace", every_round=True)
    )
    epoch = -(-(int(task.agent_sizes.sum()) // 5) // 128)
    local = job.get("local_steps", 1)
    steps = job["rounds"] * local if "rounds" in job else job["epochs"] * epoch
    every = steps if "rounds" in job else epoch  # a run in rounds: evaluated at its end
    by_hand = run_dsgt(
        task,
        sinkhorn_knopp(graph),
        DSGDConfig(steps, StepSize(job["lr"]), batch_size=128, eval_every=every),
        injection,
        seed=job["seed"],
        local_steps=local,
    )
    result = run_training(config)
    assert result.config.steps == steps and result.config.eval_every == every
    assert result.runs[0].history == by_hand.history
    assert (config.epochs, result.config.epochs) == (job["epochs"], None)  # resolved: in steps
