"""The reproductions' registrations in dpdl (entry point `dpdl.plugins`): each reproduction in
`dpdl.choices.REPRODUCTION_REGISTRY` (`dpdl reproduce NAME`), each sweep file in
`dpdl.choices.SWEEP_REGISTRY` (`dpdl sweep NAME`), and what only imitates a paper's
experiments or its released script in dpdl's registry of its kind: MAFALDA-SGD's code's tasks in
`dpdl.choices.TASK_REGISTRY` (their metrics in `dpdl.choices.TASK_METRICS`), the Whisper /
CorN-DSGD and DECOR codes' calibration in `dpdl.choices.CALIBRATION_REGISTRY`, DECOR's Appendix
D couples in `dpdl.choices.DECOR_SEARCH_REGISTRY` and its code's starting point in
`dpdl.choices.START_REGISTRY`; all imported on first use, so that `dpdl --help` loads nothing
more."""

from __future__ import annotations

from dpdl.choices import (
    CALIBRATION_REGISTRY,
    DECOR_SEARCH_REGISTRY,
    REPRODUCTION_REGISTRY,
    START_REGISTRY,
    SWEEP_REGISTRY,
    TASK_METRICS,
    TASK_REGISTRY,
)

__all__ = ["REPRODUCTIONS", "TINY_CNN_TASKS"]

PACKAGE = "dpdl_reproductions"

#: Name -> (module, whether it has a sweep file, one line: the paper and the figure).
REPRODUCTIONS: dict[str, tuple[str, bool, str]] = {
    "whisper-variance": ("whisper_variance", False, "Whisper D-SGD Fig. 1 / CorN-DSGD Fig. 1."),
    "whisper-seeds": (
        "whisper_seeds",
        False,
        "CorN-DSGD Fig. 2, the covariance objective against the number m of seeds.",
    ),
    "whisper-quadratic": (
        "whisper_quadratic",
        True,
        "Whisper D-SGD Fig. 2 / CorN-DSGD Fig. 3, optimality gap vs eps and p.",
    ),
    "whisper-logreg": (
        "whisper_logreg",
        True,
        "Whisper D-SGD Fig. 3 / CorN-DSGD Fig. 4, a9a logistic regression test loss vs eps and p.",
    ),
    "corn-mnist": (
        "corn_mnist",
        True,
        "CorN-DSGD Fig. 5, MNIST test accuracy vs eps and p, in the papers' protocol and the "
        "authors'.",
    ),
    "decor-fig1": (
        "decor_fig1",
        True,
        "DECOR Fig. 1, privacy-utility trade-offs of DECOR against the LDP and CDP baselines.",
    ),
    "decor-search": (
        "decor_search",
        False,
        "DECOR Figs. 2-3, the SecLDP eps of a noise couple against sigma_cor, the monotonicity "
        "behind its binary search.",
    ),
    "mafalda-pndp": (
        "mafalda_pndp",
        False,
        "MAFALDA-SGD Fig. 2, PNDP privacy loss of DP-D-SGD per pair of nodes, by distance.",
    ),
    "mafalda-housing": (
        "mafalda_housing",
        True,
        "MAFALDA-SGD Fig. 3 and Fig. 5, Housing test loss vs the LDP budget and over time.",
    ),
    "mafalda-images": (
        "mafalda_images",
        True,
        "MAFALDA-SGD Fig. 4 (right) and Fig. 6, test accuracy vs the LDP budget on images.",
    ),
    "lppa": (
        "lppa_tables",
        True,
        "LPPA Tables 1-2 and Figs. 3-4: accuracy of DSGT, the DP baseline and LPPA, and DLG "
        "against each.",
    ),
    "lppa-parameters": (
        "lppa_parameters",
        True,
        "LPPA Figs. 5-6 and Tables 3-4: the noise scale, the number of clients, local epochs and "
        "skewed data.",
    ),
    "horizon": (
        "horizon_design",
        True,
        "noise designed for the whole run (`--objective horizon`) against the papers' one-step "
        "design.",
    ),
    "strategies": (
        "strategies",
        True,
        "time-correlated strategies (BandMF, BLT, BISR, square root) against DP-D-SGD and "
        "MAFALDA-SGD, decentralized.",
    ),
    "dropouts": (
        "dropouts",
        True,
        "utility and eps against the dropout rate for LDP, DECOR, Whisper and seed recovery.",
    ),
}

for _name, (_module, _swept, _help) in REPRODUCTIONS.items():
    REPRODUCTION_REGISTRY.add(_name, f"{PACKAGE}.reproduce:CATALOG.{_module}", _help)
    if _swept:
        SWEEP_REGISTRY.add(_name, f"{PACKAGE}.grids:SWEEPS.{_name}", f"the runs of {_name}")

#: MAFALDA-SGD's code's tasks (:mod:`dpdl_reproductions.mafalda_code`) with their one-line help
#: (its grids' step size, 5, is given by them: a registered task has no default).
TINY_CNN_TASKS = {
    "mnist-tiny-cnn": "MNIST, MAFALDA-SGD's code's network on [0, 1] pixels (give --lr: 5 is its)",
    "fashion-tiny-cnn": "Fashion-MNIST, MAFALDA-SGD's code's network on [0, 1] pixels (give --lr)",
}
for _name, _help in TINY_CNN_TASKS.items():
    TASK_REGISTRY.add(_name, f"{PACKAGE}.mafalda_code:tiny_cnn_task", _help)
TASK_REGISTRY.add(
    "housing-mlp-sklearn",
    f"{PACKAGE}.mafalda_code:housing_sklearn_task",
    "housing-mlp on scikit-learn's features of the census table, as MAFALDA-SGD's code",
)
# their metrics, so that a sweep file's search, curves and agents are checked before any run
TASK_METRICS.update(dict.fromkeys(TINY_CNN_TASKS, TASK_METRICS["mnist-cnn"]))
TASK_METRICS["housing-mlp-sklearn"] = TASK_METRICS["housing-mlp"]
CALIBRATION_REGISTRY.add(
    "authors",
    f"{PACKAGE}.zcdp_bound:authors_calibration",
    "the Whisper/CorN-DSGD and DECOR codes' zCDP bound [R^-1]_ii <= "
    "(sqrt(log(1/delta)+eps)-sqrt(log(1/delta)))^2/(2 T C^2) (at example level on the batch's sum)",
)
DECOR_SEARCH_REGISTRY.add(
    "appendix-d-<k>",
    f"{PACKAGE}.decor_searches:appendix_d_couple",
    "the k-th couple of Appendix D's search (0 = least private noise), as its D.2 tunes",
)
DECOR_SEARCH_REGISTRY.add(
    "authors-<k>",
    f"{PACKAGE}.decor_searches:authors_couple",
    "the couple DECOR's code's least-squares search finds at its k-th private noise (0-49)",
)
START_REGISTRY.add("ones", f"{PACKAGE}.decor_authors:ones", "every coordinate 1, as DECOR's code")
