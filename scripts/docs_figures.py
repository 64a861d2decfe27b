"""The documentation site's figures, drawn when the site is built (a mkdocs hook: mkdocs.yml,
``hooks:``).

Each figure comes from the function the command line draws it with, on a small setting or on the
runs a reproduction left in ``reproductions/results/``:

- ``figures/covariance.png``: :func:`dpdl.experiments.plots.plot_covariances`, which ``dpdl noise
  --plot`` calls, for LDP, DECOR and Whisper on a ring of 16 agents (:data:`COVARIANCE`);
- ``figures/audit.png``: :func:`dpdl.experiments.audit.run_audit` and
  :func:`dpdl.experiments.plots.plot_audit`, as ``dpdl audit --plot`` runs them, on the setting of
  the audit table in ``choosing.md`` (:data:`AUDIT`);
- ``figures/reproductions/NAME/*.png``: :func:`dpdl_reproductions.reproduce.redraw` of
  ``reproductions/results/NAME/runs.csv``, the analysis ``dpdl reproduce NAME`` ends with; a
  reproduction whose figures need fields that ``runs.csv`` leaves out (LPPA's curves and
  reconstructions) is shown with the figures its run drew.

The figures join the site's files rather than ``docs/``: a page links them like any other file,
and the strict build fails on a link to one that was not drawn. About 20 s on 2 cores, most of it
the audit's membership tests and importing torch.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

from dpdl.experiments.audit import run_audit
from dpdl.experiments.noise import noise_report
from dpdl.experiments.plots import plot_audit, plot_covariances
from dpdl.graphs import build_graph, mixing_matrix
from dpdl_reproductions.reproduce import REPRODUCTIONS, redraw

#: Where the figures appear in the site.
FIGURES = "figures"
#: The heat maps' setting: graph, agents, designs, and the budget each is calibrated to against
#: the eavesdropper (that of the ``whisper-variance`` reproduction).
COVARIANCE = {
    "graph": "ring",
    "n": 16,
    "methods": ("ldp", "decor", "whisper"),
    "eps": 10.0,
    "delta": 1e-5,
    "steps": 5000,
    "clip": 0.1,
}
#: The audit's setting: that of the table in docs/choosing.md.
AUDIT = {
    "graph": "er",
    "n": 10,
    "p": 0.5,
    "seed": 0,
    "eps": 5.0,
    "delta": 1e-5,
    "steps": 100,
    "clip": 0.1,
    "trials": 5000,
}

log = logging.getLogger("mkdocs.hooks.figures")


def _covariance(folder: Path) -> list[Path]:
    setting = COVARIANCE
    graph = build_graph(setting["graph"], setting["n"])
    weights = mixing_matrix(graph, "metropolis-hastings")
    covariances = {
        method: noise_report(
            method,
            graph,
            weights,
            setting["eps"],
            setting["delta"],
            setting["steps"],
            setting["clip"],
        ).noise.covariance()
        for method in setting["methods"]
    }
    title = (
        f"{setting['graph']} (n={setting['n']}), eps={setting['eps']:g} against the eavesdropper, "
        f"delta={setting['delta']:g}, T={setting['steps']}"
    )
    return [plot_covariances(covariances, weights, folder / "covariance.png", title)]


def _audit(folder: Path) -> list[Path]:
    setting = AUDIT
    graph = build_graph(setting["graph"], setting["n"], setting["p"], seed=setting["seed"])
    reports = run_audit(
        graph,
        mixing_matrix(graph, "metropolis-hastings"),
        setting["eps"],
        setting["delta"],
        setting["steps"],
        setting["clip"],
        attack_trials=setting["trials"],
        seed=setting["seed"],
        progress=False,
    )
    title = (
        f"audit: {setting['graph']} (n={setting['n']}, p={setting['p']:g}), "
        f"eps={setting['eps']:g}, delta={setting['delta']:g}, T={setting['steps']}, "
        f"C={setting['clip']:g}"
    )
    return [plot_audit(reports, folder / "audit.png", title)]


def _reproductions(folder: Path, results: Path) -> list[Path]:
    figures = []
    for name, module in REPRODUCTIONS.items():
        out = folder / "reproductions" / name
        if getattr(module, "CSV_OMITS", ()):
            out.mkdir(parents=True)
            figures += [
                Path(shutil.copy(png, out)) for png in sorted((results / name).glob("*.png"))
            ]
            continue
        runs = results / name / "runs.csv"
        if not runs.is_file():
            raise PluginError(f"no runs of reproduction {name} to draw: {runs} is missing")
        figures += redraw(name, runs, out)
    return figures


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Draw every figure into a scratch folder and add it to the site's files under
    :data:`FIGURES`."""
    start = time.perf_counter()
    results = Path(config.config_file_path).parent / "reproductions" / "results"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        drawn = [*_covariance(folder), *_audit(folder), *_reproductions(folder, results)]
        for path in drawn:
            uri = f"{FIGURES}/{path.relative_to(folder).as_posix()}"
            files.append(File.generated(config, uri, content=path.read_bytes()))
    log.info("%d figures drawn in %.1f s", len(drawn), time.perf_counter() - start)
    return files
