"""Data sets: the copies bundled with the package and the ones read from ``shared/data``."""
