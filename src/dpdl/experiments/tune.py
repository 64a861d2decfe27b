"""A step-size search for your own model, and noise-free reference runs.

[`tune`][dpdl.experiments.tune.tune] holds out a validation split of the *training* data (each
agent holds out a fraction of its own examples), runs [`fit`][dpdl.experiments.fit.fit] once per
candidate step size on the rest, keeps the step size whose final validation metric is best, and
refits it on the full training data, scored on the test set, which the search never reads.

Every candidate run trains on the private data, so the chosen step size and the final model,
released together, spend the composition of all the runs
([`compose_runs`][dpdl.accounting.accountant.compose_runs]): the result states that guarantee per
threat beside the one of a single run. Each run draws its batches and noise from a seed of its
own, as composition requires.

[`diagnose`][dpdl.experiments.tune.diagnose] (and `tune(..., reference=True)`) runs a
configuration again without noise, clipped and unclipped: three numbers that tell whether the
clipping threshold, the noise (the budget) or the step size and length of the run hold a private
result back. The reference runs use the private data without protection (eps = inf): a diagnostic,
never to be released.
"""

from __future__ import annotations

import copy
import inspect
import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import numpy as np
import torch
from torch import nn

from dpdl.accounting import AgentLevel, ExampleLevel, PrivacyReport
from dpdl.accounting.accountant import compose_runs
from dpdl.errors import ConfigError
from dpdl.experiments.fit import (
    Data,
    FitResult,
    GraphLike,
    Partition,
    fit,
    graph_and_weights,
    split_examples,
)
from dpdl.experiments.fit_checks import (
    data_arrays,
    probe,
    require_model,
    require_options,
    require_seed,
    require_targets,
)
from dpdl.experiments.sweeps.tuning import cost
from dpdl.jobspec.engine import poisson_rates
from dpdl.seeding import purpose_rng, purpose_seed
from dpdl.tasks.torch_model import Loss

__all__ = [
    "FORWARDED",
    "METRICS",
    "NO_CLIP",
    "Candidate",
    "Diagnosis",
    "TuneResult",
    "diagnose",
    "tune",
]

logger = logging.getLogger(__name__)

#: The options of [`fit`][dpdl.experiments.fit.fit] that `tune` passes on to every run unchanged.
FORWARDED = (
    "mechanism", "eps", "delta", "steps", "schedule", "clip", "clip_level", "batch_size",
    "calibration", "design", "threats", "l2", "classification", "eval_every", "progress",
    "device", "threads", "strategy",
)  # fmt: skip
#: Validation metrics the search can rank by, and whether larger is better.
METRICS = {
    "accuracy": True,
    "loss": False,
    "accuracy_average_model": True,
    "loss_average_model": False,
}
#: The clipping threshold of the unclipped reference run: no finite gradient's norm in float32
#: (at most 3.4e38) reaches it, so every gradient's scale `min(1, C / ||g||)` is exactly 1.
NO_CLIP = 1e300

_FIT = inspect.signature(fit).parameters


def _default(option: str, options: dict[str, Any]) -> Any:
    """`options[option]`, or `fit`'s default for it."""
    return options.get(option, _FIT[option].default)


@dataclass(frozen=True)
class Candidate:
    """One step size of the search: its run's seed, its final metrics on the validation split
    (`validation_loss`, `validation_accuracy`, ...: `fit`'s `test_*` metrics of that run,
    renamed), its history (the same renaming) and the privacy of that one run."""

    lr: float
    seed: int
    metrics: dict[str, float]
    history: list[dict[str, float]]
    privacy: list[PrivacyReport]


@dataclass
class Diagnosis:
    """A configuration run three times on the same data, batches and seed: `private` (the noise
    asked for), `clipped` (no noise, the same clipping) and `unclipped` (no noise, no clipping).

    The two reference runs use the private data without protection: their privacy reports say
    eps = inf. They are a diagnostic for the one who holds the data, never to be released.
    Reading the three numbers: a poor `unclipped` points at the step size, the number of steps or
    the model; a gap from `unclipped` to `clipped` at the clipping threshold; a gap from
    `clipped` to `private` at the noise, so at the budget (or the mechanism)."""

    private: FitResult
    clipped: FitResult
    unclipped: FitResult

    def compare(self, metric: str = "test_accuracy") -> dict[str, float]:
        """The final `metric` of the three runs, from the noise-free unclipped one to the
        private one."""
        runs = {
            "noise-free, unclipped": self.unclipped,
            "noise-free, clipped": self.clipped,
            "private": self.private,
        }
        if any(metric not in run.final_metrics for run in runs.values()):
            known = ", ".join(k for k in self.private.final_metrics if k != "step")
            raise ConfigError(f"no metric {metric!r} in the runs; known: {known}")
        return {name: float(run.final_metrics[metric]) for name, run in runs.items()}

    def lines(self, metric: str = "test_accuracy") -> list[str]:
        """The comparison as text, with the warning that goes with the reference runs."""
        numbers_ = " | ".join(f"{k} {v:.4g}" for k, v in self.compare(metric).items())
        return [
            f"{metric}: {numbers_}",
            "the noise-free reference runs are not private (eps = inf): a diagnostic, do not "
            "release them or anything computed from them",
        ]


@dataclass
class TuneResult:
    """What [`tune`][dpdl.experiments.tune.tune] returns.

    - `candidates`: every step size searched, in the order given, with its validation metrics;
    - `lr`: the one chosen (the best `metric`, `validation_<name>`, by `goal`; a diverged run is
      the worst; the first on a tie);
    - `final`: the chosen step size refitted on the full training data and scored on the test set
      (`refit=True`), or the chosen search run itself (`refit=False`: its `test_*` metrics are
      then on the validation split);
    - `privacy`: per threat, the guarantee of releasing the choice and the final model, the
      composition of *every* run ([`compose_runs`][dpdl.accounting.accountant.compose_runs]):
      this is the budget the search spent, not `privacy_per_run`, the guarantee of one run;
    - `validation_size`: the examples held out; `reference`: the noise-free runs of the chosen
      configuration ([`Diagnosis`][dpdl.experiments.tune.Diagnosis]), where asked for.
    """

    candidates: list[Candidate]
    lr: float
    metric: str
    goal: str
    final: FitResult
    refit: bool
    privacy: list[PrivacyReport]
    validation_size: int
    reference: Diagnosis | None = None

    @property
    def runs(self) -> int:
        """The private runs the search made (the candidates, and the refit where made)."""
        return len(self.candidates) + int(self.refit)

    @property
    def privacy_per_run(self) -> list[PrivacyReport]:
        """The final run's own guarantee, per threat: what one run spends, not the search."""
        return self.final.privacy

    def lines(self) -> list[str]:
        """The search, the choice and the privacy as text (the library logs; print these)."""
        text = [
            f"lr={c.lr:g}: {self.metric}={c.metrics.get(self.metric, math.nan):.4g}"
            for c in self.candidates
        ]
        text.append(f"chosen: lr={self.lr:g} ({self.goal} {self.metric})")
        for together, one in zip(self.privacy, self.privacy_per_run, strict=True):
            text.append(f"privacy of the {self.runs} runs released together: {together}")
            text.append(f"  (one run alone: eps={one.epsilon:.4g})")
        if self.reference is not None:
            classification = "test_accuracy" in self.final.final_metrics
            text += self.reference.lines("test_accuracy" if classification else "test_loss")
        return text

    def as_dict(self) -> dict[str, Any]:
        """Plain data (for JSON): candidates, choice, both guarantees, the final run's."""
        return {
            "candidates": [
                {
                    "lr": c.lr,
                    "seed": c.seed,
                    **c.metrics,
                    "privacy": [r.as_dict() for r in c.privacy],
                }
                for c in self.candidates
            ],
            "lr": self.lr,
            "metric": self.metric,
            "goal": self.goal,
            "refit": self.refit,
            "validation_size": self.validation_size,
            "privacy_released_together": [r.as_dict() for r in self.privacy],
            "privacy_per_run": [r.as_dict() for r in self.privacy_per_run],
            "final": self.final.as_dict(),
            **(
                {"reference": self.reference.compare(self._score_key())}
                if self.reference is not None
                else {}
            ),
        }

    def _score_key(self) -> str:
        return "test_" + self.metric.removeprefix("validation_")


def _require_lrs(lr: Any) -> list[float]:
    if isinstance(lr, (str, bytes)) or not isinstance(lr, Sequence):
        raise ConfigError(f"lr: give a list of step sizes to search, got {lr!r}")
    if not lr:
        raise ConfigError("lr: the list of step sizes to search is empty")
    for value in lr:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ConfigError(f"lr: every step size must be a number, got {value!r}")
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"lr: every step size must be finite and > 0, got {value}")
    values = [float(value) for value in lr]
    if len(set(values)) != len(values):
        repeated = sorted({v for v in values if values.count(v) > 1})
        raise ConfigError(f"lr: step sizes given twice: {', '.join(f'{v:g}' for v in repeated)}")
    return values


def _require_options(options: dict[str, Any], allowed: Sequence[str], what: str) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(
            f"{what}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed))}"
        )


def _require_test_form(test: Data | None, refit: bool) -> None:
    """The test set's form, without reading a single example (the search must not)."""
    if test is None:
        if refit:
            raise ConfigError("test: the refit of the chosen step size needs a test set")
        return
    if isinstance(test, (tuple, list)):
        if len(test) != 2:
            raise ConfigError(f"test: expected (inputs, targets), got a sequence of {len(test)}")
    elif not (isinstance(test, torch.utils.data.Dataset) and hasattr(test, "__len__")):
        raise ConfigError(
            f"test: expected (inputs, targets) arrays or a map-style torch Dataset, got "
            f"{type(test).__name__}"
        )


def _require_own_model(
    model: nn.Module,
    loss: Loss,
    train: tuple[np.ndarray, np.ndarray],
    validation: Data | None,
    options: dict[str, Any],
) -> None:
    """The checks `fit` makes of its model, loss, data and options
    ([`dpdl.experiments.fit_checks`][dpdl.experiments.fit_checks]), made once before the search
    on the training data and `validation`. The test set is not read before the refit (which
    checks it before it trains): the search must not read it."""
    classification = _default("classification", options)
    require_options(_default("l2", options), classification, _default("progress", options))
    require_model(model, _default("device", options), _default("strategy", options))
    data = {"train": train}
    if validation is not None:
        data["validation"] = data_arrays(validation, "validation")
    for what, (_, targets) in data.items():
        require_targets(targets, what, classification)
    example = _default("clip_level", options) == "example"
    probe(
        model, loss, data, classification=classification, strategy=_default("strategy", options),
        example_clip=_default("clip", options) if example else None,
    )  # fmt: skip


def _metric(metric: str | None, classification: bool) -> tuple[str, str]:
    """The validation metric's name and goal (`"max"` or `"min"`)."""
    name = metric if metric is not None else ("accuracy" if classification else "loss")
    if name not in METRICS:
        raise ConfigError(f"metric: unknown {name!r}; known: {', '.join(METRICS)}")
    if name.startswith("accuracy") and not classification:
        raise ConfigError(f"metric: {name!r} needs classification=True")
    return f"validation_{name}", "max" if METRICS[name] else "min"


def _hold_out(
    parts: list[np.ndarray], fraction: float, seed: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Each agent's examples kept for the search, and the validation examples: every agent holds
    out `floor(fraction x its examples)` of its own, drawn from `seed` (so it keeps at least
    one)."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise ConfigError(f"validation_fraction: expected a number, got {fraction!r}")
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"validation_fraction must be in (0, 1), got {fraction}")
    rng = purpose_rng(seed, "validation")
    kept, held = [], []
    for part in parts:
        shuffled = rng.permutation(part)
        count = math.floor(fraction * len(part))
        held.append(shuffled[:count])
        kept.append(np.sort(shuffled[count:]))
    validation = np.sort(np.concatenate(held))
    if len(validation) == 0:
        raise ConfigError(
            f"validation_fraction {fraction} holds out no example (every agent holds out "
            f"floor(fraction x its examples); the largest agent holds {max(map(len, parts))})"
        )
    return kept, validation


def _relation(
    options: dict[str, Any], sizes: Sequence[int], what: str
) -> AgentLevel | ExampleLevel:
    """The neighbouring relation `fit` accounts a run on agents of `sizes` under."""
    clip = _default("clip", options)
    if _default("clip_level", options) != "example":
        return AgentLevel(clip)
    batch = _default("batch_size", options)
    try:
        rate = float(poisson_rates(np.asarray(sizes), batch).max())
    except ConfigError as error:
        raise ConfigError(f"{what}: {error}") from None
    return ExampleLevel(clip, batch, rate)


def _compose(
    runs: Sequence[tuple[list[PrivacyReport], AgentLevel | ExampleLevel]],
) -> list[PrivacyReport]:
    """Per threat, the guarantee of releasing every run's result together.

    The runs compose like one run of all their steps
    ([`compose_runs`][dpdl.accounting.accountant.compose_runs]). At the example level the search
    (on fewer examples per agent) samples its batches at a larger Poisson rate than the refit:
    every run is then accounted at the largest rate, an upper bound (a run at rate q is a
    subsampling at q / q' of one at q' > q, so it is no less private)."""
    relations = [relation for _, relation in runs]
    worst = max(relations, key=lambda r: r.sampling_rate if isinstance(r, ExampleLevel) else 0.0)
    composed = []
    for k in range(len(runs[0][0])):
        reports = [reports[k] for reports, _ in runs]
        if len({r.neighbouring for r in reports}) > 1:
            reports = [replace(r, neighbouring=str(worst)) for r in reports]
        composed.append(compose_runs(reports, worst))
    return composed


def _renamed(record: dict[str, float]) -> dict[str, float]:
    """A record of a search run, its `test_*` metrics (on the validation split) renamed."""
    return {
        ("validation_" + key.removeprefix("test_") if key.startswith("test_") else key): value
        for key, value in record.items()
    }


def _references(
    model: nn.Module, loss: Loss, train: Data, test: Data, graph: GraphLike,
    options: dict[str, Any], private: FitResult,
) -> Diagnosis:  # fmt: skip
    """The noise-free runs, clipped and unclipped, of the configuration that gave `private`."""
    noise_free = {**options, "mechanism": "none", "eps": None, "design": None}
    logger.warning(
        "reference runs without noise: not private (eps = inf), a diagnostic not to release"
    )
    clipped = fit(copy.deepcopy(model), loss, train, test, graph, **noise_free)
    unclipped = fit(
        copy.deepcopy(model), loss, train, test, graph, **{**noise_free, "clip": NO_CLIP}
    )
    return Diagnosis(private, clipped, unclipped)


def diagnose(
    model: nn.Module, loss: Loss, train: Data, test: Data, graph: GraphLike, **options: Any
) -> Diagnosis:
    """Run [`fit`][dpdl.experiments.fit.fit] with `options` (any of its keyword options), then
    the same configuration without noise (mechanism `"none"`) with its clipping and without
    clipping, on the same data, partition, graph and batches (the same `seed`).

    Returns a [`Diagnosis`][dpdl.experiments.tune.Diagnosis]: `diagnose(...).lines()` reads, e.g.,
    `test_accuracy: noise-free, unclipped 0.95 | noise-free, clipped 0.93 | private 0.71`, the
    noise then being what costs. The two reference runs use the private data without protection:
    their privacy is infinite (their reports say eps = inf); never release them.
    """
    allowed = [name for name in _FIT if name not in ("model", "loss", "train", "test", "graph")]
    _require_options(options, allowed, "diagnose")
    if not isinstance(model, nn.Module):
        raise ConfigError(f"model: expected a torch nn.Module, got {type(model).__name__}")
    private = fit(copy.deepcopy(model), loss, train, test, graph, **options)
    return _references(model, loss, train, test, graph, options, private)


def _search_seeds(seed: int, count: int) -> list[int]:
    """A seed of its own for every search run, none the refit's `seed`: composition needs each
    run's batches and noise independent of the others'."""
    seeds = [int(s) for s in purpose_seed(seed, "tune-search").generate_state(count, np.uint64)]
    if len({*seeds, seed}) != count + 1:  # a collision of 64-bit draws: never seen
        raise RuntimeError(f"the search's seeds drawn from seed {seed} collide")
    return seeds


def _require_flag(value: Any, name: str) -> None:
    if not isinstance(value, bool):
        raise ConfigError(f"{name}: expected True or False, got {value!r}")


def _split(
    train: tuple[np.ndarray, np.ndarray],
    parts: list[np.ndarray],
    validation: Data | None,
    fraction: float | None,
    seed: int,
) -> tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The search's training data, its parts (one index array per agent) and the validation
    data: the validation set given, or the examples every agent holds out (`_hold_out`)."""
    if validation is not None:
        if fraction is not None:
            raise ConfigError("give a validation set or a validation_fraction, not both")
        return train, parts, data_arrays(validation, "validation")
    kept, held = _hold_out(parts, 0.2 if fraction is None else fraction, seed)
    order = np.concatenate(kept)
    search_parts = np.split(np.arange(len(order)), np.cumsum([len(k) for k in kept])[:-1])
    inputs, targets = train
    return (inputs[order], targets[order]), search_parts, (inputs[held], targets[held])


def _search(
    model: nn.Module,
    loss: Loss,
    data: tuple[tuple[np.ndarray, np.ndarray], list[np.ndarray], tuple[np.ndarray, np.ndarray]],
    graph: GraphLike,
    lrs: list[float],
    seeds: list[int],
    score: str,
    goal: str,
    options: dict[str, Any],
) -> tuple[list[Candidate], Candidate, FitResult]:
    """One `fit` per step size; every candidate, the best and its run."""
    search, parts, held = data
    candidates: list[Candidate] = []
    best: tuple[float, Candidate, FitResult] | None = None
    for value, run_seed in zip(lrs, seeds, strict=True):
        result = fit(
            copy.deepcopy(model), loss, search, held, graph,
            partition=parts, seed=run_seed, lr=value, **options,
        )  # fmt: skip
        metrics = _renamed(result.final_metrics)
        candidate = Candidate(
            value, run_seed, metrics, [_renamed(r) for r in result.history], result.privacy
        )
        candidates.append(candidate)
        logger.info("tune: lr=%g: %s=%.4g", value, score, metrics.get(score, math.nan))
        value_cost = cost(metrics.get(score, math.nan), goal)
        if best is None or value_cost < best[0]:
            best = (value_cost, candidate, result)
        del result  # one search run's models alive at a time, besides the best's
    assert best is not None
    if math.isinf(best[0]):
        logger.warning("tune: every step size diverged; the first is kept")
    return candidates, best[1], best[2]


def tune(
    model: nn.Module,
    loss: Loss,
    train: Data,
    graph: GraphLike,
    *,
    lr: Sequence[float],
    test: Data | None = None,
    validation_fraction: float | None = None,
    validation: Data | None = None,
    metric: str | None = None,
    refit: bool = True,
    reference: bool = False,
    partition: Partition = "iid",
    alpha: float = 10.0,
    mixing: str = "metropolis-hastings",
    n: int | None = None,
    p: float | None = None,
    seed: int = 0,
    **options: Any,
) -> TuneResult:
    """Search the step size of [`fit`][dpdl.experiments.fit.fit] on a validation split of the
    training data, then refit the best on all of it.

    The training examples are split over the agents by `partition` (as `fit` splits them); each
    agent then holds out `floor(validation_fraction x its examples)` of its own (default 0.2),
    drawn from `seed`, as the validation split; or, given `validation` (data as `train`), the
    search trains on all the training data and is scored on it. `fit` runs once per step size of
    `lr` on the rest (each run with a seed of its own), scored on the validation split by
    `metric` (`"accuracy"` for classification, else `"loss"`; or `"accuracy_average_model"`,
    `"loss_average_model"`: the agents' average model's). The best final value wins (a diverged
    run is the worst, the first on a tie: the rule of the sweeps' search,
    `dpdl.experiments.sweeps.tuning.cost`). With `refit` the chosen step size runs on the
    full training data with `seed`, scored on `test`, which nothing reads before (the search
    chooses without it): the run `fit(..., lr=chosen, seed=seed)` makes. Without, the chosen
    search run is the result and `test` may be None. `reference=True` also runs the final
    configuration without noise, clipped and unclipped
    ([`diagnose`][dpdl.experiments.tune.diagnose]).

    `options` are `fit`'s (`mechanism`, `eps`, `delta`, `steps`, `clip`, `clip_level`,
    `batch_size`, ...: `FORWARDED`), the same for every run; `eps` is each run's budget.

    Privacy: every run trains on the private data, so the choice and the final model released
    together are only as private as all the runs composed. `TuneResult.privacy` states that
    guarantee per threat ([`compose_runs`][dpdl.accounting.accountant.compose_runs]), larger
    than one run's (`TuneResult.privacy_per_run`). It covers the examples the runs train on;
    held-out validation examples choose the step size without noise, so the choice is not
    differentially private with respect to them (give a `validation` set you may publish where
    that matters).
    """
    lrs = _require_lrs(lr)
    _require_options(options, FORWARDED, "tune")
    require_seed(seed)
    _require_flag(refit, "refit")
    _require_flag(reference, "reference")
    score, goal = _metric(metric, bool(_default("classification", options)))
    _require_test_form(test, refit)
    inputs, targets = data_arrays(train, "train")
    _require_own_model(model, loss, (inputs, targets), validation, options)
    built, weights = graph_and_weights(graph, mixing, seed, n, p)
    fixed = built if isinstance(graph, (str, nx.Graph)) else graph  # a random draw made once
    parts = split_examples(targets, len(weights), partition, seed, alpha)
    split = _split((inputs, targets), parts, validation, validation_fraction, seed)
    search_relation = _relation(
        options, [len(k) for k in split[1]], "the search (each agent less its validation examples)"
    )
    final_relation = _relation(options, [len(part) for part in parts], "train")
    common = {**options, "mixing": mixing}
    logger.info(
        "tune: %d step sizes on %d examples, validated on %d",
        len(lrs), len(split[0][1]), len(split[2][1]),
    )  # fmt: skip
    candidates, chosen, chosen_run = _search(
        model, loss, split, fixed, lrs, _search_seeds(seed, len(lrs)), score, goal, common
    )
    runs = [(c.privacy, search_relation) for c in candidates]
    if refit:
        data = ((inputs, targets), test, parts, seed)
        final = fit(
            copy.deepcopy(model), loss, data[0], test, fixed,
            partition=parts, seed=seed, lr=chosen.lr, **common,
        )  # fmt: skip
        runs.append((final.privacy, final_relation))
    else:
        data = (split[0], split[2], split[1], chosen.seed)
        final = chosen_run
    privacy = _compose(runs)
    logger.info("tune: chose lr=%g (%s %s)", chosen.lr, goal, score)
    for together in privacy:
        logger.info(
            "tune: privacy of the %d runs released together (they train on the same data): %s",
            len(runs), together,
        )  # fmt: skip
    diagnosis = None
    if reference:
        same = {**common, "partition": data[2], "seed": data[3], "lr": chosen.lr}
        diagnosis = _references(model, loss, data[0], data[1], fixed, same, final)
    return TuneResult(
        candidates, chosen.lr, score, goal, final, refit, privacy, len(split[2][1]), diagnosis
    )
