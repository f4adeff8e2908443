"""The GPU suite's ``summary.md``: the device and commit, each call's plan against what ran, every figure against
its target and the paper's, from the steps' JSON files in one or several output folders. Run through
``gpu_suite_tools.py summary``."""

from __future__ import annotations

import json
from pathlib import Path


def load(folder: Path, name: str) -> dict | None:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def missed_targets(out_dir: Path) -> list[str]:
    """``inference`` when any target of an inference run was missed, ``streaming`` when the streamer's was."""
    missed = []
    for name in ("inference.json", "inference-compile.json"):
        figures = load(out_dir, name)
        if figures and not all(figures["targets_met"].values()) and "inference" not in missed:
            missed.append("inference")
    for name in STREAMING_FILES:
        figures = load(out_dir, name)
        if figures and not all(figures["targets_met"].values()) and "streaming" not in missed:
            missed.append("streaming")
    return missed


def test_counts(folder: Path, name: str) -> dict | None:
    import xml.etree.ElementTree as ElementTree

    path = folder / name
    if not path.exists():
        return None
    suites = ElementTree.parse(path).getroot()
    suite = suites if suites.tag == "testsuite" else suites.find("testsuite")
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    counts["failed"] = [
        case.get("classname", "") + "::" + case.get("name", "")
        for case in suite.iter("testcase")
        if case.find("failure") is not None or case.find("error") is not None
    ]
    counts["skip_reasons"] = [
        case.find("skipped").get("message", "") for case in suite.iter("testcase") if case.find("skipped") is not None
    ]
    return counts


def fmt(value, digits: int = 2) -> str:
    return "-" if value is None else (f"{value:.{digits}f}" if isinstance(value, float) else str(value))


def met(flag: bool | None) -> str:
    return "-" if flag is None else ("**met**" if flag else "**missed**")


def header_lines(folders: list[Path]) -> list[str]:
    """The device, commit and versions of the first folder with an environment.json."""
    environments = [e for e in (load(f, "environment.json") for f in folders) if e]
    lines = ["# GPU suite summary", ""]
    for env in environments[:1]:
        source = env.get("source", {})
        tree = (
            "the tree matches it"
            if source.get("tree_matches_record", True) and not source.get("dirty")
            else "the tree differs from it (uncommitted or later changes)"
        )
        hardware = (
            f" (capability {env['capability']}, {env['memory_gib']} GiB, {env['multiprocessors']} SMs)"
            if "capability" in env
            else ""
        )
        lines += [
            f"- device: `{env.get('device')}`{hardware}",
            f"- commit: `{source.get('commit', 'unknown')}`; {tree}; source hash {source.get('tree_hash', '?')[:12]}",
            f"- python {env['python']}, torch {env['torch']} (CUDA {env['cuda']}), transformers "
            f"{env['transformers']}, accelerate {env['accelerate']}, peft {env['peft']}, numpy {env['numpy']}",
        ]
    if any(e.get("device_type") == "cpu" for e in environments):
        lines.append("- **a dry run on the CPU**: the figures check that every step runs, not the targets")
    return lines


def read_tsv(path: Path) -> list[list[str]]:
    return [row.split("\t") for row in path.read_text().splitlines()] if path.exists() else []


def step_lines(folders: list[Path]) -> list[str]:
    """Each call's plan (estimate and limit per step) beside what ran: exit code (or timeout, or skipped) and
    seconds."""
    lines = [
        "",
        "## Steps",
        "",
        "| step | kind | estimate s | limit s | exit code | seconds | command |",
        "| --- | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for folder in folders:
        plan = {row[0]: row[1:] for row in read_tsv(folder / "plan.tsv") if len(row) >= 4}
        budget = next((row[3] for row in plan.values() if len(row) > 3), None)
        total = 0.0
        for row in read_tsv(folder / "status.tsv"):
            step, code, seconds, command = (row + ["", "", "", ""])[:4]
            kind, estimate, limit = (plan.get(step, []) + ["-", "-", "-"])[:3]
            total += float(seconds or 0) if step != "prepare" else 0.0
            lines.append(f"| {step} | {kind} | {estimate} | {limit} | {code} | {seconds} | `{command}` |")
        if budget:
            lines += [
                "",
                f"Budget {budget} s (optional steps start only before it); the steps took {total:.0f} s "
                f"in all (prepare ran in the background).",
            ]
    return lines


def inference_target_rows(label: str, figures: dict) -> list[str]:
    at, targets, paper = figures["at"], figures["targets"], figures["paper"]
    peak = (figures["peak_memory_gb"] or {}).get("fast")
    rows = [
        (
            "encoder ms per clip",
            targets["encoder_ms"],
            figures["encoder_ms"]["fast"],
            paper["encoder_ms"],
            "encoder_ms",
        ),
        (
            f"sampler ms per clip (K={at['K']}, S={at['S']})",
            targets["sampler_ms"],
            at["sampler_ms"]["fast"],
            None,
            "sampler_ms",
        ),
        (
            f"end to end ms per frame (K={at['K']}, S={at['S']})",
            targets["ms_per_frame"],
            at["ms_per_frame"]["fast"],
            paper["ms_per_frame_k30_s5"],
            "ms_per_frame",
        ),
        ("peak memory GB, one clip", targets["peak_memory_gb"], peak, paper["peak_memory_gb"], "peak_memory_gb"),
    ]
    lines = []
    for name, target, ours, theirs, key in rows:
        ratio = None if ours is None or theirs is None else ours / theirs
        lines.append(
            f"| {name} | {label} | {fmt(target)} | {fmt(ours, 3)} | {fmt(theirs)} | {fmt(ratio, 4)} | "
            f"{met(figures['targets_met'][key])} |"
        )
    return lines


STREAMING_FILES = {
    "streaming.json": "paper geometry",
    "streaming-compile.json": "paper geometry, compiled",
    "streaming-bundled.json": "bundled size",
}


def streaming_target_row(label: str, streaming: dict) -> str:
    """One streamer run: its best mode's p99 against the target, with p50, p95, aten ops per frame and peak memory
    where the benchmark reports them."""
    total = streaming["ms_per_frame"].get("streamer, total")
    if not total:
        return f"| causal streamer, {label}: no mode ran | {streaming.get('dtype', '')} | | | | | |"
    mode = f"{streaming['primary_mode']}; " if streaming.get("primary_mode") else ""
    extra = [f"{mode}p50 {total['p50']:.2f}", f"p95 {total['p95']:.2f}"]
    if streaming.get("ops_per_frame") is not None:
        extra.append(f"{streaming['ops_per_frame']:,.0f} ops/frame")
    if streaming.get("peak_memory_gb") is not None:
        extra.append(f"peak {streaming['peak_memory_gb']:.2f} GB")
    return (
        f"| causal streamer p99 ms per frame, {label} (K={streaming['K']}, S={streaming['S']}; "
        f"{', '.join(extra)}) | {streaming['dtype']} | {streaming['target_p99_ms']} | {total['p99']:.2f} | - | - "
        f"| {met(streaming['targets_met']['p99_ms'])} |"
    )


def streaming_mode_lines(label: str, streaming: dict) -> list[str]:
    """bench_streaming.py's modes side by side (the previous streamer, the static step eager, captured, compiled)."""
    if not streaming.get("modes"):
        return []
    lines = [
        "",
        f"## Causal streamer by mode, {label} (K={streaming['K']}, S={streaming['S']}, {streaming['dtype']}; "
        f"best: {streaming.get('primary_mode')})",
        "",
        "| mode | p50 ms | p95 ms | p99 ms | setup s | aten ops / frame | CUDA kernels / frame | peak GB | "
        "max abs diff to eager |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, row in streaming["modes"].items():
        if "error" in row:
            lines.append(f"| {mode} | failed: {row['error'][:200]} | | | | | | | |")
            continue
        ms, difference = row["ms_per_frame"], row.get("max_abs_difference_to_eager")
        difference = "-" if difference is None else f"{difference:.1e}"
        lines.append(
            f"| {mode} | {ms['p50']:.2f} | {ms['p95']:.2f} | {ms['p99']:.2f} | {row['setup_s']:.1f} | "
            f"{row['aten_ops_per_frame']:.0f} | {fmt(row.get('cuda_kernels_per_frame'), 0)} | "
            f"{fmt(row.get('peak_memory_gb'))} | {difference} |"
        )
    return lines


def target_lines(first) -> list[str]:
    lines = [
        "",
        "## Targets (set for one H100; measured on the device above; bf16, K=30, S=5)",
        "",
        "| figure | path | target | ours | paper | ours / paper | |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for label, name in (("eager", "inference.json"), ("compiled", "inference-compile.json")):
        figures = first(name)
        if figures:
            lines += inference_target_rows(label, figures)
    for name, label in STREAMING_FILES.items():
        streaming = first(name)
        if streaming:
            lines.append(streaming_target_row(label, streaming))
    predict = first("predict.json") or {}
    for name, run in predict.get("runs", {}).items():
        if run.get("exit_code") == 0:
            video = run.get("video") or predict.get("video", "")
            lines.append(
                f"| gazeflow predict --no-overlay frames per second ({video}) | {name} | - | "
                f"{run['frames_per_second']:.1f} | 88 (Table method_time, K=30, S=5) | "
                f"{run['frames_per_second'] / 88:.2f} | |"
            )
        else:
            lines.append(
                f"| gazeflow predict --no-overlay ({run.get('video', '')}) | {name} | - | exit "
                f"{run.get('exit_code')} | | | |"
            )
    for name, run in predict.get("batch", {}).items():
        if run.get("exit_code") == 0:
            lines.append(
                f"| gazeflow predict --no-overlay FOLDER --num-processes {run['processes']}, frames per second of "
                f"the predicting time ({run['frames_per_second_wall']:.1f} of the command's wall time) | {name} | - | "
                f"{run['frames_per_second']:.1f} | 88 (Table method_time, K=30, S=5) | "
                f"{run['frames_per_second'] / 88:.2f} | |"
            )
        else:
            lines.append(f"| gazeflow predict --no-overlay FOLDER | {name} | - | exit {run.get('exit_code')} | | | |")
    return lines


PIPELINE_TARGET_FPS = {
    ("bundled", "256x256"): 1000,
    ("bundled", "640x480"): 1000,
    ("paper", "256x256"): 400,
    ("paper", "640x480"): 300,
}
"""frames per second that gazeflow predict --no-overlay's path should reach on one H100 (model, video size)."""
PAPER_FPS = 88  # Table method_time: GazeFlow at K=30, S=5


def pipeline_lines(pipeline: dict | None) -> list[str]:
    """bench_pipeline.py --throughput: each model, size and path (serial, overlapped) side by side."""
    runs = ((pipeline or {}).get("throughput") or {}).get("runs")
    if not runs:
        return []
    figures = pipeline["throughput"]
    lines = [
        "",
        f"## Pipeline: gazeflow predict --no-overlay's path (bench_pipeline.py --throughput; "
        f"K={figures['K']}, S={figures['S']}, {figures['seconds']:g} s videos at 24 fps)",
        "",
        "| model | size | path | dtype | frames / s | target | / paper's 88 | ms / frame | stages s |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for run in runs:
        target = PIPELINE_TARGET_FPS.get((run["model"], run["size"]))
        stages = ", ".join(f"{name} {seconds:.2f}" for name, seconds in run.get("stages_s", {}).items())
        lines.append(
            f"| {run['model']} | {run['size']} | {run['path']} | {run['dtype']} | "
            f"{run['frames_per_second']:.0f} | {fmt(target)} | {run['frames_per_second'] / PAPER_FPS:.2f} | "
            f"{run['ms_per_frame']:.2f} | {stages} |"
        )
    return lines


def decode_lines(figures: dict | None) -> list[str]:
    """bench_decode.py: ms per frame of each decoder at each size on the machine's cores, and several videos decoded
    side by side."""
    decode = (figures or {}).get("decode")
    if not decode:
        return []
    rows = decode["ms_per_frame"]
    names = list(dict.fromkeys(name for row in rows.values() for name in row))
    lines = [
        "",
        f"## Decoding to RGB uint8, ms / frame (bench_decode.py; {decode['frames']} frames, {decode['cores']} cores)",
        "",
        "| decoder | " + " | ".join(rows) + " |",
        "| --- |" + " ---: |" * len(rows),
    ]
    lines += [f"| {n} | " + " | ".join(fmt(row.get(n)) for row in rows.values()) + " |" for n in names]
    lines += [f"\n{why}" for why in decode.get("unavailable", [])]
    batch = figures.get("decode-batch")
    if batch:
        lines += [
            "",
            f"{batch['videos']} videos of {batch['size']} decoded: "
            + ", ".join(f"{name} {value:.2f} ms / frame" for name, value in batch["ms_per_frame"].items()),
        ]
    return lines


def inference_table_lines(label: str, figures: dict) -> list[str]:
    """Table ks_grid and Table method_time of one inference run, and the fast path against the reference."""
    lines = []
    grid = figures.get("sampler_ms_grid") or {}
    if grid and figures.get("ks_grid_ratio_to_paper"):
        columns = list(grid[next(iter(grid))])
        lines += [
            "",
            f"## Table ks_grid, {label}: our end-to-end ms per 64-frame clip / the paper's",
            "",
            "| K \\ S | " + " | ".join(columns) + " |",
            "| --- |" + " ---: |" * len(columns),
        ]
        ratios = figures["ks_grid_ratio_to_paper"]
        for k, row in grid.items():
            cells = [
                f"{figures['encoder_ms']['fast'] + ms:.1f} ms ({ratios.get(k, {}).get(s, float('nan')):.4f})"
                for s, ms in row.items()
            ]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
    if figures.get("method_time_ours_ms_per_frame"):
        lines += [
            "",
            f"## Table method_time, {label} (ms per frame)",
            "",
            "| method | paper | ours | ours / paper |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, theirs in figures["paper"]["method_ms_per_frame"].items():
            ours = figures["method_time_ours_ms_per_frame"].get(name)
            ratio = None if ours is None else ours / theirs
            lines.append(f"| {name} | {theirs} | {fmt(ours, 3)} | {fmt(ratio, 4)} |")
    at = figures["at"]
    lines += [
        "",
        f"Fast vs reference ({label}, K={at['K']}, S={at['S']}): encoder "
        f"{figures['encoder_ms']['reference'] / figures['encoder_ms']['fast']:.1f}x, sampler "
        f"{at['sampler_ms']['reference'] / at['sampler_ms']['fast']:.1f}x, end to end "
        f"{at['ms_per_frame']['reference'] / at['ms_per_frame']['fast']:.1f}x; trajectories differ by "
        f"{at['max_abs_difference']:.1e}; GazeFlowModel.generate {figures['generate_ms_per_frame']:.3f} "
        f"ms per frame.",
    ]
    return lines


def train_lines(train: dict | None) -> list[str]:
    """bench_train.py's own report."""
    if not train or not train.get("report"):
        return []
    return [""] + train["report"].rstrip("\n").splitlines()


def tests_and_profile_lines(folders: list[Path]) -> list[str]:
    lines = []
    for folder in folders:
        counts = test_counts(folder, "tests.xml")
        if counts:
            lines += (
                [
                    "",
                    f"## tests/gpu: {counts['tests']} tests, {counts['failures'] + counts['errors']} failed, "
                    f"{counts['skipped']} skipped",
                ]
                + [f"- failed: `{name}`" for name in counts["failed"]]
                + [f"- skipped: {reason}" for reason in counts["skip_reasons"]]
            )
        full = test_counts(folder, "fulltests.xml")
        if full:
            lines += [
                "",
                f"## whole suite with CUDA visible: {full['tests']} tests, "
                f"{full['failures'] + full['errors']} failed, {full['skipped']} skipped",
            ]
    for folder in folders:
        for name in ("profile-inference.json", "profile-streaming.json"):
            figures = load(folder, name)
            if figures and figures.get("profile"):
                lines += [
                    "",
                    f"## Profile ({name[:-5]}): where the time goes",
                    "",
                    "| op | calls | device ms | CPU ms |",
                    "| --- | ---: | ---: | ---: |",
                ]
                lines += [
                    f"| `{row['name']}` | {row['calls']} | {fmt(row['device_ms'])} | {row['cpu_ms']:.2f} |"
                    for row in figures["profile"]
                ]
    return lines


def summary(folders: list[Path], output: Path) -> str:
    """One markdown page from the suite's output folders (one call of the device tool, or several merged)."""

    def first(name: str) -> dict | None:
        return next((figures for figures in (load(f, name) for f in folders) if figures), None)

    lines = header_lines(folders) + step_lines(folders) + target_lines(first)
    for name, label in STREAMING_FILES.items():
        lines += streaming_mode_lines(label, first(name) or {})
    lines += pipeline_lines(first("pipeline.json")) + decode_lines(first("decode.json"))
    lines += train_lines(first("train.json"))
    for label, name in (("eager", "inference.json"), ("compiled", "inference-compile.json")):
        figures = first(name)
        if figures:
            lines += inference_table_lines(label, figures)
    lines += tests_and_profile_lines(folders)
    text = "\n".join(lines) + "\n"
    output.write_text(text)
    return text
