"""Tests of dpdl.tasks.partition: how examples are split across agents."""

from __future__ import annotations

import numpy as np
import pytest

from dpdl.errors import ConfigError
from dpdl.tasks.partition import dirichlet, iid, labels_per_agent, quantity_skew

N_CLASSES = 10


def make_labels(n_examples: int = 3000, seed: int = 123) -> np.ndarray:
    """Imbalanced labels over N_CLASSES classes (class c has weight c + 1), in shuffled order."""
    weights = np.arange(1, N_CLASSES + 1, dtype=float)
    rng = np.random.default_rng(seed)
    return rng.choice(N_CLASSES, size=n_examples, p=weights / weights.sum())


LABELS = make_labels()


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# Each partitioner as a function of (n_agents, seed) on the same data set of len(LABELS) examples.
PARTITIONERS = {
    "iid": lambda n, s: iid(len(LABELS), n, rng(s)),
    "dirichlet-0.5": lambda n, s: dirichlet(LABELS, n, 0.5, rng(s)),
    "dirichlet-10": lambda n, s: dirichlet(LABELS, n, 10.0, rng(s)),
    "quantity-skew": lambda n, s: quantity_skew(len(LABELS), n, 1.0, rng(s)),
    "labels-per-agent-2": lambda n, s: labels_per_agent(LABELS, n, 2, rng(s)),
    "labels-per-agent-1": lambda n, s: labels_per_agent(LABELS, n, 1, rng(s)),
}


def assert_exact_cover(parts: list[np.ndarray], n_examples: int, n_agents: int) -> None:
    assert len(parts) == n_agents
    assert all(len(part) > 0 for part in parts), "an agent is empty"
    assert all(np.issubdtype(part.dtype, np.integer) for part in parts)
    everything = np.concatenate(parts)
    # disjoint and covering: every index 0..n-1 exactly once
    assert len(everything) == n_examples
    np.testing.assert_array_equal(np.sort(everything), np.arange(n_examples))


@pytest.mark.parametrize("name", PARTITIONERS)
@pytest.mark.parametrize(
    "n_agents", [10, 13, 20]
)  # labels-per-agent needs n_agents * k >= 10 classes
def test_parts_are_disjoint_cover_and_non_empty(name, n_agents):
    parts = PARTITIONERS[name](n_agents, 0)
    assert_exact_cover(parts, len(LABELS), n_agents)


@pytest.mark.parametrize("name", ["iid", "dirichlet-0.5", "quantity-skew"])
def test_single_agent_gets_everything(name):
    (part,) = PARTITIONERS[name](1, 0)
    np.testing.assert_array_equal(part, np.arange(len(LABELS)))


@pytest.mark.parametrize("name", PARTITIONERS)
def test_deterministic_for_a_seed_and_varies_with_it(name):
    first = PARTITIONERS[name](12, 5)
    again = PARTITIONERS[name](12, 5)
    other = PARTITIONERS[name](12, 6)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize(("n_examples", "n_agents"), [(100, 7), (10, 10), (3001, 20), (5, 1)])
def test_iid_sizes_differ_by_at_most_one(n_examples, n_agents):
    parts = iid(n_examples, n_agents, rng(1))
    assert_exact_cover(parts, n_examples, n_agents)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == n_examples


def test_iid_is_shuffled_not_contiguous():
    parts = iid(1000, 4, rng(2))
    # a random quarter of 0..999 spans almost the whole range; a contiguous block spans 250
    assert all(part.max() - part.min() > 900 for part in parts)


def test_labels_per_agent_holds_at_most_k_classes():
    for k in (1, 2, 3):
        parts = labels_per_agent(LABELS, 12, k, rng(3))
        assert_exact_cover(parts, len(LABELS), 12)
        for part in parts:
            held = np.unique(LABELS[part])
            assert 1 <= len(held) <= k
        # enough examples per class: every agent gets exactly k classes
        assert all(len(np.unique(LABELS[part])) == k for part in parts)


def test_labels_per_agent_splits_each_class_evenly_among_its_holders():
    parts = labels_per_agent(LABELS, 15, 2, rng(4))
    for c in range(N_CLASSES):
        counts = [int((LABELS[part] == c).sum()) for part in parts]
        holders = [count for count in counts if count > 0]
        assert sum(holders) == int((c == LABELS).sum())
        assert max(holders) - min(holders) <= 1


def label_distribution(labels: np.ndarray) -> np.ndarray:
    return np.bincount(labels, minlength=N_CLASSES) / len(labels)


def mean_total_variation(parts: list[np.ndarray], labels: np.ndarray) -> float:
    """Mean over agents of TV(agent's label distribution, global label distribution)."""
    overall = label_distribution(labels)
    return float(
        np.mean([0.5 * np.abs(label_distribution(labels[p]) - overall).sum() for p in parts])
    )


def test_dirichlet_alpha_controls_label_skew():
    n_agents = 10
    flat = dirichlet(LABELS, n_agents, 1e4, rng(5))
    skewed = dirichlet(LABELS, n_agents, 0.1, rng(5))
    tv_flat = mean_total_variation(flat, LABELS)
    tv_skewed = mean_total_variation(skewed, LABELS)
    # alpha = 1e4: proportions ~ 1/n for every class, so each agent mirrors the global mix
    assert tv_flat < 0.03
    overall = label_distribution(LABELS)
    for part in flat:
        np.testing.assert_allclose(label_distribution(LABELS[part]), overall, atol=0.03)
        assert abs(len(part) - len(LABELS) / n_agents) < 0.05 * len(LABELS) / n_agents
    # alpha = 0.1: most of each class lands on one or two agents
    assert tv_skewed > 0.4
    assert tv_skewed > 10 * tv_flat
    # iid sits with the flat one
    assert mean_total_variation(iid(len(LABELS), n_agents, rng(5)), LABELS) < 0.15


def test_dirichlet_respects_min_size():
    parts = dirichlet(LABELS, 30, 0.1, rng(6), min_size=5)
    assert min(len(p) for p in parts) >= 5
    assert_exact_cover(parts, len(LABELS), 30)


def test_quantity_skew_beta_controls_size_spread():
    def size_cv(beta: float) -> float:
        sizes = np.array([len(p) for p in quantity_skew(len(LABELS), 10, beta, rng(7))])
        return float(sizes.std() / sizes.mean())

    assert size_cv(1e4) < 0.05  # near-equal sizes
    assert size_cv(0.3) > 0.5  # Dir(0.3) proportions are very uneven
    # labels stay iid: the biggest agent's label mix is close to the global one
    parts = quantity_skew(len(LABELS), 10, 0.3, rng(7))
    biggest = max(parts, key=len)
    np.testing.assert_allclose(
        label_distribution(LABELS[biggest]), label_distribution(LABELS), atol=0.03
    )


# --------------------------------------------------------------------------- invalid arguments


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("nan"), float("inf")])
def test_dirichlet_invalid_alpha(alpha):
    with pytest.raises(ConfigError, match="alpha"):
        dirichlet(LABELS, 5, alpha, rng())


@pytest.mark.parametrize("beta", [0.0, -2.0, float("nan")])
def test_quantity_skew_invalid_beta(beta):
    with pytest.raises(ConfigError, match="beta"):
        quantity_skew(100, 5, beta, rng())


@pytest.mark.parametrize("k", [0, N_CLASSES + 1])
def test_labels_per_agent_invalid_k(k):
    with pytest.raises(ConfigError):
        labels_per_agent(LABELS, 5, k, rng())


def test_labels_per_agent_cannot_cover_all_classes():
    with pytest.raises(ConfigError):
        labels_per_agent(LABELS, 3, 2, rng())  # 3 agents x 2 labels < 10 classes


def test_more_agents_than_examples():
    small = np.array([0, 1, 0, 1, 1])
    with pytest.raises(ConfigError):
        iid(5, 6, rng())
    with pytest.raises(ConfigError):
        dirichlet(small, 6, 1.0, rng())
    with pytest.raises(ConfigError):
        dirichlet(small, 3, 1.0, rng())  # 3 agents x min_size 2 > 5 examples
    with pytest.raises(ConfigError):
        quantity_skew(5, 6, 1.0, rng())
    with pytest.raises(ConfigError):
        labels_per_agent(small, 6, 1, rng())  # some agent must be left without examples


@pytest.mark.parametrize("n_agents", [0, -1])
def test_no_agents(n_agents):
    with pytest.raises(ConfigError):
        iid(10, n_agents, rng())
    with pytest.raises(ConfigError):
        dirichlet(LABELS, n_agents, 1.0, rng())
    with pytest.raises(ConfigError):
        quantity_skew(10, n_agents, 1.0, rng())
