"""Decentralized learning as a matrix-factorization mechanism (MAFALDA-SGD, Sections 4-6).

Notation, fixed once for the package (as in the paper and jax_privacy's `matrix_factorization`):

- `n` agents, `T` gradient steps. Stacked gradients `G` and models are `(n T) x d` with
  **time-major rows**: row `t n + u` is agent u at step t (the paper's ordering; Remark 9).
- A **linear algorithm** (Definition 4) emits messages `M G + N Z` with `Z ~ N(0, I)`: `M` maps
  gradients to messages, `N` (noise scales included) maps seeds to messages, and every column of `Z`
  has the set of agents who need its seed ([`algorithms`][dpdl.factorization.algorithms]).
- A **trust model** says what the attacker observes and already knows; after removing what it
  knows (Lemma 14) its **knowledge** is `O = A G + B Z` (Definition 5), with an **encoder** `C`
  such that `A = B C` (Theorem 6) when the mechanism protects every agent
  ([`trust`][dpdl.factorization.trust]).
- A **participation scheme** `Pi` says in which steps a record's gradient may change
  ([`participation`][dpdl.factorization.participation]; b-min-separated participation, too many
  patterns to list, in [`min_separation`][dpdl.factorization.min_separation]); the
  **sensitivity** `sens(C; B)` (Definition 7) is the largest Mahalanobis norm of `A (G - G')`
  over it, and the mechanism is `Delta sens`-GDP for a per-row gradient change of at most
  `Delta` (Theorem 8;
  [`generalized_sensitivity`][dpdl.factorization.generalized_sensitivity]).
- **MAFALDA-SGD** picks a local encoder `C = C_local (x) I_n` minimising
  `sens^2 ||L C_local^-1||_F^2` (Lemma 12; [`mafalda`][dpdl.factorization.mafalda]).
"""

from dpdl.factorization.algorithms import (
    LinearAlgorithm,
    antipgd,
    dp_dsgd,
    from_noise,
    mf_dsgd,
    muffliato,
    zip_dl,
)
from dpdl.factorization.generalized_sensitivity import agent_sensitivities, knowledge_epsilon
from dpdl.factorization.min_separation import MinSeparated
from dpdl.factorization.participation import Participation
from dpdl.factorization.trust import (
    LDP,
    PNDP,
    Knowledge,
    Links,
    SecLDP,
    TrustModel,
    attacker_knowledge,
)
from dpdl.factorization.workload import gossip_blocks, gossip_workload

__all__ = [
    "LDP",
    "PNDP",
    "Knowledge",
    "LinearAlgorithm",
    "Links",
    "MinSeparated",
    "Participation",
    "SecLDP",
    "TrustModel",
    "agent_sensitivities",
    "antipgd",
    "attacker_knowledge",
    "dp_dsgd",
    "from_noise",
    "gossip_blocks",
    "gossip_workload",
    "knowledge_epsilon",
    "mf_dsgd",
    "muffliato",
    "zip_dl",
]
