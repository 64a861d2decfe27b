"""Search the step size of your own model with dpdl.tune, then see what holds it back.

The model, data and graph of ``examples/own_model.py`` (an MLP on scikit-learn's digits, 12 agents
on an Erdos-Renyi graph, label skew), now at the example level (eps, delta) = (3, 1e-5) per run
against an eavesdropper. ``dpdl.tune`` holds out 20% of every agent's training examples, trains
one run per step size on the rest, keeps the best validation accuracy and refits it on all the
training data, scored on the test set (which the search never reads). The privacy it states is
that of every run released together, not of one run. ``reference=True`` also trains the chosen
configuration without noise, clipped and unclipped: the three test accuracies say whether the
clipping or the noise costs (those two runs are not private: a diagnostic, never to release).
Run it (about a minute)::

    python examples/tune_own_model.py
"""

from __future__ import annotations

import networkx as nx
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn import functional

import dpdl


def main() -> None:
    digits = load_digits()
    inputs = (digits.data / 16.0).astype("float32")
    x_train, x_test, y_train, y_test = train_test_split(
        inputs, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))

    def loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return functional.cross_entropy(outputs, targets, reduction="none")  # per example

    result = dpdl.tune(
        model,
        loss,
        train=(x_train, y_train),
        test=(x_test, y_test),  # read by the refit alone
        graph=nx.gnp_random_graph(12, 0.4, seed=1),
        lr=[0.05, 0.2, 0.5, 2.0],
        validation_fraction=0.2,
        reference=True,
        partition="dirichlet",
        alpha=1.0,
        mechanism="decor",
        eps=3.0,
        delta=1e-5,
        steps=150,
        clip=1.0,
        clip_level="example",
        batch_size=16,
        seed=0,
        progress=False,
    )
    for candidate in result.candidates:
        print(f"lr={candidate.lr:g}: validation accuracy {candidate.metrics[result.metric]:.3f}")
    print(f"chosen lr={result.lr:g}")
    together, one = result.privacy[0], result.privacy_per_run[0]
    print(
        f"privacy of the {result.runs} runs released together: eps={together.epsilon:.3g} "
        f"(one run: eps={one.epsilon:.3g}) at delta={one.delta:g} against the {one.threat}"
    )
    assert result.reference is not None
    for name, value in result.reference.compare("test_accuracy").items():
        print(f"test accuracy, {name}: {value:.3f}")


if __name__ == "__main__":
    main()
