"""Time-correlated noise drawn with each strategy's own state: every stream gives the dense `C^-1 Z`
of the same seeds, and keeps only the floats its structure needs (a BLT its d buffers)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpdl.errors import ConfigError
from dpdl.factorization import encoders
from dpdl.factorization.participation import Participation
from dpdl.factorization.strategy import as_strategy
from dpdl.graphs import erdos_renyi, metropolis_hastings
from dpdl.mechanisms.noise_streams import bandwidth
from dpdl.mechanisms.time_correlated import LocalCorrelatedNoise

STEPS, N, DIM, SIGMA = 30, 5, 3, 0.7
PARTICIPATION = Participation.cyclic(STEPS, 5, 6)
WEIGHTS = metropolis_hastings(erdos_renyi(N, 0.6, seed=1))
if hasattr(WEIGHTS, "toarray"):
    WEIGHTS = WEIGHTS.toarray()

#: Each strategy's stream and the floats it keeps per agent and coordinate (b = 6 bands, d = 4).
EXPECTED = {
    "dp_dsgd": ("banded-decoder", 0),
    "antipgd": ("banded-decoder", 1),
    "sqrt": ("dense", STEPS),
    "bsr": ("banded-encoder", 5),
    "bandmf": ("banded-encoder", 5),
    "bisr": ("banded-decoder", 5),
    "blt": ("buffer", 4),
    "mafalda": ("dense", STEPS),
}


def _noise(name: str) -> LocalCorrelatedNoise:
    strategy = as_strategy(getattr(encoders, name)(WEIGHTS, PARTICIPATION))
    return LocalCorrelatedNoise(
        N, strategy.encoder, SIGMA, name, decoder=strategy.decoder, buffer=strategy.buffer
    )


def _dense_reference(encoder: np.ndarray, seed: int) -> np.ndarray:
    """`C^-1 Z` (T, n, dim) from the dense inverse, the seeds `z_t` drawn one step at a time
    from the same generator as the streams."""
    rng = np.random.default_rng(seed)
    seeds = np.stack([SIGMA * rng.standard_normal((N, DIM)) for _ in range(STEPS)])
    inverse = np.linalg.inv(encoder)
    if encoder.ndim == 2:
        return np.einsum("ts,sud->tud", inverse, seeds)
    return np.einsum("uts,sud->tud", inverse, seeds)


def _drawn(noise: LocalCorrelatedNoise, seed: int) -> np.ndarray:
    return np.stack(
        list(itertools.islice(noise.noise_stream(np.random.default_rng(seed), DIM), STEPS))
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_stream_is_the_dense_noise_with_its_own_state(name: str) -> None:
    """Each strategy's noise, drawn with its own state (its stream and memory as stated), equals
    `C^-1 Z` from the dense inverse and the same seeds to 1e-10; `describe` states the memory."""
    noise = _noise(name)
    assert (noise.stream_kind, noise.memory_per_step) == EXPECTED[name]
    assert np.abs(_drawn(noise, 5) - _dense_reference(noise.encoder, 5)).max() < 1e-10
    assert noise.describe()["memory_per_step"] == EXPECTED[name][1]
    assert noise.describe()["noise_stream"] == EXPECTED[name][0]


@pytest.mark.parametrize(
    ("name", "kind"), [("bsr", "banded-encoder"), ("antipgd", "banded-decoder")]
)
def test_per_agent_banded_encoders_draw_each_agents_noise(name: str, kind: str) -> None:
    """A stack of one encoder per agent (`n x T x T`, each agent's own scale, a power of two so
    that AntiPGD's computed inverses are exactly banded, and for the banded `C` its own second
    band) is drawn by the banded streams too, equal to every agent's dense
    `C_u^-1 Z` to 1e-10."""
    base = np.asarray(as_strategy(getattr(encoders, name)(WEIGHTS, PARTICIPATION)).encoder)
    stack = np.stack([base * 2.0**u for u in range(N)])  # exact inverses: banded to the bit
    if kind == "banded-encoder":
        lag = np.subtract.outer(np.arange(STEPS), np.arange(STEPS))
        stack[:, lag == 1] *= np.linspace(0.5, 1.5, N)[:, None]
    noise = LocalCorrelatedNoise(N, stack, SIGMA)
    banded = stack if kind == "banded-encoder" else noise.decoder
    assert noise.stream_kind == kind
    assert noise.memory_per_step == bandwidth(banded) - 1 == (5 if name == "bsr" else 1)
    assert np.abs(_drawn(noise, 6) - _dense_reference(stack, 6)).max() < 1e-10


def _kept_arrays(stream) -> list[np.ndarray]:
    """The arrays of shape `(..., n, dim)` the generators of a stream hold between steps."""
    arrays = []
    while stream is not None:
        arrays += [
            value
            for value in stream.gi_frame.f_locals.values()
            if isinstance(value, np.ndarray) and value.shape[-2:] == (N, DIM)
        ]
        stream = stream.gi_yieldfrom
    return arrays


@pytest.mark.parametrize("buffer", [1, 2, 4])
def test_a_blt_run_keeps_its_buffers_only(buffer: int) -> None:
    """A BLT of buffer size d keeps `d n dim` floats between steps (its state `s`), whatever the
    step, besides the step's own seed and noise; the dense square root keeps `T n dim`."""
    strategy = as_strategy(encoders.blt(WEIGHTS, PARTICIPATION, buffer=buffer))
    noise = LocalCorrelatedNoise(N, strategy.encoder, SIGMA, buffer=strategy.buffer)
    stream = noise.noise_stream(np.random.default_rng(0), DIM)
    for _ in range(STEPS):
        next(stream)
        kept = _kept_arrays(stream)
        assert sum(array.size for array in kept) <= (buffer + 2) * N * DIM
        assert any(array.shape == (buffer, N, DIM) for array in kept)
    dense = _noise("sqrt").noise_stream(np.random.default_rng(0), DIM)
    next(dense)
    assert max(array.size for array in _kept_arrays(dense)) == STEPS * N * DIM


@pytest.mark.parametrize("name", ["dp_dsgd", "bsr", "bisr", "blt", "sqrt"])
def test_every_stream_stops_at_the_factorized_steps(name: str) -> None:
    """Asking any stream for a step beyond the T it was factorized for is a ConfigError."""
    stream = _noise(name).noise_stream(np.random.default_rng(0), 1)
    for _ in range(STEPS):
        next(stream)
    with pytest.raises(ConfigError, match=f"factorized for {STEPS} steps"):
        next(stream)


def test_a_given_decoder_or_buffer_must_be_the_encoders() -> None:
    """A decoder that is not the encoder's inverse, or a buffer whose Toeplitz matrix is not the
    encoder, is refused."""
    strategy = as_strategy(encoders.bisr(WEIGHTS, PARTICIPATION))
    with pytest.raises(ConfigError, match="not the encoder's inverse"):
        LocalCorrelatedNoise(N, strategy.encoder, SIGMA, decoder=strategy.decoder * 1.01)
    blt = as_strategy(encoders.blt(WEIGHTS, PARTICIPATION))
    theta, omega = blt.buffer
    with pytest.raises(ConfigError, match="does not give the encoder"):
        LocalCorrelatedNoise(N, blt.encoder, SIGMA, buffer=(theta, omega * 1.01))
