"""The time-correlated strategies (square root, banded square root, BandMF, BISR, BLT) as every
agent's local encoder in the MAFALDA path, under each trust model dpdl has (MAFALDA-SGD,
Definition 5, Theorem 6 and Theorem 8): the attacker's knowledge factorizes, LDP's sensitivity is
the encoder's own, and seeing fewer messages (PNDP) or knowing one's own seeds (SecLDP) never
gives an attacker more than the eavesdropper gets."""

from __future__ import annotations

import numpy as np
import pytest

from dpdl.factorization import (
    LDP,
    PNDP,
    Participation,
    SecLDP,
    agent_sensitivities,
    attacker_knowledge,
    knowledge_epsilon,
    mf_dsgd,
)
from dpdl.factorization.algorithms import local_encoder
from dpdl.factorization.blt import blt_strategy
from dpdl.factorization.mafalda import local_sensitivity, noise_multiplier, utility_gram
from dpdl.factorization.toeplitz import bandmf_encoder, bisr_strategy, bsr_encoder, sqrt_strategy
from dpdl.graphs import erdos_renyi, metropolis_hastings

GRAPH = erdos_renyi(6, 0.5, seed=3)
WEIGHTS = metropolis_hastings(GRAPH)
STEPS = 8
CYCLIC = Participation.cyclic(STEPS, 2, 4)
UTILITY = utility_gram(WEIGHTS, STEPS)
STRATEGIES = {
    "sqrt": lambda: sqrt_strategy(CYCLIC).encoder,
    "bsr": lambda: bsr_encoder(CYCLIC, 3),
    "bandmf": lambda: bandmf_encoder(UTILITY, CYCLIC, 3),
    "bisr": lambda: bisr_strategy(CYCLIC, 2).encoder,
    "blt": lambda: blt_strategy(UTILITY, CYCLIC, 2).encoder,
}
PARTICIPATIONS = [CYCLIC, Participation.every_step(STEPS)]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_strategy_factorizes_under_every_trust_model(name: str) -> None:
    """Theorem 6 for each strategy and trust model: some C has A = B C, and the attackers'
    own gradients are removed (Lemma 14)."""
    algorithm = mf_dsgd(WEIGHTS, STEPS, local_encoder(STRATEGIES[name](), 6))
    for trust in (LDP(), SecLDP((0,)), SecLDP((1, 4)), PNDP((0,)), PNDP((2, 5))):
        knowledge = attacker_knowledge(algorithm, trust)
        assert knowledge.encoder is not None, trust
        np.testing.assert_allclose(
            knowledge.decoder @ knowledge.encoder, knowledge.workload, atol=1e-9
        )
        assert knowledge.protected.sum() == 6 - len(trust.attackers)


@pytest.mark.parametrize("participation", PARTICIPATIONS, ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_trust_models_order_the_sensitivities(name: str, participation: Participation) -> None:
    """LDP's sensitivity is the local encoder's (B square and invertible); a curious agent who
    also knows its own seeds and gradients (SecLDP) learns nothing more about another agent,
    whose noise is drawn from that agent's own seed alone; one who sees only the messages sent to
    it (PNDP) learns at most as much, and strictly less about someone it does not hear from
    directly."""
    local = STRATEGIES[name]()
    algorithm = mf_dsgd(WEIGHTS, STEPS, local_encoder(local, 6))
    own = local_sensitivity(local, participation)
    ldp = agent_sensitivities(attacker_knowledge(algorithm, LDP()), participation)
    np.testing.assert_allclose(ldp, own, rtol=1e-7)
    for attacker in range(6):
        others = np.arange(6) != attacker
        secldp = agent_sensitivities(
            attacker_knowledge(algorithm, SecLDP((attacker,))), participation
        )
        np.testing.assert_allclose(secldp[others], own, rtol=1e-7)
        pndp = agent_sensitivities(attacker_knowledge(algorithm, PNDP((attacker,))), participation)
        assert np.isnan(pndp[attacker])
        assert (pndp[others] <= own * (1 + 1e-9)).all()
        assert (pndp[others] > 0).all()
    assert min(
        np.nanmin(agent_sensitivities(attacker_knowledge(algorithm, PNDP((a,))), participation))
        for a in range(6)
    ) < own * (1 - 1e-3)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_calibrated_noise_meets_the_budget_under_every_trust_model(name: str) -> None:
    """sigma from the encoder's sensitivity gives at most the target eps whoever attacks
    (Theorem 8 on each trust model's knowledge, noise scaled into B)."""
    local = STRATEGIES[name]()
    row, eps, delta = 0.25, 2.0, 1e-5
    sigma = noise_multiplier(local, CYCLIC, row, eps, delta)
    algorithm = mf_dsgd(WEIGHTS, STEPS, local_encoder(local, 6), sigma=sigma)
    for trust in (LDP(), SecLDP((2,)), PNDP((3,))):
        found, _ = knowledge_epsilon(attacker_knowledge(algorithm, trust), CYCLIC, row, delta)
        assert found <= eps * (1 + 1e-9), trust
    ldp, _ = knowledge_epsilon(attacker_knowledge(algorithm, LDP()), CYCLIC, row, delta)
    assert ldp == pytest.approx(eps, rel=1e-6)
