"""dpdl's side of the cross-check against jax-privacy 2.0 (issue 50, item 3): dpdl's sensitivity
and expected error for the strategies of `tests/factorization/data/jax_privacy_crosscheck.json`
(jax-privacy's numbers, written by `benchmarks/crosscheck_jax_privacy.py` in `.venv-jax`), side
by side, with the largest relative difference.

Each row: one strategy under cyclic `(k, b)`-participation with `T = k b` (jax-privacy's
b-min-separated closed form, its fixed-epoch sensitivity for a dense C), dpdl's
[`local_sensitivity`][dpdl.factorization.mafalda.local_sensitivity] and
[`local_loss`][dpdl.factorization.mafalda.local_loss] on the prefix workload (`H = A^T A`) divided
by T (jax-privacy's mean per-query squared error times sensitivity^2). Every-step and
single-participation rows are summarised in one line; each row also gives dpdl's sensitivity under
b-min-separated participation ([`MinSeparated`][dpdl.factorization.min_separation.MinSeparated])
and how it was found. Then the strategies rebuilt by dpdl's own constructors from their parameters
alone, the coefficient sets outside the closed form's assumptions, the decentralized path (`dpdl
factorize`) on one agent and on exact averaging, and jax-privacy's BandMF, BLT and dense
multi-epoch optima beside dpdl's optimisers on the same problems.

Run from the repository root after the fixture is written: `.venv/bin/python
benchmarks/crosscheck_jax_privacy_report.py` (seconds; `make crosscheck-jax-privacy` runs both).
Writes the section between `<!-- crosscheck_jax_privacy:start -->` and
`<!-- crosscheck_jax_privacy:end -->` of BENCHMARKS.md (`--no-write`: print only).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
from scipy.linalg import solve_triangular, toeplitz

from _report import markers, measured, write_section  # benchmarks/_report.py
from dpdl.experiments.factorize import factorize
from dpdl.factorization import MinSeparated, Participation
from dpdl.factorization.blt import blt_coefficients, blt_strategy, decoder_coefficients
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.mafalda import local_loss, local_sensitivity, optimize_local
from dpdl.factorization.min_separation import min_separated_sensitivity
from dpdl.factorization.strategy import Strategy
from dpdl.factorization.toeplitz import (
    bandmf_encoder,
    bisr_strategy,
    bsr_encoder,
    sqrt_strategy,
    toeplitz_matrix,
)
from dpdl.mechanisms.noise_streams import plan

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "factorization"
    / "data"
    / "jax_privacy_crosscheck.json"
)


def _encoder(case: dict) -> np.ndarray:
    """C from the fixture (as `tests/factorization/test_jax_privacy_crosscheck.py` builds it)."""
    steps = case["T"]
    if case["kind"] == "dense":
        return np.array(case["matrix"]).reshape(steps, steps)
    if case["kind"] == "toeplitz":
        return toeplitz(case["strategy_coefs"], np.zeros(steps))
    bands = case["params"]["bands"]
    params = (
        np.array(case["band_params"]).reshape(steps, bands)
        if "band_params" in case
        else np.tile(case["strategy_coefs"], (steps, 1))
    )
    matrix = np.zeros((steps, steps))
    for lag in range(bands):
        columns = np.arange(steps - lag)
        matrix[columns + lag, columns] = params[columns, lag]
    return matrix / np.linalg.norm(matrix, axis=0)


def _parameters(case: dict, k: int, b: int) -> str:
    extra = {key: value for key, value in case["params"].items() if key in ("bands", "epochs")}
    if case["strategy"] == "BLT":
        extra["buffers"] = len(case["params"]["buf_decay"])
    text = ", ".join(f"{key}={value}" for key, value in extra.items())
    return f"T={case['T']}, k={k}, b={b}" + (f", {text}" if text else "")


def _min_sep(matrix: np.ndarray, steps: int, k: int, b: int) -> tuple[float, str]:
    """dpdl's sensitivity under b-min-separated `(k, b)`-participation and how it was found."""
    found = min_separated_sensitivity(matrix, MinSeparated(steps, k, b), pattern_sensitivity)
    return math.sqrt(found.squared), found.method


def _rows(cases: list[dict]) -> tuple[list[str], dict[str, list[float]]]:
    """Table rows for the cyclic participations (1 < k < T), and the relative differences
    (sensitivity cyclic and min-sep, error) of every row, every-step and single participation
    included (the dense C's min-sep value is not jax-privacy's: left out of those)."""
    rows, gaps = [], {"sens": [], "min-sep": [], "error": []}
    for case in cases:
        matrix, steps = _encoder(case), case["T"]
        workload = np.tri(steps)
        for row in case["participations"]:
            k, b = row["k"], row["b"]
            participation = Participation.cyclic(steps, k, b)
            sensitivity = local_sensitivity(matrix, participation)
            min_sep, method = _min_sep(matrix, steps, k, b)
            loss = local_loss(workload.T @ workload, matrix, participation) / steps
            jax_sens = math.sqrt(row["sens_squared"])
            gaps["sens"].append(abs(sensitivity - jax_sens) / jax_sens)
            gaps["error"].append(abs(loss - row["loss_mean"]) / row["loss_mean"])
            if case["kind"] != "dense":
                gaps["min-sep"].append(abs(min_sep - jax_sens) / jax_sens)
            if 1 < k < steps:
                largest = max(gaps["sens"][-1], gaps["error"][-1])
                if case["kind"] != "dense":
                    largest = max(largest, gaps["min-sep"][-1])
                rows.append(
                    f"| {case['name'].split(' T=')[0]} | {_parameters(case, k, b)} | "
                    f"{jax_sens:.10g} | {sensitivity:.10g} | {min_sep:.10g} ({method}) | "
                    f"{row['loss_mean']:.10g} | {loss:.10g} | {largest:.1e} |"
                )
    return rows, gaps


def _constructed(case: dict) -> tuple[Strategy, str]:
    """The fixture's strategy rebuilt by dpdl's constructors from its parameters alone (as
    `tests/factorization/test_jax_privacy_crosscheck.py` does; a BLT's `theta = buf_decay`,
    `omega = output_scale`: the same parametrisation), and the constructor's name."""
    steps, params = case["T"], case["params"]
    timeline = Participation.cyclic(steps, 1, steps)
    bands = params.get("bands", steps)
    if case["strategy"] == "square root":
        return sqrt_strategy(timeline), "`sqrt_strategy`"
    if case["strategy"] == "banded square root":
        return Strategy(bsr_encoder(timeline, bands)), "`bsr_encoder`"
    if case["strategy"] == "BISR":
        return bisr_strategy(timeline, bands), "`bisr_strategy`"
    theta, omega = np.array(params["buf_decay"]), np.array(params["output_scale"])
    encoder = toeplitz_matrix(blt_coefficients(theta, omega, steps), steps)
    decoder = toeplitz_matrix(decoder_coefficients(theta, omega, steps), steps)
    return Strategy(encoder, decoder, (theta, omega)), "`blt_coefficients`, `decoder_coefficients`"


def _constructor_rows(cases: list[dict]) -> tuple[list[str], dict[str, float]]:
    """One row per strategy rebuilt by dpdl: the largest entry differences of C and C^-1 from
    jax-privacy's, the largest relative differences of sensitivity (cyclic and min-sep, every
    recorded `(k, b)`) and error, and the engine's noise stream."""
    rows, worst = [], {"C": 0.0, "C^-1": 0.0, "sens": 0.0, "error": 0.0}
    for case in cases:
        steps = case["T"]
        strategy, constructor = _constructed(case)
        decoder = strategy.decoder
        if decoder is None:
            decoder = solve_triangular(strategy.encoder, np.eye(steps), lower=True)
        gaps = {
            "C": np.abs(strategy.encoder - toeplitz_matrix(case["strategy_coefs"], steps)).max(),
            "C^-1": np.abs(decoder - toeplitz_matrix(case["noising_coefs"], steps)).max(),
            "error": abs(np.sum((np.tri(steps) @ decoder) ** 2) / case["error_total"] - 1),
            "sens": 0.0,
        }
        for row in case["participations"]:
            k, b = row["k"], row["b"]
            for participation in (Participation.cyclic(steps, k, b), MinSeparated(steps, k, b)):
                squared = local_sensitivity(strategy.encoder, participation) ** 2
                gaps["sens"] = max(gaps["sens"], abs(squared / row["sens_squared"] - 1))
        worst = {key: max(worst[key], float(gaps[key])) for key in worst}
        kind, memory = plan(strategy.encoder, decoder, strategy.buffer)
        rows.append(
            f"| {case['name']} | {constructor} | {gaps['C']:.1e} | {gaps['C^-1']:.1e} | "
            f"{gaps['sens']:.1e} | {gaps['error']:.1e} | {kind}, {memory} |"
        )
    return rows, worst


FACTORIZE_ROWS = {  # dpdl factorize's rows at k = b = 4 (bands default to b) and the fixture's
    "dp-dsgd": "identity T=16",
    "sqrt": "square root T=16",
    "bsr": "banded square root T=16 bands=4",
    "bisr": "BISR T=16 bands=4",
}


def _factorize_rows(cases: dict[str, dict]) -> list[str]:
    """`dpdl factorize` (k = b = 4) on one agent and on 4 agents averaging exactly (`W = 1 1^T /
    n`, whose utility Gram matrix is the prefix workload's `A^T A`), cyclic and min-sep, beside
    jax-privacy's values."""
    rows = []
    for agents in (1, 4):
        for participation in ("cyclic", "min-sep"):
            weights = np.full((agents, agents), 1.0 / agents)
            result = factorize(weights, 4, 4, eps=1.0, delta=1e-5, participation=participation)
            found = {row.method: row for row in result.rows}
            for method, name in FACTORIZE_ROWS.items():
                (jax,) = [r for r in cases[name]["participations"] if (r["k"], r["b"]) == (4, 4)]
                row = found[method]
                jax_sens, jax_loss = math.sqrt(jax["sens_squared"]), jax["loss_mean"] * 16
                gap = max(abs(row.sensitivity / jax_sens - 1), abs(row.loss / jax_loss - 1))
                rows.append(
                    f"| {method} | {agents} | {participation} | {jax_sens:.10g} | "
                    f"{row.sensitivity:.10g} | {jax_loss:.10g} | {row.loss:.10g} | "
                    f"{row.memory_per_step} | {gap:.1e} |"
                )
    return rows


def _non_monotone_rows(cases: list[dict]) -> list[str]:
    rows = []
    for case in cases:
        (row,) = case["participations"]
        k, b = row["k"], row["b"]
        matrix = _encoder(case)
        dpdl = local_sensitivity(matrix, Participation.cyclic(case["T"], k, b))
        min_sep, method = _min_sep(matrix, case["T"], k, b)
        coefs = ", ".join(f"{value:g}" for value in np.trim_zeros(case["strategy_coefs"], "b"))
        rows.append(
            f"| {case['params']['set']} | [{coefs}] | T={case['T']}, k={k}, b={b} | "
            f"{math.sqrt(row['sens_squared']):.6f} | {dpdl:.6f} | {min_sep:.6f} ({method}) | "
            f"{math.sqrt(row['minsep_upper_bound_squared']):.6f} | "
            f"{row['refusal_with_checks'].split(',')[0]} |"
        )
    return rows


def _toeplitz_optimiser_rows(cases: dict[str, dict]) -> list[str]:
    """jax-privacy's BandMF (`optimize_banded_toeplitz(T, bands)`, every `(k, b)` with `b >=
    bands`: the same objective) and BLT (`buffered_toeplitz.optimize`) optima beside dpdl's
    [`bandmf_encoder`][dpdl.factorization.toeplitz.bandmf_encoder] and
    [`blt_strategy`][dpdl.factorization.blt.blt_strategy] on the same problem."""
    rows = []
    for case in cases.values():
        if case["strategy"] != "BandMF (banded Toeplitz)" or case["params"]["bands"] == 1:
            continue
        steps, bands = case["T"], case["params"]["bands"]
        workload = np.tri(steps)
        for row in case["participations"]:
            k, b = row["k"], row["b"]
            if not 1 < k < steps or b < bands:
                continue
            participation = Participation.cyclic(steps, k, b)
            start = time.perf_counter()
            found = bandmf_encoder(workload.T @ workload, participation, bands)
            seconds = time.perf_counter() - start
            loss = local_loss(workload.T @ workload, found, participation) / steps
            coefs = np.array(case["strategy_coefs"])
            gap = np.abs(found[:, 0] / found[0, 0] - coefs / coefs[0]).max()
            rows.append(
                f"| BandMF, `bandmf_encoder` | T={steps}, k={k}, b={b}, bands={bands} | "
                f"{row['loss_mean']:.10g} | {loss:.10g} | {loss / row['loss_mean'] - 1:+.1e} | "
                f"{gap:.1e} | {seconds:.2f} |"
            )
    case = cases["buffered_toeplitz.optimize T=64 k=4 b=16"]
    row = case["participations"][0]
    workload = np.tri(64)
    jax_params = np.concatenate([case["params"]["buf_decay"], case["params"]["output_scale"]])
    for buffer in (1, 2, 4):
        participation = Participation.cyclic(64, row["k"], row["b"])
        start = time.perf_counter()
        found = blt_strategy(workload.T @ workload, participation, buffer)
        seconds = time.perf_counter() - start
        loss = local_loss(workload.T @ workload, found.encoder, participation) / 64
        gap = (
            f"{np.abs(np.concatenate(found.buffer) - jax_params).max():.1e}" if buffer == 1 else ""
        )
        rows.append(
            f"| BLT, `blt_strategy` | T=64, k={row['k']}, b={row['b']}, buffers={buffer} "
            f"(jax-privacy's: 1) | {row['loss_mean']:.10g} | {loss:.10g} | "
            f"{loss / row['loss_mean'] - 1:+.1e} | {gap} | {seconds:.2f} |"
        )
    return rows


def _optimiser_rows(cases: list[dict]) -> list[str]:
    """jax-privacy's multi-epoch optimum (`dense.optimize`) beside dpdl's
    [`optimize_local`][dpdl.factorization.mafalda.optimize_local] on the same problem."""
    rows = []
    for case in cases:
        steps, k = case["T"], case["params"]["epochs"]
        workload = np.tri(steps)
        start = time.perf_counter()
        found = optimize_local(workload.T @ workload, Participation.cyclic(steps, k, steps // k))
        seconds = time.perf_counter() - start
        jax_loss = case["participations"][0]["loss_mean"]
        min_sep, method = _min_sep(_encoder(case), steps, k, steps // k)
        rows.append(
            f"| T={steps}, k={k}, b={steps // k} | {jax_loss:.10g} | {found.loss / steps:.10g} | "
            f"{(found.loss / steps - jax_loss) / jax_loss:+.1e} | {found.iterations} | "
            f"{seconds:.2f} | {min_sep:.6f} ({method}) |"
        )
    return rows


def _headline(fixture: dict, gaps: dict[str, list[float]], built: dict[str, float]) -> list[str]:
    versions = fixture["versions"]
    return [
        f"jax-privacy {versions['jax-privacy']} (jax {versions['jax']}, float64, CPU) in its own "
        "environment (`make crosscheck-jax-privacy`: `.venv-jax`) records each strategy's "
        "parameters, coefficients and values in "
        "`tests/factorization/data/jax_privacy_crosscheck.json`; dpdl recomputes them from the "
        "coefficients, and rebuilds the strategies from their parameters alone with its own "
        "constructors (`tests/factorization/test_jax_privacy_crosscheck.py` asserts 1e-9, "
        "coefficients 1e-12). Workload: prefix sums over T steps. Sensitivity: jax-privacy's "
        "b-min-separated closed form (`toeplitz.minsep_sensitivity_squared`; "
        "`banded.minsep_sensitivity_squared` for the column-normalized banded C, "
        "`sensitivity.fixed_epoch_sensitivity` for the dense one), dpdl's exact sensitivity "
        "under cyclic (k, b)-participation (T = k b: jax-privacy's worst pattern {0, b, ...} is a "
        "cyclic one) and under b-min-separated participation (`MinSeparated`: dpdl's closed "
        "form, after checking its assumptions, exact enumeration of the patterns, or where they "
        "are too many a certified upper bound). Error: jax-privacy's mean per-query squared "
        "error (`per_query_error`, the variance of each prefix sum's noise) times "
        "sensitivity^2, dpdl's `local_loss` / T. BISR is not a jax-privacy strategy: its C^-1 "
        "(the square root's inverse coefficients cut to `bands`) goes through jax-privacy's "
        "Toeplitz functions.",
        "",
        f"Largest relative difference over all {len(gaps['sens'])} rows (the every-step, k = T, "
        f"b = 1 and single-participation rows included): sensitivity {max(gaps['sens']):.1e} "
        f"(cyclic), {max(gaps['min-sep']):.1e} (b-min-separated, {len(gaps['min-sep'])} rows: "
        f"the dense C's are not jax-privacy's min-sep values), error {max(gaps['error']):.1e}. "
        f"dpdl's constructors from the parameters alone: C within {built['C']:.1e} and C^-1 "
        f"within {built['C^-1']:.1e} of jax-privacy's entries, sensitivity^2 within "
        f"{built['sens']:.1e} and error within {built['error']:.1e} (relative).",
    ]


def _constructor_section(rows: list[str]) -> list[str]:
    return [
        "The square root, banded square root, BISR and BLTs rebuilt by dpdl's own constructors "
        "from their parameters alone (T, `bands`, a BLT's buffers: jax-privacy's "
        "`BufferedToeplitz(buf_decay, output_scale)` is dpdl's `(theta, omega)` entry by entry, "
        "`c_k = sum_i omega_i theta_i^(k-1)` in both). Differences: the largest entry of C and "
        "of C^-1 (dpdl's exact inverse where the constructor gives one) from the Toeplitz "
        "matrices of jax-privacy's strategy and noising coefficients; the largest relative one "
        "of sensitivity^2 over every recorded (k, b), cyclic and b-min-separated, and of the "
        "error `||A C^-1||_F^2`. Noise stream: what the engine keeps per agent and coordinate "
        "to draw `C^-1 Z` (`noise_streams.plan`), in floats.",
        "",
        "| strategy | dpdl constructor | C | C^-1 | sensitivity^2 | error | noise stream, floats |",
        "|---|---|---:|---:|---:|---:|---|",
        *rows,
    ]


def _non_monotone_section(rows: list[str]) -> list[str]:
    return [
        "Outside the closed form's assumptions (jax-privacy refuses these coefficients; its value "
        "with `skip_checks=True`). A negative coefficient: the closed form gives every "
        "participation the sign +1, dpdl's exact value (equal to a brute force over the cyclic "
        "offsets in the test) is larger. Non-negative but increasing: the closed form is still "
        "cyclic participation's exact value, but under b-min-separation a wider pattern is "
        "worse: dpdl's min-sep sensitivity (every pattern enumerated; it refuses the closed form "
        "there) is strictly above the closed form, at most jax-privacy's general upper bound "
        "(`get_min_sep_sensitivity_upper_bound`).",
        "",
        "| coefficients | C's first column | participation | jax-privacy closed form "
        "(skip_checks) | dpdl exact, cyclic | dpdl, b-min-separated | jax-privacy min-sep upper "
        "bound | jax-privacy's refusal |",
        "|---|---|---|---:|---:|---:|---:|---|",
        *rows,
    ]


def _factorize_section(rows: list[str]) -> list[str]:
    return [
        "The decentralized path on jax-privacy's case: `dpdl factorize` (k = b = 4, T = 16) on "
        "one agent and on 4 agents averaging exactly (`W = 1 1^T / n`: `W^m = W`, so the "
        "utility Gram matrix is `H[t, s] = (T - max(t, s)) tr W = (A^T A)[t, s]` for every n, "
        "unscaled; the test checks it for n = 1, 2, 3, 5, 8). Loss: `sens^2 tr(H X^-1)`, "
        "jax-privacy's `loss_mean` times T.",
        "",
        "| row | agents | participation | jax-privacy sens | dpdl sens | jax-privacy loss x T | "
        "dpdl loss | noise floats | largest rel. difference |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="print, leave BENCHMARKS.md")
    args = parser.parse_args()
    fixture = json.loads(FIXTURE.read_text())
    cases = {case["name"]: case for case in fixture["cases"]}
    checked = [c for c in fixture["cases"] if c["strategy"] != "non-monotone Toeplitz"]
    odd = [c for c in fixture["cases"] if c["strategy"] == "non-monotone Toeplitz"]
    rows, gaps = _rows(checked)
    rebuilt = [c for c in checked if c["strategy"] in ("square root", "banded square root",
                                                       "BISR", "BLT")]  # fmt: skip
    constructor_rows, built = _constructor_rows(rebuilt)
    start, end = markers("crosscheck_jax_privacy")
    text = "\n".join([
        start,
        "## dpdl against jax-privacy 2.0, centralized (`benchmarks/crosscheck_jax_privacy.py`)",
        "",
        *_headline(fixture, gaps, built),
        "",
        "| strategy | parameters | jax-privacy sens | dpdl sens, cyclic | dpdl sens, "
        "b-min-separated (how) | jax-privacy error | dpdl error | largest rel. difference |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        *_constructor_section(constructor_rows),
        "",
        *_non_monotone_section(_non_monotone_rows(odd)),
        "",
        *_factorize_section(_factorize_rows(cases)),
        "",
        "The Toeplitz optimisers on the same problem: jax-privacy's BandMF "
        "(`optimize_banded_toeplitz(T, bands)`, mean error, any b >= bands) and BLT "
        "(`buffered_toeplitz.optimize(n=64, min_sep=16, max_participations=4, error='mean', "
        "max_buffers=4)`, which settles on one buffer) beside dpdl's `bandmf_encoder` and "
        "`blt_strategy` (L-BFGS-B, cyclic (k, b)) on the prefix workload; loss = "
        "sensitivity^2 x mean per-query squared error; parameters: the largest difference of "
        "the coefficients (BandMF, scaled to c_0 = 1) or of (theta, omega) (one buffer).",
        "",
        "| strategy | problem | jax-privacy loss | dpdl loss | relative difference | "
        "parameters | dpdl time (s) |",
        "|---|---|---:|---:|---:|---:|---:|",
        *_toeplitz_optimiser_rows(cases),
        "",
        "The two optimisers of the multi-epoch factorization (Choquette-Choo et al. 2023) on the "
        "same problem: jax-privacy's `dense.optimize(T, epochs=k)` (its default stop: projected "
        "gradient at most 1e-3) and dpdl's `optimize_local` (L-BFGS, relative improvement 1e-9); "
        "loss = sensitivity^2 x mean per-query squared error (both sensitivities are 1 under "
        "fixed-epoch order, i.e. cyclic participation). Under b-min-separated participation "
        "jax-privacy's optimum is not normalised: its sensitivity there is in the last column. "
        + measured(f"numpy {np.__version__}"),
        "",
        "| problem | jax-privacy loss | dpdl loss | relative difference | dpdl iterations | dpdl "
        "time (s) | jax-privacy's C, min-sep sens (dpdl) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *_optimiser_rows([c for c in checked if c["kind"] == "dense"]),
        end,
        "",
    ])  # fmt: skip
    print(text)
    if not args.no_write:
        write_section(text, start, end)


if __name__ == "__main__":
    main()
