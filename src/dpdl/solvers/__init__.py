"""Solvers of the covariance programs: the Whisper dual (fast, any n) and CVXPY programs (small
n)."""

from dpdl.solvers.whisper_dual import WhisperSolution, solve_whisper

__all__ = ["WhisperSolution", "solve_whisper"]
