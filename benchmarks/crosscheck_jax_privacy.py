"""jax-privacy 2.0's matrix-factorization numbers for fixed strategies, recorded for dpdl's
cross-check (issue 50, item 3): `tests/factorization/data/jax_privacy_crosscheck.json`.

Runs in an environment of its own holding jax-privacy (never dpdl's core dependencies, and without
dpdl: this side knows nothing of dpdl): `make crosscheck-jax-privacy` builds `.venv-jax`
(`pip install jax-privacy==2.0.0`, CPU jax) and runs this script there, then
`benchmarks/crosscheck_jax_privacy_report.py` (dpdl's side, in `.venv`) and the test
`tests/factorization/test_jax_privacy_crosscheck.py`, which read only the fixture.

For each strategy on the centralized prefix-sum workload (A = lower-triangular ones, T x T) the
fixture holds its parameters, the Toeplitz coefficients of C (and of C^-1 where jax-privacy
gives them), or C itself for a non-Toeplitz strategy, and jax-privacy's values, in float64:

- sensitivity^2 under (k, b)-participation: `toeplitz.minsep_sensitivity_squared` (b-min-separated,
  at most k participations; its closed form assumes non-negative, non-increasing coefficients and
  refuses others unless `skip_checks=True`), `banded.minsep_sensitivity_squared` for a
  column-normalized banded C (needs b >= bands), `sensitivity.fixed_epoch_sensitivity` for a dense
  C under (k, b)-fixed-epoch order (= cyclic), `buffered_toeplitz.sensitivity_squared` (a BLT's
  closed form, single participation);
- the per-query squared error `toeplitz.per_query_error` (`banded.per_query_error`,
  `dense.per_query_error`): entry t is `||(A C^-1)[t, :]||^2`, the variance of the t-th prefix
  sum's noise for unit-variance Z; its mean (the reduction of `toeplitz.loss`), max (= the last
  iterate for a Toeplitz C) and total (`tr(A^T A (C^T C)^-1)`), and `loss_mean` = sensitivity^2 x
  mean, `toeplitz.loss`'s normalisation with the multi-participation sensitivity in place of the
  single-participation one.

Run: `.venv-jax/bin/python benchmarks/crosscheck_jax_privacy.py` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402 - after float64 is enabled
import numpy as np  # noqa: E402
from jax_privacy.matrix_factorization import (  # noqa: E402
    banded,
    buffered_toeplitz,
    dense,
    sensitivity,
    toeplitz,
)

FIXTURE = (
    Path(__file__).resolve().parent.parent
    / "tests"
    / "factorization"
    / "data"
    / "jax_privacy_crosscheck.json"
)

#: (k, b) with T = k b for each T: k participations, b steps apart (cyclic), b the min separation.
CYCLIC = {16: [(4, 4), (2, 8)], 64: [(4, 16), (16, 4)], 256: [(16, 16), (4, 64)]}

ERROR_DEFINITION = (
    "per_query_error[t] = ||(A C^-1)[t, :]||_2^2 with A the T x T lower-triangular ones (prefix "
    "sums): the variance of prefix sum t's noise for Z ~ N(0, I) (jax_privacy.matrix_factorization."
    "toeplitz.per_query_error, banded.per_query_error, dense.per_query_error). error_mean = "
    "jnp.mean(per_query_error) (toeplitz.loss's default reduction), error_max = jnp.max (the last "
    "iterate for a Toeplitz C), error_total = the sum = tr(A^T A (C^T C)^-1). loss_mean = "
    "sens_squared * error_mean: toeplitz.loss (mean error times single-participation sensitivity^2)"
    " with the participation's sensitivity^2 in its place."
)


def _floats(values: jax.Array | np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(values).ravel()]


def _error(per_query: jax.Array) -> dict:
    return {
        "error_total": float(jnp.sum(per_query)),
        "error_mean": float(jnp.mean(per_query)),
        "error_max": float(jnp.max(per_query)),
    }


def _non_increasing(coefs: jax.Array) -> bool:
    return bool(jnp.all(coefs >= 0) and jnp.all(jnp.diff(coefs) <= 0))


def _toeplitz_participations(coefs: jax.Array, steps: int, error_mean: float) -> list[dict]:
    """jax-privacy's min-sep sensitivity of a Toeplitz C under each (k, b) of `steps`, every step
    (k = T, b = 1) and single participation (k = 1, b = T), with checks on."""
    rows = []
    for k, b in [*CYCLIC.get(steps, []), (steps, 1), (1, steps)]:
        squared = float(
            toeplitz.minsep_sensitivity_squared(coefs, min_sep=b, max_participations=k, n=steps)
        )
        rows.append({"k": k, "b": b, "sens_squared": squared, "loss_mean": squared * error_mean})
    return rows


def _toeplitz_case(
    name: str, strategy: str, steps: int, coefs: jax.Array, params: dict, noising=None
) -> dict:
    """A Toeplitz strategy: error from C's coefficients (or from C^-1's where given: jax-privacy
    evaluates BLT and BISR noise that way), sensitivity from C's."""
    coefs = toeplitz.pad_coefs_to_n(coefs, steps)
    if noising is None:
        per_query = toeplitz.per_query_error(strategy_coef=coefs, n=steps)
        noising = toeplitz.inverse_coef(coefs, steps)
        source = "strategy_coef"
    else:
        noising = toeplitz.pad_coefs_to_n(noising, steps)
        per_query = toeplitz.per_query_error(noising_coef=noising, n=steps)
        source = "noising_coef"
    error = _error(per_query)
    return {
        "name": name,
        "strategy": strategy,
        "kind": "toeplitz",
        "T": steps,
        "params": params,
        "strategy_coefs": _floats(coefs),
        "noising_coefs": _floats(noising),
        "error_from": source,
        "non_increasing": _non_increasing(coefs),
        **error,
        "jax_toeplitz_loss": float(toeplitz.loss(coefs, steps)),
        "participations": _toeplitz_participations(coefs, steps, error["error_mean"]),
    }


def _banded_cases(bandmf: dict[tuple[int, int], jax.Array]) -> list[dict]:
    """Column-normalized banded C (jax-privacy's `ColumnNormalizedBanded`): from the optimised
    banded Toeplitz coefficients, and one optimised by `banded.optimize` (not Toeplitz)."""
    cases = []
    strategies = [
        (f"column-normalized BandMF T={steps} bands={bands}", steps, bands,
         banded.ColumnNormalizedBanded.from_banded_toeplitz(steps, coefs), "from_banded_toeplitz")
        for (steps, bands), coefs in bandmf.items() if bands > 1
    ]  # fmt: skip
    optimised = banded.optimize(64, bands=4, max_optimizer_steps=50)
    strategies.append(
        ("banded.optimize T=64 bands=4", 64, 4, optimised, "banded.optimize(64, bands=4, "
         "max_optimizer_steps=50)")
    )  # fmt: skip
    for name, steps, bands, strategy, origin in strategies:
        matrix = np.asarray(strategy.materialize())
        params = np.asarray(strategy.params)
        rebuilt = np.zeros((steps, steps))
        for column in range(steps):
            for lag in range(min(bands, steps - column)):
                rebuilt[column + lag, column] = params[column, lag]
        rebuilt /= np.linalg.norm(rebuilt, axis=0)
        assert np.allclose(rebuilt, matrix, rtol=0, atol=1e-14), name  # the test rebuilds it so
        error = _error(banded.per_query_error(strategy))
        rows = []
        for k, b in [*CYCLIC[steps], (1, steps)]:
            if b < bands:
                continue  # banded.minsep_sensitivity_squared refuses b < bands
            squared = float(banded.minsep_sensitivity_squared(strategy, min_sep=b,
                                                              max_participations=k))  # fmt: skip
            rows.append(
                {"k": k, "b": b, "sens_squared": squared,
                 "loss_mean": squared * error["error_mean"]}
            )  # fmt: skip
        cases.append({
            "name": name, "strategy": "BandMF, column-normalized", "kind": "banded", "T": steps,
            "params": {"bands": bands, "origin": origin},
            # C[j + d, j] = band_params[j][d] before each column is scaled to norm 1; a Toeplitz
            # origin keeps its b coefficients only (every row of band_params, cut at the end)
            **({"strategy_coefs": _floats(params[0])} if origin == "from_banded_toeplitz"
               else {"band_params": _floats(params)}),
            **error, "participations": rows,
        })  # fmt: skip
    return cases


def _dense_cases() -> list[dict]:
    """jax-privacy's multi-epoch optimum (`dense.optimize(T, epochs=k)`, Choquette-Choo et al.
    2023) and its fixed-epoch-order sensitivity."""
    cases = []
    for steps, k in [(16, 4), (64, 4)]:
        matrix = dense.optimize(steps, epochs=k)
        error = _error(dense.per_query_error(strategy_matrix=matrix))
        squared = sensitivity.fixed_epoch_sensitivity(matrix, k) ** 2
        cases.append({
            "name": f"dense.optimize T={steps} epochs={k}", "strategy": "multi-epoch optimum",
            "kind": "dense", "T": steps, "params": {"epochs": k}, "matrix": _floats(matrix),
            **error,
            "participations": [{"k": k, "b": steps // k, "sens_squared": squared,
                                "loss_mean": squared * error["error_mean"],
                                "jax_function": "sensitivity.fixed_epoch_sensitivity"}],
        })  # fmt: skip
    return cases


def _blt_case(name: str, blt: buffered_toeplitz.BufferedToeplitz, steps: int, origin: str) -> dict:
    inverse = blt.inverse()
    case = _toeplitz_case(
        name, "BLT", steps, blt.toeplitz_coefs(steps),
        {"buf_decay": _floats(blt.buf_decay), "output_scale": _floats(blt.output_scale),
         "inverse_buf_decay": _floats(inverse.buf_decay),
         "inverse_output_scale": _floats(inverse.output_scale), "origin": origin},
        noising=inverse.toeplitz_coefs(steps),
    )  # fmt: skip
    case["blt_closed_form"] = {
        "sens_squared_single": float(buffered_toeplitz.sensitivity_squared(blt, steps)),
        "max_error": float(buffered_toeplitz.max_error(inverse, steps)),
        "max_loss": float(buffered_toeplitz.max_loss(blt, steps)),
    }
    return case


def _blt_cases() -> list[dict]:
    cases = []
    for steps in (64, 256):
        given = buffered_toeplitz.BufferedToeplitz.build(buf_decay=[0.95, 0.6],
                                                         output_scale=[0.2, 0.25])  # fmt: skip
        cases.append(_blt_case(f"BLT (theta, omega) given T={steps}", given, steps, "given"))
        for buffers in (2, 3, 4):
            blt = buffered_toeplitz.BufferedToeplitz.from_rational_approx_to_sqrt_x(buffers)
            cases.append(
                _blt_case(f"RA-BLT buffers={buffers} T={steps}", blt, steps,
                          f"from_rational_approx_to_sqrt_x({buffers})")
            )  # fmt: skip
    k, b = CYCLIC[64][0]
    optimised = buffered_toeplitz.optimize(
        n=64, min_sep=b, max_participations=k, error="mean", max_buffers=4
    )
    cases.append(
        _blt_case(f"buffered_toeplitz.optimize T=64 k={k} b={b}", optimised, 64,
                  f"optimize(n=64, min_sep={b}, max_participations={k}, error='mean', "
                  "max_buffers=4)")
    )  # fmt: skip
    return cases


def _toeplitz_cases() -> tuple[list[dict], dict[tuple[int, int], jax.Array]]:
    cases, bandmf = [], {}
    for steps in CYCLIC:
        cases.append(_toeplitz_case(f"identity T={steps}", "identity", steps, jnp.ones(1), {}))
        sqrt = toeplitz.optimal_max_error_strategy_coefs(steps)
        cases.append(
            _toeplitz_case(f"square root T={steps}", "square root", steps, sqrt,
                           {"origin": "optimal_max_error_strategy_coefs(T)"})
        )  # fmt: skip
        for bands in (1, 4, 16):
            optimised = toeplitz.optimize_banded_toeplitz(steps, bands)
            bandmf[steps, bands] = optimised
            cases.append(
                _toeplitz_case(f"BandMF T={steps} bands={bands}", "BandMF (banded Toeplitz)",
                               steps, optimised,
                               {"bands": bands, "origin": "optimize_banded_toeplitz(T, bands)"})
            )  # fmt: skip
            if not 1 < bands < steps:
                continue  # 1 band: the identity; T bands: the square root itself
            truncated = toeplitz.optimal_max_error_strategy_coefs(bands)
            cases.append(
                _toeplitz_case(f"banded square root T={steps} bands={bands}",
                               "banded square root", steps, truncated,
                               {"bands": bands,
                                "origin": "optimal_max_error_strategy_coefs(bands)"})
            )  # fmt: skip
            noising = toeplitz.optimal_max_error_noising_coefs(bands)  # BISR: C^-1 cut to bands
            cases.append(
                _toeplitz_case(f"BISR T={steps} bands={bands}", "BISR", steps,
                               toeplitz.inverse_coef(noising, steps),
                               {"bands": bands,
                                "origin": "C^-1 = optimal_max_error_noising_coefs(bands)"},
                               noising=noising)
            )  # fmt: skip
    return cases, bandmf


def _refusal(call: Callable[[], object]) -> str:
    try:
        call()
    except ValueError as error:
        return str(error).splitlines()[0]
    return ""


def _non_monotone_cases() -> list[dict]:
    """Coefficient sets outside the Toeplitz closed form's assumptions, evaluated with
    `skip_checks=True` (the checks' refusal recorded): one with a negative coefficient at lag b
    (signs: the closed form takes every participation with sign +1), one non-negative but
    increasing (a later lag heavier: under min-sep a wider separation is worse than b)."""
    sets = {
        "negative at lag b": [1.0, 0.5, 0.25, 0.125, -0.6],
        "non-negative, increasing at lag b+1": [1.0, 0.2, 0.1, 0.1, 0.1, 0.9],
    }
    cases = []
    for label, values in sets.items():
        for steps, k, b in [(8, 2, 4), (16, 4, 4)]:
            coefs = toeplitz.pad_coefs_to_n(jnp.array(values), steps)
            error = _error(toeplitz.per_query_error(strategy_coef=coefs, n=steps))
            squared = float(toeplitz.minsep_sensitivity_squared(
                coefs, min_sep=b, max_participations=k, n=steps, skip_checks=True))  # fmt: skip
            bound = sensitivity.get_min_sep_sensitivity_upper_bound(
                toeplitz.materialize_lower_triangular(coefs), b, k
            )
            cases.append({
                "name": f"non-monotone ({label}) T={steps}", "strategy": "non-monotone Toeplitz",
                "kind": "toeplitz", "T": steps, "params": {"set": label},
                "strategy_coefs": _floats(coefs),
                "noising_coefs": _floats(toeplitz.inverse_coef(coefs, steps)),
                "error_from": "strategy_coef", "non_increasing": _non_increasing(coefs), **error,
                "jax_toeplitz_loss": float(toeplitz.loss(coefs, steps)),
                "participations": [{
                    "k": k, "b": b, "sens_squared": squared,
                    "loss_mean": squared * error["error_mean"], "skip_checks": True,
                    "refusal_with_checks": _refusal(lambda c=coefs, s=steps, kk=k, bb=b:
                        toeplitz.minsep_sensitivity_squared(c, min_sep=bb, max_participations=kk,
                                                            n=s)),
                    "minsep_upper_bound_squared": bound**2,
                }],
            })  # fmt: skip
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=FIXTURE)
    args = parser.parse_args()
    toeplitz_cases, bandmf = _toeplitz_cases()
    cases = [
        *toeplitz_cases,
        *_banded_cases(bandmf),
        *_blt_cases(),
        *_dense_cases(),
        *_non_monotone_cases(),
    ]
    fixture = {
        "about": (
            "jax-privacy's sensitivity and expected error of fixed strategies on the centralized "
            "prefix-sum workload, written by benchmarks/crosscheck_jax_privacy.py; read by "
            "tests/factorization/test_jax_privacy_crosscheck.py"
        ),
        "versions": {
            "jax-privacy": version("jax-privacy"),
            "jax": jax.__version__,
            "jaxlib": version("jaxlib"),
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "float64": bool(jax.config.read("jax_enable_x64")),
        "error_definition": ERROR_DEFINITION,
        "sensitivity_definition": (
            "sens_squared: toeplitz.minsep_sensitivity_squared(strategy_coefs, min_sep=b, "
            "max_participations=k, n=T) for a Toeplitz C: ||C 1_{0, b, ..., (k-1) b}||^2, the "
            "worst case only for non-negative, non-increasing coefficients (checked unless "
            "skip_checks=True; non_increasing says whether they are); "
            "banded.minsep_sensitivity_squared (= k, needs b >= bands) for a column-normalized "
            "banded C; sensitivity.fixed_epoch_sensitivity(C, k)^2 for a dense C ((k, b) fixed "
            "epoch order: the patterns {i, i + b, ...}); blt_closed_form.sens_squared_single: "
            "buffered_toeplitz.sensitivity_squared (max column norm^2, Lemma 5.3 of "
            "arXiv:2404.16706)."
        ),
        "cases": cases,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(fixture, indent=1)
    text = re.sub(
        r"\[\n\s+([-0-9.eE+,\s]*?)\n\s*\]", lambda m: "[" + " ".join(m[1].split()) + "]", text
    )
    args.output.write_text(text + "\n")
    print(f"{len(cases)} strategies written to {args.output}")


if __name__ == "__main__":
    main()
