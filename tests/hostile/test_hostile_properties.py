"""Property-based checks (hypothesis) of the accountant, the calibration and the readers.

- epsilon grows with the number of steps and shrinks as the noise grows (per-step sensitivity
  falls), for random budgets;
- an exact calibration never promises more than the target: the accountant's epsilon of the
  calibrated per-step sensitivity is at most the target eps, and it grows with eps and delta;
- random bytes given to the graph-file readers or as an options file give a DpdlError or a graph,
  never another exception.

Example counts are small (the suite stays fast); ``deadline=None`` because the first calls import
and warm up scipy; ``derandomize=True`` draws the same examples on every run (a fixed seed, as
every other test), so a failure here is a change of the code, not of the draw.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpdl.accounting import AgentLevel, calibrate
from dpdl.accounting.accountant import epsilon_from_mu_step
from dpdl.cli import build_parser
from dpdl.errors import DpdlError
from dpdl.experiments.replay import load_options
from dpdl.graphs.readers import read_graph_file

pytestmark = pytest.mark.hostile

FEW = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
#: Relative rounding of epsilon, the root of a delta equation solved in floating point: a noise
#: scale one ulp larger (mu / (1 + 2^-52)) gave an epsilon one ulp larger (2.678362605093636
#: against ...635), which is rounding, not a loss of monotonicity.
ROUNDING = 1e-12

eps_values = st.floats(min_value=0.05, max_value=50.0)
delta_values = st.floats(min_value=1e-12, max_value=0.1)
step_counts = st.integers(min_value=1, max_value=100_000)
clips = st.floats(min_value=1e-3, max_value=100.0)
mu_steps = st.floats(min_value=1e-4, max_value=5.0)


@FEW
@given(mu=mu_steps, steps=step_counts, more=st.integers(1, 10_000), delta=delta_values)
def test_epsilon_grows_with_steps(mu: float, steps: int, more: int, delta: float) -> None:
    unit = AgentLevel(1.0)
    fewer = epsilon_from_mu_step(mu, steps, delta, unit)
    assert epsilon_from_mu_step(mu, steps + more, delta, unit) >= fewer * (1 - ROUNDING)


@FEW
@given(mu=mu_steps, factor=st.floats(1.0, 100.0), steps=step_counts, delta=delta_values)
@example(mu=1.0, factor=1.0000000000000002, steps=1, delta=0.00390625)  # one ulp: see ROUNDING
def test_epsilon_falls_as_the_noise_grows(
    mu: float, factor: float, steps: int, delta: float
) -> None:
    """More noise (scale times ``factor``) is a smaller per-step sensitivity mu / factor."""
    unit = AgentLevel(1.0)
    quieter = epsilon_from_mu_step(mu, steps, delta, unit)
    assert epsilon_from_mu_step(mu / factor, steps, delta, unit) <= quieter * (1 + ROUNDING)


@FEW
@given(eps=eps_values, delta=delta_values, steps=step_counts, clip=clips)
def test_calibration_never_exceeds_the_target(
    eps: float, delta: float, steps: int, clip: float
) -> None:
    calibration = calibrate(eps, delta, steps, AgentLevel(clip))
    assert calibration.achieved_epsilon <= eps
    assert not calibration.overshoots
    assert epsilon_from_mu_step(calibration.mu_step, steps, delta, AgentLevel(clip)) <= eps


@FEW
@given(eps=eps_values, more=st.floats(1.0, 10.0), delta=delta_values, steps=step_counts)
def test_a_larger_budget_allows_less_noise(
    eps: float, more: float, delta: float, steps: int
) -> None:
    """A larger eps (or delta) never asks for more noise: the per-step sensitivity allowed
    grows."""
    unit = AgentLevel(1.0)
    base = calibrate(eps, delta, steps, unit).mu_step
    assert calibrate(eps * more, delta, steps, unit).mu_step >= base
    assert calibrate(eps, min(delta * more, 0.5), steps, unit).mu_step >= base


@pytest.fixture(scope="module")
def parser() -> argparse.ArgumentParser:
    """The ``dpdl train`` parser, which reads options files."""
    return build_parser().parse_args(["train"]).parser


@FEW
@given(
    content=st.binary(max_size=512),
    fmt=st.sampled_from(["file", "edgelist", "decentralizepy", "npz", "graphml", "gml"]),
)
def test_random_bytes_as_a_graph_file(content: bytes, fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "graph.txt"
    path.write_bytes(content)
    try:
        graph = read_graph_file(path, fmt)
    except DpdlError as error:
        message = str(error)
    else:
        assert graph.number_of_nodes() > 0
        return
    assert str(path) in message


@FEW
@given(content=st.binary(max_size=512))
def test_random_bytes_as_an_options_file(
    content: bytes, tmp_path: Path, parser: argparse.ArgumentParser
) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(content)
    try:
        values = load_options(parser, path)
    except DpdlError as error:
        message = str(error)
    else:
        assert isinstance(values, dict)
        return
    assert str(path) in message


@FEW
@given(text=st.text(max_size=300))
def test_random_text_as_an_options_file(
    text: str, tmp_path: Path, parser: argparse.ArgumentParser
) -> None:
    """Text that may parse as TOML, with any keys and values: a DpdlError or options."""
    path = tmp_path / "config.toml"
    path.write_text(text)
    try:
        values = load_options(parser, path)
    except DpdlError:
        return
    assert isinstance(values, dict)
