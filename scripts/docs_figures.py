"""The documentation site's figures, added to the site when it is built (a mkdocs hook: mkdocs.yml,
`hooks:`), from data the repository holds: nothing is trained or audited at build time.

- `figures/covariance.png`: `dpdl.experiments.plots.plot_covariances`, which `dpdl noise
  --plot` calls, for LDP, DECOR and Whisper on a ring of 16 agents (`COVARIANCE`), computed
  here (the three calibrations take about a second);
- `figures/audit.png`: `dpdl.experiments.plots.plot_audit`, as `dpdl audit --plot` draws
  it, of the bounds in `scripts/docs_audit.json`: what `dpdl.experiments.audit.run_audit`
  found on the setting of the audit table in `choosing.md` (`AUDIT`; its membership tests
  take minutes). `python scripts/docs_figures.py` runs the audit again and rewrites the file;
  the build fails if the file's setting is not `AUDIT`;
- `figures/reproductions/NAME/*.png`: the figures committed beside each reproduction's report in
  `reproductions/results/NAME/` (drawn from its `runs.csv` by the analysis `dpdl reproduce
  NAME` ends with; `dpdl_reproductions.reproduce.report_again` draws them again).

The figures join the site's files rather than `docs/`: a page links them like any other file,
and the strict build fails on a link to one that is missing. About 10 s on 2 cores, most of it
importing torch. With `DPDL_DOCS_FIGURES=0` (`make docs-preview`) the covariance and audit
figures are blank placeholders and nothing of dpdl is imported.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

#: Where the figures appear in the site.
FIGURES = "figures"
#: The audit's bounds on `AUDIT`, written by running this file.
AUDIT_DATA = Path(__file__).with_name("docs_audit.json")
#: A 1x1 grey PNG: the covariance and audit figures of a preview.
PLACEHOLDER = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAAAAAA6fptVAAAACklEQVR4nGM4AQAAygDJmcpdfgAAAABJRU5ErkJggg=="
)
#: The heat maps' setting: graph, agents, designs, and the budget each is calibrated to against
#: the eavesdropper (that of the `whisper-variance` reproduction).
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
    from dpdl.experiments.noise import noise_report
    from dpdl.experiments.plots import plot_covariances
    from dpdl.graphs import build_graph, mixing_matrix

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


@dataclass(frozen=True)
class Target:
    """The budget a design was calibrated to (what `plot_audit` reads of a `Calibration`)."""

    eps: float


@dataclass(frozen=True)
class AuditBounds:
    """One mechanism's bounds on epsilon per threat, as `scripts/docs_audit.json` holds them: what
    `plot_audit` reads of a `NoiseReport`."""

    method: str
    calibration: Target
    epsilon: dict[str, float]
    epsilon_lower_bound: dict[str, float]
    epsilon_lower_bound_fit: dict[str, float]


def _title(setting: dict) -> str:
    return (
        f"audit: {setting['graph']} (n={setting['n']}, p={setting['p']:g}), "
        f"eps={setting['eps']:g}, delta={setting['delta']:g}, T={setting['steps']}, "
        f"C={setting['clip']:g}"
    )


def run_audit_again(path: Path = AUDIT_DATA) -> Path:
    """Run the audit of `AUDIT` (minutes: its membership tests) and write its bounds to `path`."""
    from dpdl.experiments.audit import run_audit
    from dpdl.graphs import build_graph, mixing_matrix

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
    bounds = [
        {
            "method": r.method,
            "target_eps": r.calibration.eps,
            "epsilon": r.epsilon,
            "epsilon_lower_bound": r.epsilon_lower_bound,
            "epsilon_lower_bound_fit": r.epsilon_lower_bound_fit,
        }
        for r in reports
    ]
    data = {"setting": setting, "written_by": "python scripts/docs_figures.py", "bounds": bounds}
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def _audit(folder: Path) -> list[Path]:
    from dpdl.experiments.plots import plot_audit

    data = json.loads(AUDIT_DATA.read_text())
    if data["setting"] != AUDIT:
        raise PluginError(
            f"{AUDIT_DATA} holds the audit of {data['setting']}, not of AUDIT = {AUDIT}: "
            "run `python scripts/docs_figures.py` to audit again"
        )
    reports = [
        AuditBounds(
            b["method"],
            Target(b["target_eps"]),
            b["epsilon"],
            b["epsilon_lower_bound"],
            b["epsilon_lower_bound_fit"],
        )
        for b in data["bounds"]
    ]
    return [plot_audit(reports, folder / "audit.png", _title(AUDIT))]


def _reproductions(folder: Path, results: Path) -> list[Path]:
    """The figures committed beside each reproduction's report, as they are."""
    figures = []
    for report in sorted(results.glob("*/REPORT.md")):
        out = folder / "reproductions" / report.parent.name
        out.mkdir(parents=True)
        for png in sorted(report.parent.glob("*.png")):
            figures.append(out / png.name)
            figures[-1].write_bytes(png.read_bytes())
    if not figures:
        raise PluginError(f"no reproductions' figures in {results}")
    return figures


def _placeholders(folder: Path) -> list[Path]:
    paths = [folder / "covariance.png", folder / "audit.png"]
    for path in paths:
        path.write_bytes(PLACEHOLDER)
    return paths


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Draw the covariance and audit figures, take the reproductions', and add them all to the
    site's files under `FIGURES`; with `DPDL_DOCS_FIGURES=0`, placeholders for the first two."""
    start = time.perf_counter()
    results = Path(config.config_file_path).parent / "reproductions" / "results"
    preview = os.environ.get("DPDL_DOCS_FIGURES", "1") == "0"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        drawn = _placeholders(folder) if preview else [*_covariance(folder), *_audit(folder)]
        drawn += _reproductions(folder, results)
        for path in drawn:
            uri = f"{FIGURES}/{path.relative_to(folder).as_posix()}"
            files.append(File.generated(config, uri, content=path.read_bytes()))
    what = "placeholders for the drawn ones (DPDL_DOCS_FIGURES=0)" if preview else "drawn"
    log.info("%d figures, %s, in %.1f s", len(drawn), what, time.perf_counter() - start)
    return files


if __name__ == "__main__":
    print(f"wrote {run_audit_again()}")
