"""The noise `C^-1 Z` of a local encoder, drawn step by step with the least state its structure
allows ([`LocalCorrelatedNoise`][dpdl.mechanisms.time_correlated.LocalCorrelatedNoise]).

Step t's noise of one agent and coordinate is `y_t = sum_(s <= t) (C^-1)[t, s] z_s` with the seeds
`z_s ~ N(0, sigma^2)` drawn in the same order whatever the stream, so every stream gives the
dense one's noise up to rounding. What is kept between steps, per agent and coordinate
([`plan`][dpdl.mechanisms.noise_streams.plan]):

- `dense`: every seed drawn so far, `T` floats (a `T x n x d` array; the square root, MAFALDA's
  encoders);
- `banded-decoder`: `C^-1` has `p` bands (`(C^-1)[t, s] = 0` for `t - s >= p`: BISR, AntiPGD's
  `z_t - z_(t-1)`, DP-D-SGD's `p = 1`), so `y_t` weighs the last `p` seeds: `p - 1` floats;
- `banded-encoder`: `C` has `p` bands (BSR, BandMF), so forward substitution `y_t = (z_t -
  sum_(1 <= j < p) C[t, t-j] y_(t-j)) / C[t, t]` needs the last `p - 1` outputs: `p - 1` floats;
- `buffer`: `C` is a buffered linear Toeplitz matrix `(theta, omega)` of buffer size `d`
  ([`dpdl.factorization.blt`][dpdl.factorization.blt]), whose inverse is the recurrence `y_t = z_t
  - omega^T s_t`, `s_(t+1) = theta * s_t + y_t`: `d` floats.

The bands are read from the matrices' exact zeros (a computed inverse is banded only where its
zeros are exact, as those of DP-D-SGD and AntiPGD are); a banded inverse known in closed form is
given as the decoder itself.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from dpdl.errors import ConfigError

__all__ = ["STREAM_KINDS", "bandwidth", "plan", "stream"]

#: The kinds of stream, by what they keep (module doc).
STREAM_KINDS = ("dense", "banded-decoder", "banded-encoder", "buffer")


def bandwidth(matrix: np.ndarray) -> int:
    """The bands of a lower-triangular matrix (or stack of them): one more than the largest `t -
    s` with a nonzero entry, exactly."""
    rows, columns = np.nonzero(matrix)[-2:]
    return int((rows - columns).max(initial=0)) + 1


def plan(
    encoder: np.ndarray,
    decoder: np.ndarray,
    buffer: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[str, int]:
    """The stream that keeps the fewest floats per agent and coordinate between steps, and that
    number (module doc): the buffer's `d`, or `p - 1` for the fewer bands of `C^-1` and `C`
    (fewer than T), or the dense `T`; the first of these at a tie."""
    steps = encoder.shape[-1]
    options = [("dense", steps)]
    options += [
        (kind, bands - 1)
        for kind, bands in (
            ("banded-decoder", bandwidth(decoder)),
            ("banded-encoder", bandwidth(encoder)),
        )
        if bands < steps  # else dense: one product a step, not T of them
    ]
    if buffer is not None and len(buffer[0]) < steps:
        options.append(("buffer", len(buffer[0])))
    return min(options, key=lambda option: option[1])


def stream(
    kind: str,
    encoder: np.ndarray,
    decoder: np.ndarray,
    buffer: tuple[np.ndarray, np.ndarray] | None,
    sigma: float,
    n: int,
    rng: np.random.Generator,
    dim: int,
) -> Iterator[np.ndarray]:
    """Step t's noise `(n, dim)` of the stream `kind`
    ([`plan`][dpdl.mechanisms.noise_streams.plan]), for `T` steps; asking for more is a
    [`ConfigError`][dpdl.errors.ConfigError]."""
    steps = encoder.shape[-1]
    seeds = (sigma * rng.standard_normal((n, dim)) for _ in range(steps))
    if kind == "dense":
        yield from _dense(decoder, seeds, n, dim)
    elif kind == "banded-decoder":
        yield from _banded_decoder(decoder, seeds, n, dim)
    elif kind == "banded-encoder":
        yield from _banded_encoder(encoder, seeds, n, dim)
    elif kind == "buffer" and buffer is not None:
        yield from _buffered(buffer, seeds, n, dim)
    else:
        raise ConfigError(f"unknown noise stream {kind!r}; known: {', '.join(STREAM_KINDS)}")
    raise ConfigError(f"the noise was factorized for {steps} steps; the run asked for more")


def _weight(matrix: np.ndarray, t: int, s: int) -> np.ndarray | float:
    """Entry `(t, s)` of a matrix, or of every agent's (`(n, 1)`, to scale its rows)."""
    return matrix[t, s] if matrix.ndim == 2 else matrix[:, t, s, None]


def _dense(
    decoder: np.ndarray, seeds: Iterator[np.ndarray], n: int, dim: int
) -> Iterator[np.ndarray]:
    """Every seed kept (`T n dim` floats): row t of `C^-1` against the seeds so far."""
    kept = np.empty((decoder.shape[-1], n, dim))
    for t, seed in enumerate(seeds):
        kept[t] = seed
        if decoder.ndim == 2:
            yield np.tensordot(decoder[t, : t + 1], kept[: t + 1], axes=1)
        else:  # agent u's own decoder row
            yield np.einsum("us,sud->ud", decoder[:, t, : t + 1], kept[: t + 1])


def _banded_decoder(
    decoder: np.ndarray, seeds: Iterator[np.ndarray], n: int, dim: int
) -> Iterator[np.ndarray]:
    """The last `p - 1` seeds kept, in a ring: `y_t = sum_(j < p) (C^-1)[t, t-j] z_(t-j)`."""
    kept = bandwidth(decoder) - 1
    past = np.empty((kept, n, dim))
    for t, seed in enumerate(seeds):
        noise = _weight(decoder, t, t) * seed
        for j in range(1, min(kept, t) + 1):
            noise = noise + _weight(decoder, t, t - j) * past[(t - j) % kept]
        if kept:
            past[t % kept] = seed
        yield noise


def _banded_encoder(
    encoder: np.ndarray, seeds: Iterator[np.ndarray], n: int, dim: int
) -> Iterator[np.ndarray]:
    """The last `p - 1` outputs kept, in a ring: forward substitution through the bands of
    `C`."""
    kept = bandwidth(encoder) - 1
    past = np.empty((kept, n, dim))
    for t, seed in enumerate(seeds):
        residual = seed
        for j in range(1, min(kept, t) + 1):
            residual = residual - _weight(encoder, t, t - j) * past[(t - j) % kept]
        noise = residual / _weight(encoder, t, t)
        if kept:
            past[t % kept] = noise
        yield noise


def _buffered(
    buffer: tuple[np.ndarray, np.ndarray], seeds: Iterator[np.ndarray], n: int, dim: int
) -> Iterator[np.ndarray]:
    """The BLT's `d` buffers kept (`s`, `d n dim` floats): `y_t = z_t - omega^T s_t`, `s_(t+1) =
    theta * s_t + y_t`."""
    theta, omega = buffer
    state = np.zeros((len(theta), n, dim))
    for seed in seeds:
        noise = seed - np.tensordot(omega, state, axes=1)
        state *= theta[:, None, None]
        state += noise
        yield noise
