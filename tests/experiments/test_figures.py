"""The figures the command line draws and the documentation site shows: the noise covariance heat
maps (``dpdl noise --plot``) and the audit's bounds (``dpdl audit --plot``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from dpdl.cli import main
from dpdl.experiments import plots
from dpdl.experiments.audit import run_audit
from dpdl.experiments.noise import noise_report
from dpdl.experiments.results import read_rows, write_rows
from dpdl.graphs import build_graph, mixing_matrix

ROOT = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list:
    """The matplotlib figures the plot functions save, in order, for a test to read."""
    figures = []
    save = plots._save

    def keep(fig, path, layout=True):  # noqa: ANN001, ANN202 (plots._save's signature)
        figures.append(fig)
        return save(fig, path, layout)

    monkeypatch.setattr(plots, "_save", keep)
    return figures


def test_covariance_heat_maps_show_r_and_what_gossip_leaves(tmp_path: Path, drawn: list) -> None:
    graph = build_graph("ring", 6)
    weights = mixing_matrix(graph, "metropolis-hastings")
    reports = {m: noise_report(m, graph, weights, 10.0, 1e-5, 100, 0.1) for m in ("ldp", "decor")}
    covariances = {m: report.noise.covariance() for m, report in reports.items()}
    path = plots.plot_covariances(covariances, weights, tmp_path / "heat.png", "ring")
    assert path.read_bytes().startswith(PNG)
    maps = {ax.get_title().split("\n")[0]: ax for ax in drawn[0].axes if ax.images}
    assert set(maps) == {"ldp: R", "decor: R", "ldp: W R W^T", "decor: W R W^T"}
    for method, report in reports.items():
        mixed = maps[f"{method}: W R W^T"]
        np.testing.assert_allclose(
            mixed.images[0].get_array(), weights @ covariances[method] @ weights.T
        )
        assert mixed.get_title().endswith(f"trace {report.trace_wrw:.4g}")
        np.testing.assert_allclose(maps[f"{method}: R"].images[0].get_array(), covariances[method])
        assert mixed.get_xlabel() == mixed.get_ylabel() == "agent"
    # What gossip leaves shares one colour scale; independent noise is diagonal.
    assert maps["ldp: W R W^T"].images[0].get_clim() == maps["decor: W R W^T"].images[0].get_clim()
    ldp = covariances["ldp"]
    assert np.count_nonzero(ldp - np.diag(np.diag(ldp))) == 0


def test_audit_figure_places_each_bound(tmp_path: Path, drawn: list) -> None:
    graph = build_graph("ring", 5)
    reports = run_audit(
        graph,
        mixing_matrix(graph, "metropolis-hastings"),
        2.0,
        1e-5,
        10,
        0.1,
        attack_trials=200,
        progress=False,
        mechanisms=["ldp", "zero-sum"],
    )
    path = plots.plot_audit(reports, tmp_path / "audit.png", "audit")
    assert path.read_bytes().startswith(PNG)
    figure = drawn[0]
    threats = list(reports[0].epsilon)
    assert [ax.get_title() for ax in figure.axes] == threats
    first = figure.axes[0]
    labels = {
        round(y): tick.get_text()
        for y, tick in zip(first.get_yticks(), first.get_yticklabels(), strict=True)
    }
    assert labels == {2: "none", 1: "ldp", 0: "zero-sum"}  # the first mechanism on top
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [
        "accountant (upper)",
        "Gaussian fit (lower)",
        "model-free (lower)",
        "target eps = 2",
    ]
    for ax, threat in zip(figure.axes, threats, strict=True):
        upper, fit, free = (
            dict(zip(*reversed(c.get_offsets().T), strict=True)) for c in ax.collections[:3]
        )
        edge = max(upper.values())
        assert upper[1] == pytest.approx(reports[1].epsilon[threat])  # ldp, where it is
        left = ax.get_xlim()[0]  # where a lower bound of zero goes (a test that found nothing)
        assert free[1] == pytest.approx(max(reports[1].epsilon_lower_bound[threat], left))
        assert fit[1] == pytest.approx(max(reports[1].epsilon_lower_bound_fit[threat], left))
        assert free[1] <= fit[1] <= upper[1] * (1 + 1e-9)
        assert upper[2] == upper[0] == edge > 3 * reports[1].epsilon[threat] - 1e-9  # infinite
        assert math.isinf(reports[0].epsilon[threat])


def test_noise_and_audit_plot_options(tmp_path: Path) -> None:
    noise = ["noise", "--method", "whisper", "--graph", "ring", "--n", "5", "--steps", "10"]
    assert main([*noise, "--plot", str(tmp_path / "figs" / "whisper.png")]) == 0
    assert (tmp_path / "figs" / "whisper.png").read_bytes().startswith(PNG)
    audit = ["audit", "--graph", "ring", "--n", "4", "--steps", "10", "--no-progress"]
    audit += ["--mechanisms", "ldp", "--attack-trials", "100", "--out", str(tmp_path / "audit")]
    assert main([*audit, "--plot", str(tmp_path / "audit" / "bounds.svg")]) == 0
    assert b"<svg" in (tmp_path / "audit" / "bounds.svg").read_bytes()[:1000]
    assert (tmp_path / "audit" / "audit.csv").is_file()


def test_rows_read_back_as_written(tmp_path: Path) -> None:
    rows = [
        {"n": 20, "p": 0.5, "eps": 3.0, "couple": None, "flag": True, "graph": "er"},
        {"n": 3, "loss": math.inf, "gap": math.nan, "tiny": 1e-7, "word": "1.0.2"},
    ]
    back = read_rows(write_rows(rows, tmp_path / "runs.csv"))
    assert back[0] == {**rows[0], "loss": None, "gap": None, "tiny": None, "word": None}
    # Types survive, so a row keys the same job as before (json.dumps(3.0) is not json.dumps(3)).
    assert json.dumps(back[0], sort_keys=True) == json.dumps(
        {**rows[0], "loss": None, "gap": None, "tiny": None, "word": None}, sort_keys=True
    )
    assert back[1]["loss"] == math.inf and math.isnan(back[1]["gap"])
    assert (back[1]["tiny"], back[1]["word"], back[1]["couple"]) == (1e-7, "1.0.2", None)


def test_a_categorical_panel_names_its_values_on_the_x_axis(tmp_path: Path, drawn: list) -> None:
    """Graphs at x = 0, 1, ...: their names are the ticks, even for one graph (whose numeric axis
    ran from -0.04 to 0.04 with the label "graph: 0 ring")."""
    for graphs in (["ring"], ["ring", "er"]):
        xs = list(range(len(graphs)))
        plots.plot_panels(
            {"a9a": xs},
            {"a9a": {"ldp": [1.0 + x for x in xs]}},
            {"a9a": "graph"},
            "test loss",
            tmp_path / "panels.png",
            "title",
            bands={"a9a": {"ldp": ([0.5 + x for x in xs], [1.5 + x for x in xs])}},
            ticks={"a9a": graphs},
        )
        ax = drawn[-1].axes[0]
        assert [tick.get_text() for tick in ax.get_xticklabels()] == graphs
        assert ax.get_xlim() == (-0.5, len(graphs) - 0.5)
        # the interval is an error bar at each graph, from 0.5 to 1.5 above x
        (bars,) = ax.collections
        segments = [segment.tolist() for segment in bars.get_segments()]
        assert segments == [[[x, 0.5 + x], [x, 1.5 + x]] for x in xs]
