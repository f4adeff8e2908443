"""The paper's two result tables as markdown, from
:class:`~transformers_gazeflow.metrics.protocol_records.EvaluationResult` metrics (paper Section 4.1, Tables main and
dynamics, plus the dynamics metrics a motionless trajectory cannot game,
:mod:`~transformers_gazeflow.metrics.dynamics`).

* :func:`main_table_markdown`: AUC, F1, P, R, AAE, NSS, CC, KL, SIM per method.
* :func:`dynamics_table_markdown`: ADE and DTW (mean, best of K; x10^2 px), the step-length ratios to human, the
  paper's linear-bin JSD, the log-bin JSD and the Wasserstein-1 distance (px, and over the human mean step). Given
  an evaluation's ``dynamics_references``, it prints the two reference rows below the methods: a trajectory that
  never moves (what a method must beat; its ADE/DTW depend on where it stands, so they are left blank) and human
  against human (alternating clips: the floor that sampling alone gives).

* :func:`events_table_markdown`: fixations per clip, fixation durations, saccade amplitudes (with their
  Wasserstein-1 distances to the recording's) and event-level F1 (:mod:`~transformers_gazeflow.metrics.events`).
* :func:`reliability_table_markdown`: nominal coverage of the uncertainty regions against the observed
  (:mod:`transformers_gazeflow.gaze.uncertainty`), with each level's calibrated factor.
* :func:`paper_dynamics_table_markdown`: the paper's Table dynamics as laid out there (ADE and DTW mean / best,
  Disp Mean and Disp Med as ratios with the human values in their headers, the 100-bin JSD).
* :func:`sample_scores_table_markdown`: the energy score and the CRPS of the sample set
  (:mod:`~transformers_gazeflow.metrics.sample_scores`).

A cell whose metric is missing or undefined (NaN) prints ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping

MAIN_COLUMNS = (
    ("AUC", "auc", 1.0, 3),
    ("F1", "f1", 1.0, 3),
    ("P", "precision", 1.0, 3),
    ("R", "recall", 1.0, 3),
    ("AAE", "aae", 1.0, 2),
    ("NSS", "nss", 1.0, 3),
    ("CC", "cc", 1.0, 3),
    ("KL", "kl", 1.0, 3),
    ("SIM", "sim", 1.0, 3),
)
"""(header, metric key, scale, digits) of the main table."""

DYNAMICS_COLUMNS = (
    ("ADE mean (x10^2 px)", "ade_mean", 1e-2, 3),
    ("ADE best", "ade_best", 1e-2, 3),
    ("DTW mean (x10^2 px)", "dtw_mean", 1e-2, 3),
    ("DTW best", "dtw_best", 1e-2, 3),
    ("disp. mean / human", "displacement_mean_ratio", 1.0, 3),
    ("disp. median / human", "displacement_median_ratio", 1.0, 3),
    ("JSD (linear bins)", "displacement_jsd", 1.0, 3),
    ("JSD (log bins)", "displacement_log_jsd", 1.0, 3),
    ("W1 (px)", "displacement_w1_px", 1.0, 3),
    ("W1 / human mean", "displacement_w1_relative", 1.0, 3),
)
"""(header, metric key, scale, digits) of the dynamics table."""

EVENT_COLUMNS = (
    ("fixations / clip", "fixations_per_clip", 1.0, 2),
    ("fix. duration mean (ms)", "fixation_duration_mean_ms", 1.0, 0),
    ("fix. duration median (ms)", "fixation_duration_median_ms", 1.0, 0),
    ("fix. duration W1 (ms)", "fixation_duration_w1_ms", 1.0, 0),
    ("sacc. amplitude mean (deg)", "saccade_amplitude_mean_deg", 1.0, 2),
    ("sacc. amplitude median (deg)", "saccade_amplitude_median_deg", 1.0, 2),
    ("sacc. amplitude W1 (deg)", "saccade_amplitude_w1_deg", 1.0, 2),
    ("fixation F1", "fixation_f1", 1.0, 3),
    ("saccade F1", "saccade_f1", 1.0, 3),
    ("saccade share", "saccade_share", 1.0, 3),
)
"""(header, metric key, scale, digits) of the events table."""

SAMPLE_SCORE_COLUMNS = (
    ("energy score (px, fair)", "energy_score_fair", 1.0, 3),
    ("CRPS per coordinate (px, fair)", "crps_fair", 1.0, 3),
    ("energy score (px, plain)", "energy_score_plain", 1.0, 3),
    ("CRPS per coordinate (px, plain)", "crps_plain", 1.0, 3),
)
"""(header, metric key, scale, digits) of the sample-set scores table; the fair estimates are the ones compared."""

REFERENCE_ROWS = (("motionless", "Motionless (never moves)"), ("human_halves", "Human vs human (alternating clips)"))
"""Keys of ``EvaluationResult.dynamics_references`` and the names their rows print under."""


def _cell(value: float | None, scale: float, digits: int) -> str:
    if value is None or value != value:
        return "-"
    return f"{value * scale:.{digits}f}"


def _table(columns, rows: Mapping[str, Mapping[str, float]]) -> str:
    lines = ["| Method | " + " | ".join(header for header, *_ in columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for method, metrics in rows.items():
        cells = [_cell(metrics.get(key), scale, digits) for _, key, scale, digits in columns]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main_table_markdown(rows: Mapping[str, Mapping[str, float]]) -> str:
    """The main table: one row per ``{method name: metrics}``."""
    return _table(MAIN_COLUMNS, rows)


def dynamics_table_markdown(
    rows: Mapping[str, Mapping[str, float]], references: Mapping[str, Mapping[str, float]] | None = None
) -> str:
    """The dynamics table: one row per ``{method name: metrics}``, then the reference rows found in ``references``
    (an ``EvaluationResult.dynamics_references``: ``"motionless"``, ``"human_halves"``)."""
    table = dict(rows)
    for key, name in REFERENCE_ROWS:
        if references and key in references:
            table[name] = references[key]
    return _table(DYNAMICS_COLUMNS, table)


def events_table_markdown(method: str, metrics: Mapping[str, Mapping[str, float]], labeller: str = "I-VT") -> str:
    """The events table of one method: ``metrics`` as :func:`~transformers_gazeflow.metrics.events.event_metrics`
    returns them (rows: the method's samples, its point estimate, the labeller on the recorded gaze, the
    recording's own labels)."""
    return _table(
        EVENT_COLUMNS,
        {
            f"{method} (each sample)": metrics["samples"],
            f"{method} (point estimate)": metrics["point_estimate"],
            f"{labeller} on the recorded gaze": metrics["labeller_on_recording"],
            "Recording (dataset labels)": metrics["human"],
        },
    )


def reliability_table_markdown(rows: list[Mapping[str, float]], frames: int, source: str | None = None) -> str:
    """The reliability table: nominal q against the observed coverage of the raw spread's regions and, when the
    rows hold them (a calibration), each level's factor ``f_q`` and the calibrated coverage (``rows`` from
    ``gaze.uncertainty.reliability_table``; ``source`` names the calibration in the header)."""
    calibrated = bool(rows) and "calibrated" in rows[0]
    intervals = bool(rows) and "interval" in rows[0]
    head = "| nominal q | observed (raw spread) |"
    head += f" factor f_q | observed (calibrated{f', {source}' if source else ''}) |" if calibrated else ""
    head += " 95% interval (clips resampled) |" if intervals else ""
    lines = [head, "| ---: | ---: |" + (" ---: | ---: |" if calibrated else "") + (" ---: |" if intervals else "")]
    for row in rows:
        cells = f"| {row['nominal']:.2f} | {row['raw']:.3f} |"
        cells += f" {row['factor']:.3f} | {row['calibrated']:.3f} |" if calibrated else ""
        lines.append(cells + (f" {row['interval'][0]:.3f} - {row['interval'][1]:.3f} |" if intervals else ""))
    note = f"\n{frames} frames; mean |observed - nominal|: raw {_gap(rows, 'raw'):.3f}"
    if calibrated:
        note += f", calibrated {_gap(rows, 'calibrated'):.3f}"
    return "\n".join(lines) + note + "\n"


def paper_dynamics_table_markdown(rows: Mapping[str, Mapping[str, float]]) -> str:
    """The paper's Table dynamics (Appendix E.3): ADE and DTW (mean over K, best of K; x10^2 px), Disp Mean and Disp
    Med as ratios to the human steps (the human values, from the first row, in the headers) and the JSD of the
    100-bin linear histograms (base e)."""
    first = next(iter(rows.values()), {})
    mean_px, median_px = first.get("human_displacement_mean_px"), first.get("human_displacement_median_px")
    human = "-" if mean_px is None else f"{mean_px:.2f}"
    human_median = "-" if median_px is None else f"{median_px:.2f}"
    lines = [
        f"| Method | ADE mean (x10^2 px) | ADE best | DTW mean (x10^2 px) | DTW best | Disp Mean (H: {human} px) | "
        f"Disp Med (H: {human_median} px) | JSD |",
        "| --- |" + " ---: |" * 7,
    ]
    for method, metrics in rows.items():
        cells = [_cell(metrics.get(key), 1e-2, 3) for key in ("ade_mean", "ade_best", "dtw_mean", "dtw_best")]
        for key in ("displacement_mean_ratio", "displacement_median_ratio"):
            cell = _cell(metrics.get(key), 1.0, 2)
            cells.append(cell if cell == "-" else f"{cell}x")
        cells.append(_cell(metrics.get("displacement_jsd"), 1.0, 3))
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sample_scores_table_markdown(rows: Mapping[str, Mapping[str, float]]) -> str:
    """The energy score and the per-coordinate CRPS of the sample sets, fair and plain (native px, lower is
    better): one row per ``{method name: metrics}``."""
    return _table(SAMPLE_SCORE_COLUMNS, rows)


def _gap(rows: list[Mapping[str, float]], key: str) -> float:
    return sum(abs(row[key] - row["nominal"]) for row in rows) / max(len(rows), 1)


__all__ = [
    "MAIN_COLUMNS",
    "DYNAMICS_COLUMNS",
    "EVENT_COLUMNS",
    "SAMPLE_SCORE_COLUMNS",
    "REFERENCE_ROWS",
    "main_table_markdown",
    "dynamics_table_markdown",
    "events_table_markdown",
    "reliability_table_markdown",
    "paper_dynamics_table_markdown",
    "sample_scores_table_markdown",
]
