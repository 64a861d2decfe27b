"""Privacy losses that compose elsewhere: one adversary's view as a dp_accounting `DpEvent`, a
`PrivacyLossDistribution`, or an f-DP trade-off curve.

**A view** ([`View`][dpdl.accounting.export.View]) is what one adversary (the eavesdropper, a
curious agent or coalition, the central observer; a pair of agents) sees of one run, as dpdl
accounts it: `rounds` rounds, each a Gaussian mechanism of Mahalanobis sensitivity `mu_step`,
Poisson-subsampled at `sampling_rate` at example level. Every view dpdl accounts is of this form:

- agent level (accountants `"gdp"`, `"paper-rdp"`): each round releases `P (g + v)`, a
  correlated Gaussian of covariance `S = P R P^T` whose mean moves by `m` with one agent's data.
  Its privacy loss random variable is exactly that of `N(0, 1)` against `N(||S^-1/2 m||, 1)`
  (whiten by `S^-1/2`; only the component along `S^-1/2 m` carries information): one scalar
  Gaussian of sensitivity `mu_step = ||S^-1/2 m||`, so `mu_step`-GDP (Dong, Roth & Su 2022),
  and T rounds `sqrt(T) mu_step`-GDP (their Corollary 3.3);
  [`dpdl.accounting.sensitivity`][dpdl.accounting.sensitivity] certifies `mu_step`;
- time-correlated noise (MAFALDA-SGD Theorem 8) and runs of two phases: the whole run is one
  mu-GDP Gaussian (`rounds = 1`, `mu_step = mu`);
- example level (accountants `"pld"`, `"paper-rdp"`): each round the same scalar Gaussian,
  Poisson-subsampled (add/remove-one).

**Exports.** [`dp_event`][dpdl.accounting.export.dp_event] gives
`SelfComposedDpEvent(GaussianDpEvent(1 / mu_step), rounds)`, wrapped in
`PoissonSampledDpEvent(q, ...)` where subsampled: dp_accounting's own accountants reproduce dpdl's
epsilon from it (its PLD accountant collapses the self-composed Gaussian to one of noise
`1 / mu` exactly). [`privacy_loss_distribution`][dpdl.accounting.export.privacy_loss_distribution]
gives dp_accounting's PLD (Koskela, Jalko & Honkela 2020; Doroshenko, Ghazi, Kamath, Kumar &
Manurangsi 2022, "Connect the Dots"), discretised at `discretization` with pessimistic rounding: its
epsilon is never below the exact one and exceeds it by about the discretisation.
[`tradeoff`][dpdl.accounting.export.tradeoff] gives the f-DP curve `G_mu` in closed form
([`TradeOffCurve`][dpdl.accounting.tradeoff.TradeOffCurve]) for the views that are mu-GDP.

**Compose under `ADD_OR_REMOVE_ONE`** (dp_accounting's default relation), whatever dpdl's relation
was: `mu_step` is already the view's whole shift over its noise (`2C` for dpdl's agent-level
replace-one). dp_accounting's PLD accountant under `REPLACE_ONE` doubles a Gaussian event's shift
(and its RDP accountant does not): it would account `2 mu`.

The exported view is the one the accountant reads, whatever bound it reports: for a `"paper-rdp"`
report at agent level the event is the exact Gaussian view, whose epsilon is below the papers'
bound in the report.

**The pitfall this avoids** (google/differential-privacy PR #430, "Clarify scalar PLD scope for
correlated multi-output Gaussian releases", and issue #428): applying scalar Gaussian accounting
to each output of a jointly observed multi-output release, one PLD per coordinate with that
coordinate's own noise, can underestimate the privacy loss. With correlated noise it does: for
`m = (1, 1)` and unit variances of correlation -0.9 the coordinates compose to
`sqrt(2)`-GDP while the release is `||S^-1/2 m|| = sqrt(20)`-GDP. dpdl never exports
per-coordinate scalars: each view leaves as ONE scalar Gaussian of its whitened sensitivity
([`whitened_sensitivity`][dpdl.accounting.export.whitened_sensitivity]).

Which report to export: [`view_of`][dpdl.accounting.export.view_of] reads a
[`PrivacyReport`][dpdl.accounting.accountant.PrivacyReport], its `as_dict` (the `privacy` of
`final.json`, of a saved result), a list of them, or anything holding them in `privacy` (what
[`fit`][dpdl.experiments.fit.fit] returns), one threat at a time;
[`pair_view`][dpdl.accounting.export.pair_view] one coalition's view of one agent.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpdl.accounting import gdp
from dpdl.accounting.accountant import (
    PLD_DISCRETIZATION,
    PrivacyReport,
    hidden_sensitivities,
    pld_epsilon,
    view_sensitivities,
)
from dpdl.accounting.neighbouring import Neighbouring
from dpdl.accounting.noise import GaussianNoise, NoiseSource, noise_of
from dpdl.accounting.sensitivity import rounding_gamma
from dpdl.accounting.tradeoff import TradeOffCurve
from dpdl.errors import ConfigError
from dpdl.threats import ThreatModel

if TYPE_CHECKING:
    from dp_accounting import DpEvent
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

__all__ = [
    "EXPORT_FORMATS",
    "ROUND_ACCOUNTANTS",
    "WHOLE_RUN_ACCOUNTANTS",
    "View",
    "dp_event",
    "export_json",
    "gaussian_view",
    "pair_view",
    "privacy_loss_distribution",
    "tradeoff",
    "view_of",
    "whitened_sensitivity",
]

#: The accountants of views made of identical rounds (Gaussian, or Poisson-subsampled Gaussian).
ROUND_ACCOUNTANTS = ("gdp", "paper-rdp", "pld")
#: The accountants that account a whole run as one mu-GDP Gaussian: two phases composed
#: ([`dpdl.accounting.phases`][dpdl.accounting.phases]) and time-correlated noise
#: (`dpdl.jobspec.factorized.ACCOUNTANT`, MAFALDA-SGD Theorem 8).
WHOLE_RUN_ACCOUNTANTS = ("gdp (two phases)", "matrix-factorization GDP (MAFALDA-SGD Thm. 8)")
#: The accountant of a run without noise: no guarantee.
NO_NOISE = "none (no noise)"
#: What [`export_json`][dpdl.accounting.export.export_json] writes.
EXPORT_FORMATS = ("event", "pld", "fdp")


@dataclass(frozen=True)
class View:
    """One adversary's view of a run: `rounds` rounds, each a scalar Gaussian mechanism of
    (whitened, Mahalanobis) sensitivity `mu_step` with unit noise, Poisson-subsampled at
    `sampling_rate` where it is not None (add/remove-one). `mu_step = inf`: a direction the noise
    does not hide (no guarantee); `0`: nothing released about the data."""

    mu_step: float
    rounds: int = 1
    sampling_rate: float | None = None
    threat: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.mu_step, bool) or not self.mu_step >= 0.0:
            raise ConfigError(f"a view's sensitivity mu_step is >= 0, got {self.mu_step!r}")
        rounds = self.rounds
        if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral) or rounds < 1:
            raise ConfigError(f"a view has an integer number of rounds >= 1, got {rounds!r}")
        rate = self.sampling_rate
        if rate is not None and not 0.0 < rate <= 1.0:
            raise ConfigError(f"a Poisson sampling rate is in (0, 1], got {rate!r}")

    @property
    def subsampled(self) -> bool:
        return self.sampling_rate is not None

    @property
    def mu(self) -> float:
        """The view's Gaussian-DP parameter, `sqrt(rounds) mu_step` padded up for its rounding
        (Dong et al. 2022, Corollary 3.3); a subsampled view is not mu-GDP for any useful mu."""
        if self.subsampled:
            raise ConfigError(
                f"the {self.threat or 'given'} view is Poisson-subsampled: it is not mu-GDP in "
                "closed form; export its DpEvent or PLD instead"
            )
        if self.rounds == 1 or math.isinf(self.mu_step):
            return self.mu_step
        return math.sqrt(self.rounds) * self.mu_step * (1.0 + rounding_gamma(2))

    def epsilon(self, delta: float) -> float:
        """dpdl's own epsilon of the view at `delta`: exact GDP, or the PLD of the subsampled
        rounds at dpdl's discretisation (`pld_epsilon`)."""
        if not self.subsampled:
            return gdp.epsilon(self.mu, delta)
        if math.isinf(self.mu_step):
            return math.inf
        rate = float(self.sampling_rate)  # type: ignore[arg-type]
        return pld_epsilon(float(self.mu_step), rate, int(self.rounds), float(delta))

    def as_dict(self) -> dict[str, Any]:
        return {
            "threat": self.threat,
            "description": self.description,
            "mu_step": self.mu_step,
            "rounds": self.rounds,
            "sampling_rate": self.sampling_rate,
            "mu": None if self.subsampled else self.mu,
        }


def _reports(source: Any) -> list[PrivacyReport | Mapping[str, Any]]:
    """The reports in `source`: one, a list, or an object's `privacy` (a fit's result)."""
    source = getattr(source, "privacy", source)
    if isinstance(source, (PrivacyReport, Mapping)):
        return [source]
    if isinstance(source, Sequence) and not isinstance(source, str):
        if not source:
            raise ConfigError("no privacy report to export (the run accounted nothing)")
        return list(source)
    raise ConfigError(
        f"expected a PrivacyReport, its as_dict(), a list of them or a result holding them in "
        f"`privacy`, got {type(source).__name__}"
    )


def _field(report: PrivacyReport | Mapping[str, Any], name: str) -> Any:
    if isinstance(report, PrivacyReport):
        return getattr(report, name)
    if name not in report:
        if name == "sampling_rate":  # reports written before dpdl recorded it
            return None
        raise ConfigError(f"the privacy report has no {name!r}: not a dpdl PrivacyReport")
    return report[name]


def _select(reports: list[PrivacyReport | Mapping[str, Any]], threat: str | None) -> Any:
    threats = [str(_field(report, "threat")) for report in reports]
    if threat is None:
        return reports[0]
    if threat not in threats:
        raise ConfigError(
            f"no privacy report against threat {threat!r}; the run accounted: {', '.join(threats)}"
        )
    return reports[threats.index(threat)]


def _sampling_rate(report: Any, neighbouring: Neighbouring | None) -> float | None:
    """The report's Poisson rate, or `neighbouring`'s for a report that did not record it; an
    example-level report of neither is an error, two that differ too."""
    recorded = _field(report, "sampling_rate")
    given = None if neighbouring is None else neighbouring.sampling_rate
    if recorded is not None and given is not None and not math.isclose(recorded, given):
        raise ConfigError(
            f"the report's sampling rate {recorded:g} is not the relation's {given:g}"
        )
    rate = recorded if recorded is not None else given
    if rate is None and str(_field(report, "neighbouring")).startswith("example-level add"):
        raise ConfigError(
            "this example-level report does not record its Poisson sampling rate (written by an "
            "older dpdl): pass its relation, neighbouring=ExampleLevel(clip, batch_size, rate)"
        )
    return None if rate is None else float(rate)


def view_of(
    source: Any, threat: str | None = None, neighbouring: Neighbouring | None = None
) -> View:
    """The view that `source`'s report against `threat` accounts (module doc).

    `source`: a [`PrivacyReport`][dpdl.accounting.accountant.PrivacyReport], its `as_dict()`
    (`final.json`'s `privacy`), a list of them, or an object holding them in `privacy` (a
    [`FitResult`][dpdl.experiments.fit.FitResult], a seed's run, saved models). `threat`: the
    report's threat name (`"eavesdropper"`, `"honest-but-curious"`, `"colluding-2"`, ...;
    default the first, the mechanism's own). `neighbouring`: the relation, needed only for an
    example-level report that does not record its sampling rate.

    Raises [`ConfigError`][dpdl.errors.ConfigError] for a report whose accountant is not one of
    `ROUND_ACCOUNTANTS`, `WHOLE_RUN_ACCOUNTANTS` or no noise: its view is not exportable as a
    Gaussian event, and no approximate event is made up."""
    report = _select(_reports(source), threat)
    name = str(_field(report, "threat"))
    accountant = str(_field(report, "accountant"))
    steps, mu_step = int(_field(report, "steps")), float(_field(report, "mu_step"))
    described = f"{_field(report, 'neighbouring')}; accountant {accountant}"
    if accountant == NO_NOISE:
        return View(math.inf, steps, None, name, described)
    if accountant in WHOLE_RUN_ACCOUNTANTS:
        whole = View(mu_step, steps, None, name, described).mu  # sqrt(T) mu_step, padded up
        return View(whole, 1, None, name, described)
    if accountant not in ROUND_ACCOUNTANTS:
        known = ", ".join((*ROUND_ACCOUNTANTS, *WHOLE_RUN_ACCOUNTANTS))
        raise ConfigError(
            f"the {name} view is accounted by {accountant!r}, whose privacy loss is not a "
            f"(subsampled) Gaussian dpdl can export; exportable accountants: {known}"
        )
    return View(mu_step, steps, _sampling_rate(report, neighbouring), name, described)


def whitened_sensitivity(shift: np.ndarray, covariance: np.ndarray) -> float:
    """`||S^-1/2 m|| = sqrt(m^T S^+ m)`: the sensitivity of the one scalar Gaussian that a
    Gaussian release of covariance `S` whose mean moves by `m` is, exactly (its privacy loss is
    that of `N(0, 1)` against `N(||S^-1/2 m||, 1)`); `inf` where `m` leaves the range of `S`.
    A floating-point value for a release you describe; dpdl's own views are certified by
    [`dpdl.accounting.sensitivity`][dpdl.accounting.sensitivity]."""
    shift = np.asarray(shift, dtype=float).ravel()
    covariance = np.asarray(covariance, dtype=float)
    if covariance.shape != (len(shift), len(shift)) or not np.allclose(covariance, covariance.T):
        raise ConfigError(
            f"the covariance must be a symmetric {len(shift)} x {len(shift)} matrix, got shape "
            f"{covariance.shape}"
        )
    values, vectors = np.linalg.eigh(covariance)
    if values.min(initial=0.0) < -1e-12 * max(values.max(initial=0.0), 1e-300):
        raise ConfigError("the covariance is not positive semidefinite")
    components = vectors.T @ shift
    kept = values > 1e-12 * max(values.max(initial=0.0), 1e-300)
    outside = np.abs(components[~kept])
    if (outside > 1e-9 * max(float(np.linalg.norm(shift)), 1e-300)).any():
        return math.inf
    return float(math.sqrt(np.sum(components[kept] ** 2 / values[kept])))


def gaussian_view(shift: np.ndarray, covariance: np.ndarray, rounds: int = 1) -> View:
    """The view of `rounds` identical releases `N(f(D), S)` whose mean moves by `shift` with one
    record: one scalar Gaussian of sensitivity
    [`whitened_sensitivity`][dpdl.accounting.export.whitened_sensitivity] per round, never one
    per coordinate."""
    mu = whitened_sensitivity(shift, covariance)
    return View(mu, rounds, None, "", f"Gaussian release of {len(np.ravel(shift))} outputs")


def pair_view(
    noise: GaussianNoise | NoiseSource,
    threat: ThreatModel,
    neighbouring: Neighbouring,
    rounds: int,
    coalition: Iterable[int],
    agent: int,
) -> View:
    """The view that `coalition` (e.g. `(i,)`, one curious agent under the honest-but-curious
    threat) has of agent `agent`'s data over `rounds` rounds of `noise`: the per-pair value
    whose worst over pairs is the report's, from the same certified sensitivities the accountant
    reads ([`hidden_sensitivities`][dpdl.accounting.accountant.hidden_sensitivities], the
    simulation's own draw included where it has one)."""
    coalition = tuple(int(a) for a in coalition)
    description = noise_of(noise)
    if not 0 <= agent < description.n or agent in coalition:
        raise ConfigError(
            f"agent {agent!r} is not an honest agent of 0..{description.n - 1} outside the "
            f"coalition {list(coalition)}"
        )
    honest, units = hidden_sensitivities(description, coalition, threat)
    unit = float(units[int(np.searchsorted(honest, agent))])
    factor = description.sampling_factor
    if factor is not None:  # the simulation draws L z, no seed subtracted: certified beside it
        unit = max(unit, float(view_sensitivities(factor, threat)[agent]))
    return View(
        neighbouring.sensitivity * unit,
        rounds,
        neighbouring.sampling_rate,
        str(threat),
        f"coalition {list(coalition)} about agent {agent}; {neighbouring}",
    )


def dp_event(view: View) -> DpEvent:
    """The view as a dp_accounting `DpEvent`: `GaussianDpEvent(1 / mu_step)` (noise multiplier:
    noise over sensitivity, here unit sensitivity after whitening), self-composed over the rounds,
    inside `PoissonSampledDpEvent(sampling_rate, ...)` where subsampled; `NonPrivateDpEvent` for
    no guarantee, `NoOpDpEvent` for nothing released. dp_accounting's accountants (PLD, RDP) then
    compose it with any other event, under their default relation `ADD_OR_REMOVE_ONE` (module
    doc: `mu_step` is the whole shift already)."""
    import dp_accounting  # 1.3 s to import: only the exports need it

    if math.isinf(view.mu_step):
        return dp_accounting.NonPrivateDpEvent()
    if view.mu_step == 0.0:
        return dp_accounting.NoOpDpEvent()
    event: DpEvent = dp_accounting.GaussianDpEvent(1.0 / view.mu_step)
    if view.subsampled:
        event = dp_accounting.PoissonSampledDpEvent(view.sampling_rate, event)
    if view.rounds > 1:
        event = dp_accounting.SelfComposedDpEvent(event, view.rounds)
    return event


def privacy_loss_distribution(
    view: View, discretization: float = PLD_DISCRETIZATION
) -> PrivacyLossDistribution:
    """The view's privacy loss distribution (dp_accounting, add/remove-one), each loss rounded to
    a multiple of `discretization` pessimistically (`pessimistic_estimate=True`, by
    connect-the-dots: Doroshenko et al. 2022): its epsilon at any delta is never below the exact
    one. A mu-GDP view is ONE Gaussian PLD of noise `1 / mu` (no error growing with the rounds);
    a subsampled one the subsampled Gaussian's, self-composed over the rounds (Koskela et al.
    2020), as dpdl's `"pld"` accountant computes it."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    if not (math.isfinite(discretization) and discretization > 0.0):
        raise ConfigError(f"the discretisation must be a number > 0, got {discretization!r}")
    if math.isinf(view.mu_step):
        raise ConfigError(
            f"the {view.threat or 'given'} view gives no guarantee (infinite sensitivity): it has "
            "no privacy loss distribution; its DpEvent is NonPrivateDpEvent"
        )
    if view.mu_step == 0.0:
        return pld.identity(value_discretization_interval=discretization)
    if not view.subsampled:
        return pld.from_gaussian_mechanism(
            1.0 / view.mu,
            sensitivity=1.0,
            pessimistic_estimate=True,
            value_discretization_interval=discretization,
        )
    single = pld.from_gaussian_mechanism(
        1.0 / view.mu_step,
        sensitivity=1.0,
        pessimistic_estimate=True,
        value_discretization_interval=discretization,
        sampling_prob=view.sampling_rate,
    )
    return single.self_compose(view.rounds)


def tradeoff(view: View) -> TradeOffCurve:
    """The view's f-DP trade-off curve `G_mu` in closed form (Dong, Roth & Su 2022;
    [`TradeOffCurve`][dpdl.accounting.tradeoff.TradeOffCurve]); a subsampled view has none in
    closed form (a [`ConfigError`][dpdl.errors.ConfigError] saying so)."""
    return TradeOffCurve(view.mu)


def _plain(value: Any) -> Any:
    """A DpEvent's named tuple (`to_named_tuple`) as JSON-ready dicts and lists."""
    if hasattr(value, "_asdict"):
        return {key: _plain(item) for key, item in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _pmf(pmf: Any) -> dict[str, Any]:
    """One dense PMF's numbers: loss `k` is `(lower_loss + k) * discretization`. dp_accounting
    has no public reader of them, so this reads its fields (`_lower_loss`, `_probs`,
    `_infinity_mass`) and fails clearly where a version renames them."""
    dense = pmf.to_dense_pmf()
    try:
        lower, probs, infinity = dense._lower_loss, dense._probs, dense._infinity_mass
    except AttributeError as error:  # pragma: no cover - another dp_accounting layout
        raise ConfigError(
            f"this dp_accounting's PLD layout is not known to dpdl: {error}"
        ) from None
    return {
        "lower_loss_index": int(lower),
        "probabilities": np.asarray(probs, dtype=float).tolist(),
        "infinity_mass": float(infinity),
    }


def _pld_json(view: View, discretization: float) -> dict[str, Any]:
    distribution = privacy_loss_distribution(view, discretization)
    remove, add = distribution._pmf_remove, distribution._pmf_add  # no public reader
    return {
        "kind": "dp_accounting PrivacyLossDistribution (add/remove-one)",
        "discretization": discretization,
        "pessimistic_estimate": True,
        "recipe": (
            "privacy_loss_distribution.from_gaussian_mechanism(standard_deviation, sensitivity=1, "
            "value_discretization_interval=discretization, sampling_prob)"
            + (".self_compose(rounds)" if view.subsampled else "")
        ),
        "standard_deviation": 1.0 / (view.mu_step if view.subsampled else view.mu),
        "sampling_prob": view.sampling_rate or 1.0,
        "remove": _pmf(remove),
        "add": None if add is remove else _pmf(add),
    }


def export_json(
    view: View,
    format: str,
    discretization: float = PLD_DISCRETIZATION,
    points: int = 1001,
    deltas: Sequence[float] = (1e-5, 1e-6),
) -> dict[str, Any]:
    """The view in `format` (`EXPORT_FORMATS`) as plain data for JSON: `"event"` the
    `DpEvent` (`to_named_tuple`, which `DpEvent.from_named_tuple` reads back after the nested
    dicts are made named tuples again), `"pld"` the PLD's probability mass functions with
    their discretisation, `"fdp"` the trade-off curve on `points` type I errors; each beside
    the view and dpdl's epsilon at `deltas`."""
    if format not in EXPORT_FORMATS:
        raise ConfigError(f"unknown export format {format!r}; known: {', '.join(EXPORT_FORMATS)}")
    data: dict[str, Any] = {
        "view": view.as_dict(),
        "epsilon": {f"{delta:g}": view.epsilon(delta) for delta in deltas},
    }
    if format == "event":
        data["dp_event"] = _plain(dp_event(view).to_named_tuple())
        data["neighboring_relation"] = "ADD_OR_REMOVE_ONE"  # mu_step is the whole shift (doc)
    elif format == "pld":
        data["pld"] = _pld_json(view, discretization)
    else:
        data["fdp"] = tradeoff(view).as_dict(points)
    return data
