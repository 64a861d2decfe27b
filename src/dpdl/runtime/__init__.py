"""A peer-to-peer runtime: the agents of noisy D-SGD as processes of ``torch.distributed`` (gloo),
exchanging authenticated messages with their graph neighbours only, with every secret agreed by
X25519 key exchange instead of a trusted party (:mod:`dpdl.keys`)."""

from dpdl.runtime.agent import AgentOptions, run_agent
from dpdl.runtime.launch import LocalRun, init_agent, run_local

__all__ = ["AgentOptions", "LocalRun", "init_agent", "run_agent", "run_local"]
