"""The job spec: what a run is (:mod:`~dpdl.jobspec.config`, light: the command line reads it), how an
engine steps (:mod:`~dpdl.jobspec.engine`), and the job built from a configuration
(:mod:`~dpdl.jobspec.job`): graph, mixing matrix, task, calibrated mechanism and privacy report.

It sits above the tasks, mechanisms and graphs and below the simulation, the runtime and the
experiments, which all import it and none of which it imports. This ``__init__`` imports nothing, so
importing :mod:`dpdl.jobspec.config` stays light.
"""
