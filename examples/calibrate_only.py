"""Only the noise: a calibrated correlated-noise design, used in a training loop of your own.

dpdl designs and calibrates the noise; the loop below is yours (plain numpy): 16 agents on a ring
train a softmax regression on scikit-learn's digits by D-SGD. Each step every agent draws a
Poisson batch (each of its examples with probability q), clips every example's gradient at C,
sums them and divides by the expected batch size B, adds its row of DECOR's noise, takes a local
step and averages with its neighbours through the mixing matrix W. ``dpdl.design_noise`` sized
the noise so that the whole run is (eps, delta) = (8, 1e-5)-DP at the example level against an
eavesdropper (``ExampleLevel(C, B, q)``: per-example sensitivity C / B, Poisson sampling at rate
q), and reports the epsilon against the other threats too. ``mechanism.sample(rng, d)`` draws all
agents' noise at once; an agent holding only its own seeds would call ``mechanism.agent_noise``.
Run it (about 10 s)::

    python examples/calibrate_only.py
"""

from __future__ import annotations

import networkx as nx
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import dpdl
from dpdl.accounting import ExampleLevel

AGENTS, STEPS, CLIP, BATCH, LR = 16, 300, 1.0, 16, 0.5


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def main() -> None:
    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data / 16.0, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    x_train = np.hstack([x_train, np.ones((len(x_train), 1))])  # a bias feature
    x_test = np.hstack([x_test, np.ones((len(x_test), 1))])
    rng = np.random.default_rng(0)
    parts = np.array_split(rng.permutation(len(x_train)), AGENTS)
    rate = BATCH / min(len(part) for part in parts)  # every agent samples at most at this rate

    mechanism, weights, reports = dpdl.design_noise(
        nx.cycle_graph(AGENTS),
        "decor",
        eps=8.0,
        delta=1e-5,
        steps=STEPS,
        neighbouring=ExampleLevel(CLIP, BATCH, rate),
        threats=["central"],
    )
    for report in reports:
        print(f"eps={report.epsilon:.4g} at delta={report.delta:g} against {report.threat}")

    dim = x_train.shape[1] * 10
    params = np.zeros((AGENTS, dim))
    for _ in range(STEPS):
        grads = np.zeros((AGENTS, dim))
        for agent, part in enumerate(parts):
            batch = part[rng.random(len(part)) < rate]  # Poisson sampling
            if len(batch) == 0:
                continue
            x, y = x_train[batch], y_train[batch]
            probs = softmax(x @ params[agent].reshape(-1, 10))
            probs[np.arange(len(y)), y] -= 1.0  # d loss / d logits, per example
            per_example = (x[:, :, None] * probs[:, None, :]).reshape(len(batch), -1)
            norms = np.linalg.norm(per_example, axis=1, keepdims=True)
            clipped = per_example * np.minimum(1.0, CLIP / np.maximum(norms, 1e-12))
            grads[agent] = clipped.sum(axis=0) / BATCH
        noisy = grads + mechanism.sample(rng, dim)
        params = weights @ (params - LR * noisy)  # local step, then one gossip round

    average = params.mean(axis=0).reshape(-1, 10)
    accuracy = (np.argmax(x_test @ average, axis=1) == y_test).mean()
    print(f"the agents' average model: test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
