"""The tables and inline values of the docs, each rendered from one section of a results file
(``docs/benchmark_results/<benchmark>.<machine>.json``, written by ``results.write_section``) or from a shipped
model file. ``render_tables.py`` finds them by name: ``<!-- table: bench_pipeline.cpu/ops-paths -->`` renders the
table ``ops-paths`` of ``bench_pipeline`` from ``bench_pipeline.cpu.json``.

Each entry names the section it reads and turns that section's ``figures`` into markdown lines (a table) or one
string (a value). Pure formatting: no torch, no package import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Rendered:
    """How one table or value is made: the ``section`` of the results file it reads, and ``render`` from that
    section's figures to markdown lines (a table) or to a one-line string (a value, ``inline=True``)."""

    section: str
    render: Callable[[dict], list[str] | str]
    inline: bool = False


def number(value: float | None, digits: int = 1) -> str:
    """``1,234.5`` (thousands separated); ``-`` for a missing value."""
    return "-" if value is None else f"{value:,.{digits}f}"


def header(*columns: str, numeric_from: int = 1) -> list[str]:
    """A markdown table's header and rule; columns from ``numeric_from`` on are right-aligned."""
    rule = ["---" if index < numeric_from else "---:" for index in range(len(columns))]
    return ["| " + " | ".join(columns) + " |", "| " + " | ".join(rule) + " |"]


def row(*cells: object) -> str:
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


# ---------------------------------------------------------------------------------------------------- bench_pipeline
PATH_LABELS = {
    "serial": "serial (one window at a time, frames read in the model's loop, fp32, eager sampling)",
    "overlapped": "**overlapped (the default)**",
}


def pipeline_ops_paths(figures: dict) -> list[str]:
    lines = header("path", "all aten ops / output frame", "without views and allocations / output frame")
    for path, counts in figures["paths"].items():
        lines.append(row(PATH_LABELS.get(path, path), number(counts["all"]), number(counts["compute"])))
    return lines


def pipeline_ops_stages(figures: dict) -> list[str]:
    lines = header("stage", "all aten ops", "without views and allocations")
    for stage, counts in figures["stages"].items():
        digits = 0 if float(counts["all"]).is_integer() and float(counts["compute"]).is_integer() else 1
        lines.append(row(stage, number(counts["all"], digits), number(counts["compute"], digits)))
    return lines


def pipeline_ops_overlapped(figures: dict) -> str:
    return number(figures["paths"]["overlapped"]["all"])


OPS_TARGET = 400
"""aten ops per output frame of the overlapped path the command should stay under (CPU, K=30, S=5)."""


def pipeline_ops_target(figures: dict) -> str:
    return "met" if figures["paths"]["overlapped"]["all"] <= OPS_TARGET else "missed"


# ---------------------------------------------------------------------------------------------------- bench_streaming
def streaming_modes(figures: dict) -> list[str]:
    lines = header(
        "mode", "p50 ms", "p95 ms", "p99 ms", "setup s", "aten ops / frame (all / top-level)", "max abs diff to eager"
    )
    for mode, result in figures["modes"].items():
        if "error" in result:
            lines.append(row(mode, f"failed: {result['error'][:120]}", "", "", "", "", ""))
            continue
        ms, difference = result["ms_per_frame"], result.get("max_abs_difference_to_eager")
        lines.append(
            row(
                mode,
                number(ms["p50"]),
                number(ms["p95"]),
                number(ms["p99"]),
                number(result["setup_s"], 2),
                f"{number(result['aten_ops_per_frame'], 0)} / {number(result['top_level_ops_per_frame'], 0)}",
                "-" if difference is None else f"{difference:.1e}",
            )
        )
    baseline = figures["ms_per_frame"]["recompute last W frames"]
    lines.append(
        row(
            "recompute the last W frames per frame",
            number(baseline["p50"]),
            number(baseline["p95"]),
            number(baseline["p99"]),
            "",
            "",
            "",
        )
    )
    return lines


def streaming_eager_ops(figures: dict) -> str:
    return number(figures["modes"]["eager"]["aten_ops_per_frame"], 0)


def streaming_eager_top_level_ops(figures: dict) -> str:
    return number(figures["modes"]["eager"]["top_level_ops_per_frame"], 0)


def streaming_reference_ops(figures: dict) -> str:
    return number(figures["modes"]["reference"]["aten_ops_per_frame"], 0)


def streaming_settings(figures: dict) -> str:
    return f"K={figures['K']}, S={figures['S']} {figures['solver']}, {figures['dtype']}"


# ---------------------------------------------------------------------------------------------------- bench_sampler
def sampler_flops(figures: dict) -> list[str]:
    steps = figures["num_steps"]
    lines = header(
        "K",
        "cached GFLOP / step",
        "recompute GFLOP / step",
        "ratio / step",
        f"cached GFLOP / clip (S={steps}, incl. build)",
        "recompute GFLOP / clip",
        "ratio / clip",
        numeric_from=0,
    )
    for entry in figures["flops"]:
        lines.append(
            row(
                entry["K"],
                number(entry["cached_gflop_per_step"], 3),
                number(entry["recompute_gflop_per_step"], 2),
                f"**{entry['recompute_gflop_per_step'] / entry['cached_gflop_per_step']:.1f}x**",
                number(entry["cached_gflop_per_clip"], 2),
                number(entry["recompute_gflop_per_clip"], 1),
                f"{entry['recompute_gflop_per_clip'] / entry['cached_gflop_per_clip']:.1f}x",
            )
        )
    return lines


def sampler_build_gflop(figures: dict) -> str:
    return number(figures["condition_build_gflop"])


def sampler_recompute_k1_gflop(figures: dict) -> str:
    return next(number(entry["recompute_gflop_per_step"]) for entry in figures["flops"] if entry["K"] == 1)


def sampler_step_ratio(figures: dict) -> str:
    ratios = {entry["recompute_gflop_per_step"] / entry["cached_gflop_per_step"] for entry in figures["flops"]}
    return " to ".join(f"{ratio:.1f}x" for ratio in sorted({round(value, 1) for value in ratios}))


# ---------------------------------------------------------------------------------------------------- bench_solvers
def solvers_known_ode(figures: dict) -> list[str]:
    lines = header(
        "network calls", "Euler (S = calls)", "Heun (S = calls / 2)", "midpoint (S = calls / 2)", numeric_from=0
    )
    for entry in figures["known_ode"]:
        lines.append(row(entry["calls"], f"{entry['euler']:.2e}", f"{entry['heun']:.2e}", f"{entry['midpoint']:.2e}"))
    return lines


# ------------------------------------------------------------------------------------------------ bench_window_modes
def window_mode_median_ratio(mode: str) -> Callable[[dict], str]:
    def render(figures: dict) -> str:
        return f"{figures['modes'][mode]['displacement_median_ratio']:.2f}"

    return render


# ---------------------------------------------------------------------------------------- the shipped model's files
def region_coverage(calibration: dict) -> list[str]:
    """A version-2 ``region_calibration.json``: each level's factor and the coverage it reaches on the frames it
    was fitted on and, when the file holds them, on the held-out split's."""
    held_out = calibration.get("held_out")
    fitted_on, tested_on = calibration["split"].split(" / ")[-1], held_out and held_out["split"].split(" / ")[-1]
    columns = ["nominal q", "factor f_q", f"{fitted_on}: raw spread", f"{fitted_on}: calibrated"]
    columns += [f"{tested_on}: raw spread", f"{tested_on}: calibrated"] if held_out else []
    lines = header(*columns, numeric_from=0)
    for index, level in enumerate(calibration["levels"]):
        cells = [f"{level:.2f}", f"{calibration['factors'][index]:.3f}"]
        for record in (calibration, held_out) if held_out else (calibration,):
            cells += [f"{record['coverage_raw'][index]:.3f}", f"{record['coverage_calibrated'][index]:.3f}"]
        lines.append(row(*cells))
    return lines


def region_factors(calibration: dict) -> str:
    return ", ".join(
        f"f_{level:g} = {factor:.3f}" for level, factor in zip(calibration["levels"], calibration["factors"])
    )


def region_split(calibration: dict) -> str:
    return f"{calibration['split']}, {calibration['clips']} clips, {calibration['frames']:,} frames"


def region_held_out(calibration: dict) -> str:
    held_out = calibration["held_out"]
    return f"{held_out['split']}, {held_out['clips']} clips, {held_out['frames']:,} frames"


def region_held_out_coverage(calibration: dict) -> str:
    covered = calibration["held_out"]["coverage_calibrated"]
    return ", ".join(f"{coverage:.3f} at q = {level:g}" for level, coverage in zip(calibration["levels"], covered))


REGION_CALIBRATION = "region_calibration"
"""The source name of a bundled model's ``region_calibration.json`` (not a results file): ``region_calibration`` the
windowed model's, ``region_calibration.causal`` the causal model's."""

TABLES: dict[tuple[str, str], Rendered] = {
    ("bench_pipeline", "ops-paths"): Rendered("ops", pipeline_ops_paths),
    ("bench_pipeline", "ops-stages"): Rendered("ops", pipeline_ops_stages),
    ("bench_pipeline", "ops-overlapped"): Rendered("ops", pipeline_ops_overlapped, inline=True),
    ("bench_pipeline", "ops-target"): Rendered("ops", pipeline_ops_target, inline=True),
    ("bench_streaming", "bundled-modes"): Rendered("bundled", streaming_modes),
    ("bench_streaming", "bundled-eager-ops"): Rendered("bundled", streaming_eager_ops, inline=True),
    ("bench_streaming", "bundled-eager-top-level-ops"): Rendered("bundled", streaming_eager_top_level_ops, inline=True),
    ("bench_streaming", "bundled-reference-ops"): Rendered("bundled", streaming_reference_ops, inline=True),
    ("bench_streaming", "bundled-settings"): Rendered("bundled", streaming_settings, inline=True),
    ("bench_sampler", "flops"): Rendered("default", sampler_flops),
    ("bench_sampler", "build-gflop"): Rendered("default", sampler_build_gflop, inline=True),
    ("bench_sampler", "recompute-k1-gflop"): Rendered("default", sampler_recompute_k1_gflop, inline=True),
    ("bench_sampler", "step-ratio"): Rendered("default", sampler_step_ratio, inline=True),
    ("bench_solvers", "known-ode"): Rendered("known-ode", solvers_known_ode),
    ("bench_window_modes", "blend-median-ratio"): Rendered("default", window_mode_median_ratio("blend"), inline=True),
    ("bench_window_modes", "coherent-median-ratio"): Rendered(
        "default", window_mode_median_ratio("coherent"), inline=True
    ),
    (REGION_CALIBRATION, "coverage"): Rendered("", region_coverage),
    (REGION_CALIBRATION, "factors"): Rendered("", region_factors, inline=True),
    (REGION_CALIBRATION, "split"): Rendered("", region_split, inline=True),
    (REGION_CALIBRATION, "held-out"): Rendered("", region_held_out, inline=True),
    (REGION_CALIBRATION, "held-out-coverage"): Rendered("", region_held_out_coverage, inline=True),
}
"""Every table and value the docs render: ``(benchmark, name) -> Rendered``."""
