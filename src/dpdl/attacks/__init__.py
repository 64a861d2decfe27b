"""Attacks that measure privacy empirically: membership inference, the sum eavesdropper."""

from dpdl.attacks.eavesdropper import sum_attack, sum_attack_error
from dpdl.attacks.membership import EmpiricalPrivacy, clopper_pearson_upper, membership_lower_bound

__all__ = ["EmpiricalPrivacy", "clopper_pearson_upper", "membership_lower_bound", "sum_attack", "sum_attack_error"]
