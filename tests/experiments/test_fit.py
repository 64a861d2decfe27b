"""Bring your own model, data and graph (:mod:`dpdl.experiments.fit`): the API takes a torch
module, arrays or a Dataset, a networkx graph, a matrix or a specification, and a mechanism by
name or built; it gives the same run whichever form the same inputs take, accounts the budget it
was asked for, and refuses bad input with one clear error. The three examples that use it run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from scipy import sparse
from torch import nn
from torch.nn import functional

import dpdl
from dpdl.accounting import AgentLevel, ExampleLevel
from dpdl.errors import ConfigError, GraphError, MixingMatrixError, PrivacyParameterError
from dpdl.experiments.fit import graph_and_weights, split_examples
from dpdl.graphs import metropolis_hastings
from dpdl.mechanisms import LocalDP

ROOT = Path(__file__).resolve().parents[2]
N, STEPS = 6, 12


def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return functional.cross_entropy(outputs, targets, reduction="none")


@pytest.fixture(scope="module")
def data():
    """Two Gaussian blobs per class, 3 classes, 8 features (seeded)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 2
    labels = rng.integers(0, 3, 240)
    inputs = (centres[labels] + rng.normal(size=(240, 8))).astype(np.float32)
    return (inputs[:180], labels[:180]), (inputs[180:], labels[180:])


def model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 3))


def run(data, graph, **options):
    train, test = data
    defaults = {"mechanism": "ldp", "eps": 5.0, "steps": STEPS, "lr": 0.2, "batch_size": 8}
    return dpdl.fit(model(), loss, train, test, graph, **{**defaults, **options})


def test_the_budget_asked_is_the_budget_accounted_and_the_models_learn(data) -> None:
    noiseless = run(data, nx.cycle_graph(N), mechanism="none", steps=40)
    assert noiseless.final_metrics["test_accuracy"] > 0.9
    for level in ("agent", "example"):
        result = run(
            data, nx.cycle_graph(N), mechanism="decor", clip_level=level, threats=["central"]
        )
        own = result.privacy[0]
        assert own.threat == "eavesdropper"
        assert own.epsilon <= 5.0
        assert own.epsilon == pytest.approx(5.0, rel=1e-3)
        assert [r.threat for r in result.privacy][-1] == "central"
        assert result.models.shape == (N, 8 * 3 + 3)
        assert result.history[0]["step"] == 0 and result.history[-1]["step"] == STEPS
        assert result.calibration is not None


def test_a_graph_its_matrix_and_its_specification_give_the_same_run(data) -> None:
    graph = nx.cycle_graph(N)
    weights = metropolis_hastings(graph)
    runs = [
        run(data, graph),
        run(data, weights),
        run(data, sparse.csr_matrix(weights)),
        run(data, "ring", n=N),
    ]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.weights, runs[0].weights)
        np.testing.assert_array_equal(other.models, runs[0].models)


def test_node_labels_of_any_kind_are_agents_in_node_order() -> None:
    graph = nx.relabel_nodes(nx.path_graph(4), {0: "a", 1: "b", 2: "c", 3: "d"})
    built, weights = graph_and_weights(graph)
    assert sorted(built.nodes) == [0, 1, 2, 3]
    np.testing.assert_array_equal(weights, metropolis_hastings(nx.path_graph(4)))


def test_a_dataset_and_its_arrays_give_the_same_run(data) -> None:
    (inputs, labels), test = data
    dataset = torch.utils.data.TensorDataset(torch.as_tensor(inputs), torch.as_tensor(labels))
    from_arrays = run(data, nx.cycle_graph(N))
    from_dataset = run((dataset, test), nx.cycle_graph(N))
    np.testing.assert_array_equal(from_dataset.models, from_arrays.models)


def test_a_partition_given_as_parts_or_a_function_is_used_as_given(data) -> None:
    (_, labels), _ = data
    parts = [np.arange(i, 180, N) for i in range(N)]
    assert all(
        np.array_equal(a, b) for a, b in zip(split_examples(labels, N, parts), parts, strict=True)
    )
    by_function = split_examples(
        labels, N, lambda targets, n, rng: np.array_split(np.arange(180), n)
    )
    assert [len(p) for p in by_function] == [30] * N
    given = run(data, nx.cycle_graph(N), partition=parts)
    function = run(data, nx.cycle_graph(N), partition=lambda t, n, rng: parts)
    np.testing.assert_array_equal(given.models, function.models)


def test_a_mechanism_built_by_the_caller_is_only_accounted(data) -> None:
    result = run(data, nx.cycle_graph(N), mechanism=LocalDP(N, 2.0), eps=None)
    assert result.calibration is None
    assert result.mechanism.private_variances.tolist() == [4.0] * N
    assert np.isfinite(result.privacy[0].epsilon) and result.privacy[0].epsilon > 0


def test_the_result_loads_back_into_the_module(data) -> None:
    result = run(data, nx.cycle_graph(N))
    target = result.load_into(model())
    flat = torch.nn.utils.parameters_to_vector(target.parameters()).detach().numpy()
    np.testing.assert_allclose(flat, result.average_model, rtol=1e-6)
    agent = result.load_into(model(), agent=2)
    flat = torch.nn.utils.parameters_to_vector(agent.parameters()).detach().numpy()
    np.testing.assert_allclose(flat, result.models[2], rtol=1e-6)
    assert result.as_dict()["n"] == N
    with pytest.raises(ConfigError, match="the model has 9 parameters, the result 27"):
        result.load_into(nn.Linear(8, 1))


def test_design_noise_is_calibrated_for_the_privacy_unit_given() -> None:
    for unit in (AgentLevel(0.5), ExampleLevel(1.0, 16, 0.1)):
        mechanism, weights, reports = dpdl.design_noise(
            nx.cycle_graph(N), "decor", 4.0, 1e-5, 100, unit
        )
        assert weights.shape == (N, N) and mechanism.n == N
        assert reports[0].epsilon <= 4.0
        assert reports[0].epsilon == pytest.approx(4.0, rel=1e-3)
        assert mechanism.sample(np.random.default_rng(0), 5).shape == (N, 5)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"partition": [np.arange(0, 30)] * N}, ConfigError, "parts overlap"),
        ({"partition": [np.arange(30)] * 2}, ConfigError, "2 parts for 6 agents"),
        ({"partition": "shards"}, ConfigError, "unknown partition 'shards'"),
        (
            {"partition": [np.arange(i * 30, i * 30 + 30) + 200 for i in range(N)]},
            ConfigError,
            "indices outside 0..179",
        ),
        ({"mechanism": "decor", "eps": None}, ConfigError, "needs a budget"),
        ({"mechanism": "no-such"}, ConfigError, "unknown mechanism 'no-such'"),
        ({"mechanism": LocalDP(N + 1, 1.0)}, ConfigError, "for 7 agents, the graph has 6"),
        ({"graph": np.full((N, N), 0.5)}, MixingMatrixError, "row 0 sums"),
        ({"graph": nx.empty_graph(N)}, GraphError, "disconnected"),
        ({"graph": 3}, ConfigError, "expected a networkx graph"),
        ({"train": (np.zeros((5, 8)), np.zeros(4))}, ConfigError, "5 inputs and 4 targets"),
        ({"train": (np.full((180, 8), np.nan), np.zeros(180))}, ConfigError, "NaN"),
        ({"train": [1, 2, 3]}, ConfigError, "expected \\(inputs, targets\\)"),
        ({"threads": 0}, ConfigError, "threads must be a whole number >= 1"),
        ({"strategy": "fast"}, ConfigError, "unknown gradient strategy 'fast'"),
        ({"callbacks": print}, ConfigError, "callbacks: expected a sequence of functions"),
        ({"checkpoint_every": 0}, ConfigError, "checkpoint_every: expected an integer >= 1"),
        (
            {"resume_from": "no-such.npz"},
            ConfigError,
            "resume_from: checkpoint not found: no-such.npz",
        ),
    ],
)
def test_bad_input_is_one_clear_error(data, change, error, message) -> None:
    train, test = data
    options = {"graph": nx.cycle_graph(N), "train": train, **change}
    graph, train = options.pop("graph"), options.pop("train")
    with pytest.raises(error, match=message):
        run((train, test), graph, **options)


@pytest.mark.parametrize("script", ["own_model", "own_graph", "calibrate_only", "tune_own_model"])
def test_the_examples_print_what_their_pages_show(script: str) -> None:
    """Each example runs and prints, byte for byte, ``examples/outputs/<script>.txt``, the output
    its how-to page includes (a run is deterministic); after a change that moves the numbers,
    rewrite the file with ``python examples/<script>.py > examples/outputs/<script>.txt``."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{script}.py")],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    assert result.stdout == (ROOT / "examples" / "outputs" / f"{script}.txt").read_text()


def test_the_how_to_pages_include_the_examples_outputs() -> None:
    """The pages show the committed outputs that the test above checks, not copies of them."""
    for page, script in [
        ("own-model", "own_model"),
        ("own-graph", "own_graph"),
        ("calibrate-only", "calibrate_only"),
        ("own-model", "tune_own_model"),
    ]:
        text = (ROOT / "docs" / "howto" / f"{page}.md").read_text()
        assert f'--8<-- "examples/outputs/{script}.txt"' in text, page


def test_fit_runs_a_mechanism_only_at_the_poisson_rate_it_was_calibrated_for(data) -> None:
    """A design sized for agents of 80 examples (expected batch 8: rate 0.1) given to a fit whose
    agents hold 30 (rate 0.27) is refused before training; one sized for rate 0.5 runs."""
    ring = nx.cycle_graph(N)
    options = {"clip_level": "example", "clip": 1.0, "eps": None}
    sized = {}
    for rate in (0.1, 0.5):
        sized[rate], _, _ = dpdl.design_noise(
            ring, "ldp", 5.0, 1e-5, STEPS, ExampleLevel(1.0, 8, rate)
        )
    with pytest.raises(PrivacyParameterError, match=r"Poisson rate 0\.2667 .* for rate 0\.1"):
        run(data, ring, mechanism=sized[0.1], **options)
    assert run(data, ring, mechanism=sized[0.5], **options).privacy[0].epsilon < 5.0


_FIT_IN_A_TERMINAL = """
import sys
import numpy as np
import torch
from torch import nn
import dpdl
rng = np.random.default_rng(0)
x, y = rng.standard_normal((200, 5)).astype("float32"), rng.integers(0, 2, 200)
model = nn.Linear(5, 2)
loss = lambda out, t: torch.nn.functional.cross_entropy(out, t, reduction="none")
keywords = {} if sys.argv[1] == "default" else {"progress": False}
dpdl.fit(model, loss, train=(x, y), test=(x, y), graph="ring", n=4, mechanism="none",
         steps=300, **keywords)
"""


@pytest.mark.parametrize(("how", "bar"), [("default", True), ("off", False)])
def test_fit_shows_its_progress_in_a_terminal_unless_told_not_to(how: str, bar: bool) -> None:
    """In a terminal (a pseudo-terminal here), ``fit`` draws a progress bar of its steps by
    default; ``progress=False`` draws none."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    leader, follower = pty.openpty()
    size = struct.pack("HHHH", 24, 80, 0, 0)  # a new pseudo-terminal is 0 columns wide
    fcntl.ioctl(follower, termios.TIOCSWINSZ, size)
    done = subprocess.run(
        [sys.executable, "-c", _FIT_IN_A_TERMINAL, how],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, check=False,
        timeout=120,
    )  # fmt: skip
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed: all of it read
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    assert done.returncode == 0, written.decode(errors="replace")
    assert (b"/300 [" in written) is bar, written.decode(errors="replace")[-500:]


class Interrupted(Exception):
    """Raised by a callback to stop a run at a step, as a crash would."""


def dropout_model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 3))


@pytest.mark.parametrize(
    ("mechanism", "build", "strategy"),
    [("ldp", model, "vmap"), ("decor", model, "auto"), ("decor", dropout_model, "loop")],
)
def test_a_fit_interrupted_and_resumed_equals_the_uninterrupted_fit(
    data, tmp_path, mechanism, build, strategy
) -> None:
    """Dropout draws from torch's generator (agent by agent: vmap refuses random operations),
    which the checkpoint holds."""
    train, test = data
    options = {
        "mechanism": mechanism, "eps": 5.0, "steps": 20, "eval_every": 5, "lr": 0.2,
        "batch_size": 8, "strategy": strategy, "progress": False, "graph": nx.cycle_graph(N),
    }  # fmt: skip
    torch.manual_seed(11)  # dropout's draws: the same for the two runs
    whole = dpdl.fit(build(), loss, train, test, **options)
    seen: list[int] = []

    def stop(step: int, metrics: dict[str, float]) -> None:
        seen.append(step)
        assert metrics is not None and metrics["step"] == step
        if step == 15:
            raise Interrupted

    path = tmp_path / "fit.ckpt"
    torch.manual_seed(11)
    with pytest.raises(Interrupted):
        dpdl.fit(build(), loss, train, test, callbacks=[stop], checkpoint=path,
                 checkpoint_every=6, **options)  # fmt: skip
    assert seen == [0, 5, 10, 15]
    torch.manual_seed(999)  # the resumed run takes torch's generator from the checkpoint
    later: list[int] = []
    resumed = dpdl.fit(
        build(), loss, train, test, callbacks=[lambda step, m: later.append(step)],
        checkpoint=path, resume_from=path, **options,
    )  # fmt: skip
    assert later == [15, 20]  # the records after the checkpoint of step 12
    np.testing.assert_array_equal(resumed.models, whole.models)
    assert resumed.history == whole.history


def test_a_fit_resumed_with_other_arguments_or_data_is_refused(data, tmp_path) -> None:
    train, test = data
    path = tmp_path / "fit.ckpt"
    run(data, nx.cycle_graph(N), checkpoint=path, progress=False)
    with pytest.raises(dpdl.errors.FileFormatError) as error:
        run(data, nx.cycle_graph(N), resume_from=path, lr=0.3, eps=4.0, progress=False)
    message = str(error.value)
    assert "eps was 5.0 and is 4.0" in message and "lr was 0.2 and is 0.3" in message
    assert message.count("another run") == 1
    shifted = ((train[0] + 1.0, train[1]), test)
    with pytest.raises(dpdl.errors.FileFormatError, match="train was"):
        run(shifted, nx.cycle_graph(N), resume_from=path, progress=False)
    with pytest.raises(dpdl.errors.FileFormatError, match="data, graph or noise design differ"):
        run(data, nx.path_graph(N), resume_from=path, progress=False)
