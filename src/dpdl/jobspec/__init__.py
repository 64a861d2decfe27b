"""The job spec: what a run is ([`config`][dpdl.jobspec.config], light: the command line reads it),
how an engine steps ([`engine`][dpdl.jobspec.engine]), and the job built from a configuration
([`job`][dpdl.jobspec.job]): graph, mixing matrix, task, calibrated mechanism and privacy report.

It sits above the tasks, mechanisms and graphs and below the simulation, the runtime and the
experiments, which all import it and none of which it imports. This `__init__` imports nothing, so
importing [`dpdl.jobspec.config`][dpdl.jobspec.config] stays light. The samplers (`sampling`) and
one agent's local step (`step`) are here too: the simulation and the runtime take the same step. So
is the job after agents leave for good ([`departure`][dpdl.jobspec.departure]: the design rebuilt on
the remaining graph, both phases accounted together).
"""

#: Version of the numbers a seed produces: the samplers, the noise streams and the engines'
#: arithmetic. Bump it in any change that moves seeded results (a different draw, another order of
#: operations, a changed default), so that cached reproduction runs made before are recomputed
#: (:mod:`dpdl.experiments.cache`) and runtime checkpoints made before are refused
#: (:mod:`dpdl.runtime.checkpoint`) instead of being mixed with new numbers.
#: 2: singular designs (zero-sum noise, LPPA's flow) sample with their null directions exactly zero.
#: 3: the torch engine: the same draws, torch's float64 kernels (matmul, einsum, the logistic loss)
#: in place of numpy's, so results move by rounding only.
#: 4: correlated noise drawn through the principal square root of R (and of each secret's block),
#: the same on every machine, in place of the eigenbasis factor ``V sqrt(w)``: other draws of the
#: same distribution for every design with shared secrets; independent noise draws as before.
#: 5: torch models with convolutions computed agent by agent on a CPU (:mod:`dpdl.tasks.replicas`:
#: the same gradients up to float32 rounding), and the agents' models of an evaluation of more
#: than 200,000 (model, test example) pairs scored on a fixed sample of the test set; a DECOR
#: design without correlation holds no secret, so its seeded draws are LDP's.
#: 6: logistic regression's score of exactly 0 predicts -1 (the all-zero start's accuracy is the
#: share of -1 labels, 0.76 on a9a, where it was 0), and the metric records' steps are integers.
ENGINE_VERSION = 6
