"""A peer-to-peer runtime: the agents of noisy D-SGD as processes of `torch.distributed` (gloo, or
nccl between GPUs: [`dpdl.runtime.backend`][dpdl.runtime.backend]), exchanging authenticated
messages with their graph neighbours only, with every secret agreed by X25519 key exchange instead
of a trusted party ([`dpdl.keys`][dpdl.keys]).

The names are imported on first use (`dpdl.lazy`): torch is imported by the commands that run
agents, not by whatever imports a runtime submodule.
"""

from dpdl.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "agent": ("run_agent",),
        "launch": ("LocalRun", "init_agent", "run_local"),
        "options": ("AgentOptions",),
    },
)
