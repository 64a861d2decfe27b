"""Attacks that measure privacy empirically: membership inference, the sum eavesdropper, gradient
inversion, gradient reconstruction beyond the neighbourhood.

The names are imported on first use (`dpdl.lazy`): the membership test needs numpy alone,
gradient inversion needs torch.
"""

from dpdl.lazy import lazy_exports

__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "eavesdropper": ("sum_attack", "sum_attack_error"),
        "inversion": ("Inversion", "invert_gradient"),
        "reconstruction": (
            "AgentErrors",
            "Reconstruction",
            "agent_errors",
            "constant_gradients",
            "reconstruct",
        ),
        "membership": (
            "EmpiricalPrivacy",
            "clopper_pearson_upper",
            "gaussian_fit_lower_bound",
            "membership_lower_bound",
        ),
    },
)
