"""Experiments: training jobs, the headline demo, results folders and figures."""

from dpdl.experiments.demo import STEP_SIZE_GRID, run_demo
from dpdl.experiments.results import write_results
from dpdl.experiments.train import TrainConfig, TrainResult, run_training

__all__ = ["STEP_SIZE_GRID", "TrainConfig", "TrainResult", "run_demo", "run_training", "write_results"]
