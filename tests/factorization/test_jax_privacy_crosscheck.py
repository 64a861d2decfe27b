"""dpdl's sensitivity and expected error against jax-privacy 2.0's on the centralized special case
(issue 50, item 3): one agent, the prefix-sum workload A (T x T lower-triangular ones).

The fixture `data/jax_privacy_crosscheck.json` holds jax-privacy's numbers for fixed strategies
(identity, square root, banded square root, BandMF as optimised by jax-privacy, column-normalized
banded, BISR, BLTs given and optimised, jax-privacy's dense multi-epoch optimum), written by
`benchmarks/crosscheck_jax_privacy.py` in an environment of its own (`make
crosscheck-jax-privacy`): this test reads only the fixture, with numpy, and needs no jax.

Why cyclic participation is the right comparison for jax-privacy's min-separation closed form.
`toeplitz.minsep_sensitivity_squared(c, min_sep=b, max_participations=k)` returns `||C 1_P||^2`
for the one pattern `P = {0, b, ..., (k-1) b}`: the worst of all b-min-separated patterns when
the coefficients are non-negative and non-increasing (arXiv:2405.13763, Theorem 2). With `T = k b`,
`P` is cyclic participation's pattern of offset 0, and every cyclic pattern is b-separated with k
participations, so the worst cyclic pattern is at most the worst min-sep one, which is `P`, itself
cyclic: the two coincide. (Under cyclic participation offset 0 is even the worst for any
non-negative Toeplitz C: pattern i is pattern 0 shifted down by i with its last rows cut, which
cannot lengthen a non-negative vector. What breaks the closed form under cyclic participation is a
negative coefficient; a non-negative increasing one breaks it under min-separation.) With
non-negative coefficients `C^T C >= 0` entrywise, so dpdl's exact sensitivity is that same sum of
the pattern's Gram block (Pillutla et al. 2025, Lemma 3.15(b)).

jax-privacy's normalisation: its per-query error is `||(A C^-1)[t, :]||^2` and `toeplitz.loss` is
its mean times sensitivity^2; dpdl's [`local_loss`][dpdl.factorization.mafalda.local_loss] is
`sens^2 tr(A^T A (C^T C)^-1)`, the sum, so `local_loss / T` is jax-privacy's `loss_mean`.

Beyond the fixture's coefficients: dpdl's own constructors (the square root, BSR, BISR, BLTs from
their buffers) rebuild each strategy from its parameters alone, to jax-privacy's coefficients
(1e-12), sensitivity and error (1e-9), and the engine's noise streams draw jax-privacy's noise;
b-min-separated participation ([`MinSeparated`][dpdl.factorization.min_separation.MinSeparated])
against jax-privacy's min-sep values, equal where its formula holds and strictly above its
unchecked closed form where it does not; and the decentralized path itself (`utility_gram`,
`dpdl factorize`) on one agent and on exact averaging, where its workload is the prefix sums';
and dpdl's BandMF and BLT optimisers reaching jax-privacy's optima.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import cvxpy as cp
import numpy as np
import pytest
from scipy.linalg import solve_triangular, toeplitz

from dpdl.experiments.factorize import factorize
from dpdl.factorization import MinSeparated, Participation
from dpdl.factorization.blt import (
    blt_coefficients,
    blt_strategy,
    decoder_coefficients,
    inverse_buffer,
)
from dpdl.factorization.generalized_sensitivity import pattern_sensitivity
from dpdl.factorization.mafalda import (
    agent_utility_grams,
    local_loss,
    local_sensitivity,
    utility_gram,
)
from dpdl.factorization.min_separation import PATTERN_LIMIT, min_separated_sensitivity
from dpdl.factorization.strategy import Strategy
from dpdl.factorization.toeplitz import (
    bandmf_encoder,
    bisr_strategy,
    bsr_encoder,
    sqrt_strategy,
    toeplitz_matrix,
)
from dpdl.mechanisms.noise_streams import plan, stream

FIXTURE = json.loads((Path(__file__).parent / "data" / "jax_privacy_crosscheck.json").read_text())
CASES = {case["name"]: case for case in FIXTURE["cases"]}
RTOL = 1e-9
NON_MONOTONE = [name for name in CASES if CASES[name]["strategy"] == "non-monotone Toeplitz"]
CHECKED = [
    (name, index)
    for name, case in CASES.items()
    if name not in NON_MONOTONE
    for index in range(len(case["participations"]))
]


def encoder(case: dict) -> np.ndarray:
    """C from the fixture's parameters: lower-triangular Toeplitz from its first column, a
    column-normalized banded matrix (`C[j + d, j] = band_params[j][d]`, or the Toeplitz coefficients
    `d < bands` in every column, each column then scaled to norm 1, as jax-privacy's
    `ColumnNormalizedBanded.materialize`), or the dense matrix itself."""
    steps = case["T"]
    if case["kind"] == "dense":
        return np.array(case["matrix"]).reshape(steps, steps)
    if case["kind"] == "toeplitz":
        return toeplitz(case["strategy_coefs"], np.zeros(steps))
    bands = case["params"]["bands"]
    if "band_params" in case:
        params = np.array(case["band_params"]).reshape(steps, bands)
    else:
        params = np.tile(case["strategy_coefs"], (steps, 1))
    matrix = np.zeros((steps, steps))
    for lag in range(bands):
        columns = np.arange(steps - lag)
        matrix[columns + lag, columns] = params[columns, lag]
    return matrix / np.linalg.norm(matrix, axis=0)


def prefix_gram(steps: int) -> np.ndarray:
    """`H = A^T A` of the prefix-sum workload."""
    workload = np.tri(steps)
    return workload.T @ workload


def relative(value: float, reference: float) -> float:
    return abs(value - reference) / abs(reference)


def test_the_fixture_is_jax_privacy_2_in_float64() -> None:
    assert FIXTURE["versions"]["jax-privacy"] == "2.0.0"
    assert FIXTURE["float64"] is True
    kinds = {case["strategy"] for case in FIXTURE["cases"]}
    assert {"identity", "square root", "banded square root", "BandMF (banded Toeplitz)", "BISR",
            "BLT", "BandMF, column-normalized", "multi-epoch optimum"} <= kinds  # fmt: skip


@pytest.mark.parametrize(("name", "index"), CHECKED)
def test_sensitivity_and_error_match_jax_privacy(name: str, index: int) -> None:
    """dpdl's exact sensitivity under cyclic `(k, b)`-participation (`T = k b`; `k = T, b = 1`:
    every step; `k = 1`: single participation) and its loss on the prefix workload equal
    jax-privacy's min-separation (or fixed-epoch) values to 1e-9, where jax-privacy's formula
    holds: its assumptions are checked first (module doc)."""
    case = CASES[name]
    row = case["participations"][index]
    steps, k, b = case["T"], row["k"], row["b"]
    assert k * b == steps  # T = k b: jax-privacy's pattern {0, b, ...} is a cyclic one
    if case["kind"] == "toeplitz":  # the closed form's assumptions, checked, never assumed
        coefs = np.array(case["strategy_coefs"])
        assert case["non_increasing"]
        assert (coefs >= 0).all() and (np.diff(coefs) <= 0).all()
    if case["kind"] == "banded":
        assert b >= case["params"]["bands"]  # banded.minsep_sensitivity_squared's condition
    matrix = encoder(case)
    participation = Participation.cyclic(steps, k, b)
    sensitivity = local_sensitivity(matrix, participation) ** 2
    loss = local_loss(prefix_gram(steps), matrix, participation)
    assert relative(sensitivity, row["sens_squared"]) < RTOL
    assert relative(loss / sensitivity, case["error_total"]) < RTOL
    assert relative(loss / steps, row["loss_mean"]) < RTOL
    assert relative(loss / steps / sensitivity, case["error_mean"]) < RTOL


@pytest.mark.parametrize("name", [name for name in CASES if "blt_closed_form" in CASES[name]])
def test_a_blt_s_single_participation_sensitivity_matches_its_closed_form(name: str) -> None:
    """jax-privacy's closed form for a BLT's sensitivity (Lemma 5.3 of arXiv:2404.16706, from the
    buffers alone) against dpdl's on the materialized Toeplitz C."""
    case = CASES[name]
    single = Participation.cyclic(case["T"], 1, case["T"])
    dpdl = local_sensitivity(encoder(case), single) ** 2
    assert relative(dpdl, case["blt_closed_form"]["sens_squared_single"]) < RTOL


def cyclic_brute_force(matrix: np.ndarray, k: int, b: int) -> float:
    """The exact sensitivity^2 under cyclic participation, offset by offset: `max <X_P, Y>` over
    Y PSD with unit diagonal bound. For two participations it is `X_00 + X_11 + 2 |X_01|` (a sign
    per participation); for more, CVXPY's SDP."""
    gram = matrix.T @ matrix
    values = []
    for offset in range(b):
        pattern = list(range(offset, len(matrix), b))
        block = gram[np.ix_(pattern, pattern)]
        if k == 2:
            values.append(block[0, 0] + block[1, 1] + 2 * abs(block[0, 1]))
            continue
        directions = cp.Variable((k, k), PSD=True)
        problem = cp.Problem(cp.Maximize(cp.trace(block @ directions)), [cp.diag(directions) <= 1])
        problem.solve()
        values.append(problem.value)
    return max(values)


def min_sep_brute_force(matrix: np.ndarray, k: int, b: int) -> float:
    """Sensitivity^2 under b-min-separated participation (at most k times) of a C with
    `C^T C >= 0`: the largest sum of a pattern's Gram block, over every pattern."""
    gram = matrix.T @ matrix
    assert (gram >= 0).all()
    best = 0.0
    for size in range(1, k + 1):
        for pattern in itertools.combinations(range(len(matrix)), size):
            if all(later - earlier >= b for earlier, later in itertools.pairwise(pattern)):
                best = max(best, float(gram[np.ix_(pattern, pattern)].sum()))
    return best


@pytest.mark.parametrize("name", [name for name in NON_MONOTONE if "negative at" in name])
def test_the_toeplitz_closed_form_underestimates_a_negative_coefficient(name: str) -> None:
    """A negative coefficient at lag b: jax-privacy refuses it, and with `skip_checks=True` its
    closed form sums the pattern's Gram block with every sign +1, where the worst gradients flip a
    sign. dpdl's exact sensitivity is the brute force over cyclic offsets, and larger."""
    case = CASES[name]
    (row,) = case["participations"]
    assert row["skip_checks"] and "non-negative" in row["refusal_with_checks"]
    matrix = encoder(case)
    dpdl = local_sensitivity(matrix, Participation.cyclic(case["T"], row["k"], row["b"])) ** 2
    brute = cyclic_brute_force(matrix, row["k"], row["b"])
    assert dpdl > 1.5 * row["sens_squared"]
    assert dpdl == pytest.approx(brute, rel=1e-12 if row["k"] == 2 else 1e-6)


@pytest.mark.parametrize("name", [name for name in NON_MONOTONE if "increasing" in name])
def test_an_increasing_coefficient_breaks_the_closed_form_under_min_separation(name: str) -> None:
    """Non-negative coefficients, heavier at lag b + 1: jax-privacy refuses them; with
    `skip_checks=True` its closed form is still cyclic participation's exact value (module doc:
    non-negative Toeplitz, offset 0 is the worst cyclic pattern), but under b-min-separation the
    pattern {0, b + 1} is worse, and the closed form underestimates. jax-privacy's general bound
    (`get_min_sep_sensitivity_upper_bound`) stays above the enumeration."""
    case = CASES[name]
    (row,) = case["participations"]
    assert row["skip_checks"] and "non-increasing" in row["refusal_with_checks"]
    matrix = encoder(case)
    dpdl = local_sensitivity(matrix, Participation.cyclic(case["T"], row["k"], row["b"])) ** 2
    assert relative(dpdl, row["sens_squared"]) < RTOL
    min_sep = min_sep_brute_force(matrix, row["k"], row["b"])
    assert min_sep > 1.2 * row["sens_squared"]
    assert min_sep <= row["minsep_upper_bound_squared"] * (1 + RTOL)


# dpdl's own constructors from jax-privacy's parameters -------------------------------------------

CONSTRUCTED = [
    name
    for name, case in CASES.items()
    if case["strategy"] in ("square root", "banded square root", "BISR", "BLT")
]
COEFFICIENT_ATOL = 1e-12


def dpdl_strategy(case: dict) -> tuple[Strategy, str, int]:
    """The fixture's strategy built by dpdl's own constructors from its parameters alone (T,
    `bands`, a BLT's buffer), with the noise stream the engine draws it with and that stream's
    floats of state per agent and coordinate.

    A BLT: jax-privacy's `BufferedToeplitz(buf_decay=d, output_scale=s)` is `t_0 = 1`, `t_k =
    sum_i s_i d_i^(k-1)` (its class doc), dpdl's `(theta, omega)` is `c_0 = 1`, `c_k = sum_i
    omega_i theta_i^(k-1)` ([`blt`][dpdl.factorization.blt]): the same parametrisation, so the
    conversion is `theta = buf_decay`, `omega = output_scale`, entry by entry. (The inverses
    differ in form only: jax-privacy's feedback matrix is `Theta - omega 1^T`, dpdl's its
    transpose's `Theta - 1 omega^T`, with the same eigenvalues and impulse response.)"""
    steps, params = case["T"], case["params"]
    timeline = Participation.cyclic(steps, 1, steps)  # the constructors read T (and bands) only
    strategy = case["strategy"]
    if strategy == "square root":
        return sqrt_strategy(timeline), "dense", steps
    bands = params.get("bands", steps)
    if strategy == "banded square root":
        return Strategy(bsr_encoder(timeline, bands)), "banded-encoder", bands - 1
    if strategy == "BISR":
        return bisr_strategy(timeline, bands), "banded-decoder", bands - 1
    theta, omega = np.array(params["buf_decay"]), np.array(params["output_scale"])
    built = Strategy(
        toeplitz_matrix(blt_coefficients(theta, omega, steps), steps),
        toeplitz_matrix(decoder_coefficients(theta, omega, steps), steps),
        buffer=(theta, omega),
    )
    return built, "buffer", len(theta)


def decoder_of(strategy: Strategy) -> np.ndarray:
    """`C^-1`: the constructor's exact one, else C's inverse by forward substitution."""
    if strategy.decoder is not None:
        return strategy.decoder
    return solve_triangular(strategy.encoder, np.eye(len(strategy.encoder)), lower=True)


@pytest.mark.parametrize("name", CONSTRUCTED)
def test_dpdl_s_constructors_give_jax_privacy_s_coefficients(name: str) -> None:
    """C and C^-1 from dpdl's constructors equal the lower-triangular Toeplitz matrices of
    jax-privacy's coefficients (`strategy_coefs`, `noising_coefs`) entry by entry to 1e-12, and a
    BLT's inverse buffer ([`inverse_buffer`][dpdl.factorization.blt.inverse_buffer]) is
    jax-privacy's `BufferedToeplitz.inverse()`, up to the buffers' order."""
    case = CASES[name]
    steps = case["T"]
    strategy, _, _ = dpdl_strategy(case)
    assert np.abs(strategy.encoder - toeplitz_matrix(case["strategy_coefs"], steps)).max() < (
        COEFFICIENT_ATOL
    )
    assert np.abs(decoder_of(strategy) - toeplitz_matrix(case["noising_coefs"], steps)).max() < (
        COEFFICIENT_ATOL
    )
    if strategy.buffer is not None:
        theta, omega = inverse_buffer(*strategy.buffer)
        order, jax_order = np.argsort(theta), np.argsort(case["params"]["inverse_buf_decay"])
        jax_theta = np.array(case["params"]["inverse_buf_decay"])[jax_order]
        jax_omega = np.array(case["params"]["inverse_output_scale"])[jax_order]
        assert np.abs(theta[order] - jax_theta).max() < COEFFICIENT_ATOL
        assert np.abs(omega[order] - jax_omega).max() < COEFFICIENT_ATOL


@pytest.mark.parametrize("name", CONSTRUCTED)
def test_dpdl_s_constructors_give_jax_privacy_s_sensitivity_and_error(name: str) -> None:
    """The strategy dpdl builds from jax-privacy's parameters has jax-privacy's sensitivity under
    every recorded `(k, b)` (cyclic and b-min-separated alike: the coefficients are non-negative
    and non-increasing) and its error, to 1e-9: the error both from dpdl's exact `C^-1`
    (`||A C^-1||_F^2`, as jax-privacy computes BLT and BISR errors from their noising
    coefficients) and from [`local_loss`][dpdl.factorization.mafalda.local_loss] (C's numerical
    inverse)."""
    case = CASES[name]
    steps = case["T"]
    strategy, _, _ = dpdl_strategy(case)
    error_total = float(np.sum((np.tri(steps) @ decoder_of(strategy)) ** 2))
    assert relative(error_total, case["error_total"]) < RTOL
    for row in case["participations"]:
        k, b = row["k"], row["b"]
        for participation in (Participation.cyclic(steps, k, b), MinSeparated(steps, k, b)):
            sensitivity = local_sensitivity(strategy.encoder, participation) ** 2
            loss = local_loss(prefix_gram(steps), strategy.encoder, participation)
            assert relative(sensitivity, row["sens_squared"]) < RTOL
            assert relative(loss / steps, row["loss_mean"]) < RTOL


@pytest.mark.parametrize("name", CONSTRUCTED)
def test_the_engine_s_noise_stream_draws_jax_privacy_s_noise(name: str) -> None:
    """The engine's noise stream for dpdl's strategy
    ([`plan`][dpdl.mechanisms.noise_streams.plan], [`stream`][dpdl.mechanisms.noise_streams.stream])
    keeps the state its structure allows (the square root every seed, BSR and BISR `bands - 1`
    floats, a BLT its `d` buffers) and draws `N Z` with N the Toeplitz matrix of jax-privacy's
    noising coefficients, to 1e-9 of the noise's scale."""
    case = CASES[name]
    steps, agents, dim = case["T"], 2, 3
    strategy, kind, memory = dpdl_strategy(case)
    assert plan(strategy.encoder, decoder_of(strategy), strategy.buffer) == (kind, memory)
    noise = stream(
        kind,
        strategy.encoder,
        decoder_of(strategy),
        strategy.buffer,
        1.0,
        agents,
        np.random.default_rng(5),
        dim,
    )
    drawn = np.stack(list(itertools.islice(noise, steps)))
    seeds = np.random.default_rng(5).standard_normal((steps, agents, dim))
    expected = np.tensordot(toeplitz_matrix(case["noising_coefs"], steps), seeds, axes=1)
    assert np.abs(drawn - expected).max() < RTOL * np.abs(expected).max()


# b-min-separated participation --------------------------------------------------------------------

MIN_SEP = [
    (name, index)
    for name, case in CASES.items()
    if case["kind"] != "dense" and name not in NON_MONOTONE
    for index in range(len(case["participations"]))
]


@pytest.mark.parametrize(("name", "index"), MIN_SEP)
def test_min_separated_sensitivity_matches_jax_privacy(name: str, index: int) -> None:
    """dpdl's sensitivity under b-min-separated `(k, b)`-participation
    ([`MinSeparated`][dpdl.factorization.min_separation.MinSeparated]) equals jax-privacy's
    `minsep_sensitivity_squared` to 1e-9 wherever jax-privacy's formula holds: a Toeplitz C with
    non-negative, non-increasing coefficients (dpdl's closed form, after its own check), a
    column-normalized banded C with `b >= bands` (dpdl enumerates every pattern, or where they
    are too many its certified upper bound, tight here)."""
    case = CASES[name]
    row = case["participations"][index]
    participation = MinSeparated(case["T"], row["k"], row["b"])
    matrix = encoder(case)
    found = min_separated_sensitivity(matrix, participation, pattern_sensitivity)
    if case["kind"] == "toeplitz":
        assert case["non_increasing"] and found.method == "closed form"
    else:
        assert row["b"] >= case["params"]["bands"]
        expected = "exact" if participation.pattern_count <= PATTERN_LIMIT else "upper bound"
        assert found.method == expected
    assert relative(found.squared, row["sens_squared"]) < RTOL
    assert relative(local_sensitivity(matrix, participation) ** 2, row["sens_squared"]) < RTOL


def sign_brute_force(matrix: np.ndarray, k: int, b: int) -> float:
    """A lower bound on sensitivity^2 under b-min-separated participation, from outside dpdl:
    every pattern of k steps, every sign vector `s`, `max s^T X_P s`."""
    gram = matrix.T @ matrix
    signs = np.array(list(itertools.product([1.0, -1.0], repeat=k)))
    best = 0.0
    for pattern in itertools.combinations(range(len(matrix)), k):
        if all(later - earlier >= b for earlier, later in itertools.pairwise(pattern)):
            block = gram[np.ix_(pattern, pattern)]
            best = max(best, float(np.einsum("si,ij,sj->s", signs, block, signs).max()))
    return best


def test_jax_privacy_s_multi_epoch_optimum_is_worse_under_min_separation() -> None:
    """jax-privacy's dense multi-epoch optimum is normalised under fixed-epoch order
    (`fixed_epoch_sensitivity` = 1): under b-min-separation its sensitivity^2 is 1.173 (T = 16,
    k = b = 4), the exact value dpdl finds by enumeration, equal to a brute force over every
    pattern and sign vector."""
    case = CASES["dense.optimize T=16 epochs=4"]
    (row,) = case["participations"]
    participation = MinSeparated(case["T"], row["k"], row["b"])
    matrix = encoder(case)
    found = min_separated_sensitivity(matrix, participation, pattern_sensitivity)
    assert found.method == "exact"
    assert relative(row["sens_squared"], 1.0) < RTOL
    assert found.squared > 1.15 * row["sens_squared"]
    assert found.squared == pytest.approx(sign_brute_force(matrix, row["k"], row["b"]), rel=1e-9)


@pytest.mark.parametrize("name", NON_MONOTONE)
def test_min_separated_sensitivity_exceeds_jax_privacy_s_unchecked_closed_form(name: str) -> None:
    """Coefficients outside the closed form's assumptions: dpdl does not use it (it enumerates
    every pattern, exactly) and finds a strictly larger sensitivity than jax-privacy's
    `skip_checks=True` value, at most jax-privacy's own general upper bound."""
    case = CASES[name]
    (row,) = case["participations"]
    participation = MinSeparated(case["T"], row["k"], row["b"])
    found = min_separated_sensitivity(encoder(case), participation, pattern_sensitivity)
    assert found.method == "exact"
    assert found.squared > 1.3 * row["sens_squared"]
    assert found.squared <= row["minsep_upper_bound_squared"] * (1 + RTOL)


def test_an_increasing_coefficient_gives_2_174856_against_jax_privacy_s_1_870829() -> None:
    """C's first column [1, .2, .1, .1, .1, .9, 0, 0], at most 2 participations 4 apart: the
    closed form's pattern {0, 4} gives 1.870829 (jax-privacy with `skip_checks=True`), dpdl's
    exact sensitivity is 2.174856 (the pattern {0, 5}: `||c + shift(c, 5)||^2 = 4.73`)."""
    case = CASES["non-monotone (non-negative, increasing at lag b+1) T=8"]
    (row,) = case["participations"]
    assert np.trim_zeros(case["strategy_coefs"], "b") == pytest.approx([1, 0.2, 0.1, 0.1, 0.1, 0.9])
    dpdl = local_sensitivity(encoder(case), MinSeparated(case["T"], row["k"], row["b"]))
    assert round(dpdl, 6) == 2.174856
    assert round(math.sqrt(row["sens_squared"]), 6) == 1.870829


# the centralized special case of the decentralized workload ---------------------------------------


@pytest.mark.parametrize("steps", [16, 64])
def test_one_agent_s_utility_gram_is_the_prefix_workload_s(steps: int) -> None:
    """One agent (`W = [[1]]`): the gossiped model is the running sum of the noise, F's blocks
    `W^(r-t+1)` are all 1, F = A, and `H = A^T A` exactly."""
    assert np.array_equal(utility_gram(np.ones((1, 1)), steps), prefix_gram(steps))


@pytest.mark.parametrize("agents", [2, 3, 5, 8])
def test_exact_averaging_s_utility_gram_is_the_prefix_workload_s(agents: int) -> None:
    """Exact averaging `W = 1 1^T / n`: `W^m = W` for m >= 1, so F's block `(r, t)` is W for every
    `t <= r`, and `H[t, s] = sum_(r >= max(t, s)) tr(W^T W) = (T - max(t, s)) tr(W) = (A^T
    A)[t, s]` (`W^2 = W`, `tr W = 1`): H is the prefix workload's for every n, each agent's own
    term `H_i = A^T A / n` (its noise reaches all n models with weight 1/n). The cross-checked
    numbers are what the decentralized path computes there, unscaled. Checked on the fixed
    symmetric route (eigenvalues) and on the general one (W given as a sequence)."""
    steps = 16
    averaging = np.full((agents, agents), 1.0 / agents)
    gram = prefix_gram(steps)
    assert np.allclose(utility_gram(averaging, steps), gram, rtol=1e-12, atol=0)
    assert np.allclose(utility_gram([averaging] * steps, steps), gram, rtol=1e-12, atol=0)
    per_agent = agent_utility_grams(averaging, steps)
    assert np.allclose(per_agent, gram / agents, rtol=1e-12, atol=0)


FACTORIZE_ROWS = {  # dpdl factorize's rows at k = b = 4 (bands default to b) and the fixture's
    "dp-dsgd": "identity T=16",
    "sqrt": "square root T=16",
    "bsr": "banded square root T=16 bands=4",
    "bisr": "BISR T=16 bands=4",
}


@pytest.mark.parametrize("participation", ["cyclic", "min-sep"])
@pytest.mark.parametrize("agents", [1, 4])
def test_factorize_on_exact_averaging_reproduces_jax_privacy(
    agents: int, participation: str
) -> None:
    """`dpdl factorize` end to end on one agent and on 4 agents averaging exactly, k = b = 4 (T =
    16): its rows' sensitivity and loss (`sens^2 tr(H X^-1)`, the sum over steps: T times
    jax-privacy's `loss_mean`) are jax-privacy's, to 1e-9, under cyclic and b-min-separated
    participation alike, with the noise state the engine keeps."""
    weights = np.full((agents, agents), 1.0 / agents)
    result = factorize(weights, 4, 4, eps=1.0, delta=1e-5, participation=participation)
    rows = {row.method: row for row in result.rows}
    memory = {"dp-dsgd": 0, "sqrt": 16, "bsr": 3, "bisr": 3}
    for method, name in FACTORIZE_ROWS.items():
        (jax,) = [r for r in CASES[name]["participations"] if (r["k"], r["b"]) == (4, 4)]
        assert relative(rows[method].sensitivity ** 2, jax["sens_squared"]) < RTOL
        assert relative(rows[method].loss / result.steps, jax["loss_mean"]) < RTOL
        assert rows[method].memory_per_step == memory[method]
        kind = "closed form" if participation == "min-sep" else "exact"
        assert rows[method].sensitivity_kind == kind


# dpdl's optimisers on jax-privacy's problems ------------------------------------------------------

BANDMF = ["BandMF T=16 bands=4", "BandMF T=64 bands=4", "BandMF T=64 bands=16"]


@pytest.mark.parametrize("name", BANDMF)
def test_dpdl_s_bandmf_reaches_jax_privacy_s_optimum(name: str) -> None:
    """`optimize_banded_toeplitz(T, bands)` minimises the mean error times the sensitivity^2 of
    a banded Toeplitz C under any `(k, b)` with `b >= bands` (`k ||c||^2`), the objective of
    dpdl's [`bandmf_encoder`][dpdl.factorization.toeplitz.bandmf_encoder] on the prefix
    workload: the two optima's losses agree to 1e-9 (relative; 6e-11 at worst), their
    coefficients (scaled to `c_0 = 1`) to 1e-5, an optimiser's tolerance."""
    case = CASES[name]
    steps, bands = case["T"], case["params"]["bands"]
    row = next(r for r in case["participations"] if 1 < r["k"] < steps and r["b"] >= bands)
    participation = Participation.cyclic(steps, row["k"], row["b"])
    found = bandmf_encoder(prefix_gram(steps), participation, bands)
    loss = local_loss(prefix_gram(steps), found, participation) / steps
    assert relative(loss, row["loss_mean"]) < RTOL
    coefs = np.array(case["strategy_coefs"])
    assert np.abs(found[:, 0] / found[0, 0] - coefs / coefs[0]).max() < 1e-5


@pytest.mark.parametrize("buffer", [1, 4])
def test_dpdl_s_blt_reaches_jax_privacy_s_optimum(buffer: int) -> None:
    """jax-privacy's `buffered_toeplitz.optimize(n=64, min_sep=16, max_participations=4,
    error='mean', max_buffers=4)` settles on one buffer; dpdl's
    [`blt_strategy`][dpdl.factorization.blt.blt_strategy] (cyclic (4, 16), the same sensitivity
    for these non-negative coefficients) reaches the same loss to 1e-9 with one buffer or four,
    and with one the same `(theta, omega)` to 1e-6."""
    case = CASES["buffered_toeplitz.optimize T=64 k=4 b=16"]
    steps, row = case["T"], case["participations"][0]
    participation = Participation.cyclic(steps, row["k"], row["b"])
    found = blt_strategy(prefix_gram(steps), participation, buffer)
    for accounted in (participation, MinSeparated(steps, row["k"], row["b"])):
        loss = local_loss(prefix_gram(steps), found.encoder, accounted) / steps
        assert relative(loss, row["loss_mean"]) < RTOL
    if buffer == 1:
        theta, omega = found.buffer
        assert theta == pytest.approx(case["params"]["buf_decay"], abs=1e-6)
        assert omega == pytest.approx(case["params"]["output_scale"], abs=1e-6)
