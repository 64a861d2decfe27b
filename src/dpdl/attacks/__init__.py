"""Attacks that measure privacy empirically: membership inference, the sum eavesdropper, gradient inversion."""

from dpdl.attacks.eavesdropper import sum_attack, sum_attack_error
from dpdl.attacks.inversion import Inversion, invert_gradient
from dpdl.attacks.membership import EmpiricalPrivacy, clopper_pearson_upper, membership_lower_bound

__all__ = [
    "EmpiricalPrivacy",
    "Inversion",
    "clopper_pearson_upper",
    "invert_gradient",
    "membership_lower_bound",
    "sum_attack",
    "sum_attack_error",
]
