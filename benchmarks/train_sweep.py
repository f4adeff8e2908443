"""What ``bench_train.py``'s sweep measures and how it reports it: the variants of the training step (``B<n>`` joined
with ``ckpt``, ``fast``, ``compile``, ``graphs``, ``nodrop``, ``probe``, ``adamw=...``, ``sdpa=...``), the reference
rates (the 60e8cbe probe, the paper's GPU-hours), the GPU-hours of 80 epochs at a rate, and the report's tables."""

from __future__ import annotations

from dataclasses import dataclass

EGTEA_TRAIN_CLIPS = 8299  # split 1 (data spec, "EGTEA Gaze+")
EGO4D_TRAIN_CLIPS = 15310  # GLC's train_ego4d_gaze.csv (data spec, "Ego4D gaze subset")
EPOCHS = 80  # paper Appendix E.4
PAPER_GPU_HOURS = {"EGTEA Gaze+": 3 * 24 * 4, "Ego4D": 5 * 24 * 4}  # "~3 days ... ~5 days, both on 4x H100"
PROBE_60E8CBE = {"B1+probe": 5.3, "B4+probe": 7.5, "B4+ckpt+probe": 5.3, "B8+ckpt+probe": 5.8}  # clips/s, H100
GPU_VARIANTS = [
    "B1+probe",
    "B4+probe",
    "B4+ckpt+probe",
    "B8+ckpt+probe",
    "B4",
    "B4+fast",
    "B8+fast",
    "B8+fast+ckpt",
    "B16+fast+ckpt",
    "B4+fast+compile",
    "B8+fast+compile",
    "B8+fast+compile+sdpa=cudnn",
    "B8+fast+compile+sdpa=flash",
    "B8+fast+compile+graphs",
    "B8+fast+compile+nodrop",
]
#: the candidates a CPU can run (``--preset paper16``): the optimizer's implementations, the attention's math kernel
#: against the default one, LoRA without dropout; each against the first
CPU_CANDIDATES = ["B1", "B1+adamw=foreach", "B1+adamw=fused", "B1+sdpa=math", "B1+nodrop"]
TINY_VARIANTS = ["B2+probe", "B2", "B2+adamw=fused", "B2+sdpa=math", "B2+fast+ckpt", "B2+fast+compile"]


#: the ``key=value`` tokens of a variant and the values each takes (``device_speed``'s names)
VALUED_TOKENS = {"adamw": ("fused", "foreach", "loop"), "sdpa": ("flash", "cudnn", "efficient", "math")}
FLAG_TOKENS = ("ckpt", "fast", "compile", "graphs", "nodrop", "probe")


@dataclass(frozen=True)
class Variant:
    """A training step's settings, parsed from ``B<n>`` joined by ``+`` with any of :data:`FLAG_TOKENS` and
    ``key=value`` tokens (:data:`VALUED_TOKENS`): ``adamw=`` PyTorch's AdamW implementation, ``sdpa=`` the attention
    kernel tried first, ``graphs`` the compiled layers as CUDA graphs (torch.compile's ``reduce-overhead``; needs
    ``compile``), ``nodrop`` LoRA without dropout (another recipe: what the adapters' dropout costs)."""

    name: str
    batch: int
    checkpointing: bool
    fast: bool
    compile: bool
    probe: bool
    graphs: bool = False
    no_lora_dropout: bool = False
    optimizer: str | None = None
    attention: str | None = None

    @classmethod
    def parse(cls, text: str) -> Variant:
        tokens = text.split("+")
        batch = [t for t in tokens if t.startswith("B") and t[1:].isdigit() and int(t[1:]) > 0]
        valued = dict(t.split("=", 1) for t in tokens if "=" in t)
        unknown = [
            t
            for t in tokens
            if t not in FLAG_TOKENS
            and t not in batch
            and not ("=" in t and t.split("=", 1)[1] in VALUED_TOKENS.get(t.split("=", 1)[0], ()))
        ]
        if (
            len(batch) != 1
            or unknown
            or len(set(tokens)) != len(tokens)
            or len(valued) != sum("=" in t for t in tokens)
        ):
            choices = ", ".join(f"{key}={'|'.join(values)}" for key, values in VALUED_TOKENS.items())
            raise ValueError(
                f"--variants: {text!r} must be B<clips> joined with any of {sorted(FLAG_TOKENS)} and {choices} by '+' "
                f"(each once), e.g. B8+fast+compile+sdpa=cudnn"
            )
        if "graphs" in tokens and "compile" not in tokens:
            raise ValueError(f"--variants: {text!r}: 'graphs' (CUDA graphs of the compiled layers) needs 'compile'")
        return cls(
            text,
            int(batch[0][1:]),
            "ckpt" in tokens,
            "fast" in tokens,
            "compile" in tokens,
            "probe" in tokens,
            graphs="graphs" in tokens,
            no_lora_dropout="nodrop" in tokens,
            optimizer=valued.get("adamw"),
            attention=valued.get("sdpa"),
        )

    @property
    def compile_key(self) -> tuple:
        """What a compiled graph of the step depends on beyond the model: the attention kernel, the compile mode."""
        return (self.attention, self.graphs)


def fastest(results: dict, exclude_probe: bool = True) -> str | None:
    rates = {
        name: r["clips_per_s"]
        for name, r in results.items()
        if "clips_per_s" in r and not (exclude_probe and Variant.parse(name).probe)
    }
    return max(rates, key=rates.get) if rates else None


def train_clip_counts(extra: dict[str, int] | None = None) -> dict[str, int]:
    """Training clips per dataset: EGTEA Gaze+ and Ego4D (the data spec's counts) and any ``extra`` (a dataset whose
    count depends on what was downloaded, e.g. Ego-Exo4D's training windows as a build has them)."""
    return {"EGTEA Gaze+": EGTEA_TRAIN_CLIPS, "Ego4D": EGO4D_TRAIN_CLIPS, **(extra or {})}


def parse_train_clips(text: str) -> tuple[str, int]:
    """``--train-clips NAME=N``: a dataset's name and its number of training clips (a positive integer)."""
    name, _, count = text.rpartition("=")
    if not name.strip() or not count.strip().isdigit() or int(count) <= 0:
        raise ValueError(f"--train-clips: expected NAME=N with N a positive number of clips, got {text!r}")
    return name.strip(), int(count)


def gpu_hours(clips_per_s: float, extra_clips: dict[str, int] | None = None) -> dict[str, float]:
    """GPU-hours of :data:`EPOCHS` epochs of each dataset's training clips at ``clips_per_s``."""
    return {name: count * EPOCHS / clips_per_s / 3600 for name, count in train_clip_counts(extra_clips).items()}


def format_row(result: dict) -> str:
    if "error" in result:
        return result["error"]
    peak = result.get("peak_gb")
    return f"{result['s_per_step']:.3f} s/step, {result['clips_per_s']:.2f} clips/s" + (
        f", peak {peak:.1f} GB" if peak is not None else ""
    )


def format_ops(ops: dict | None) -> str:
    """Aten ops of one step, ``all (compute)``, and the CUDA kernels where counted; ``-`` when not counted."""
    if not ops:
        return "-"
    kernels = f", {ops['cuda_kernels']} kernels" if ops.get("cuda_kernels") is not None else ""
    return f"{ops['all']} ({ops['compute']}){kernels}"


def model_table(results: dict, flops_per_clip: float | None) -> list[str]:
    """One row per model-only variant, side by side: the rate, its ratio to the first variant's, and the ops one step
    dispatches (``format_ops``)."""
    lines = [
        "| variant | clips / step | checkpointing | bf16 frozen weights, fused AdamW | compiled | step | s / step | "
        "clips / s | x first | peak GB | model TFLOP/s | aten ops / step (compute) | 60e8cbe probe clips / s |",
        "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    first = next((r["clips_per_s"] for r in results.values() if "clips_per_s" in r), None)
    for name, result in results.items():
        v = Variant.parse(name)
        flags = ["yes" if flag else "no" for flag in (v.checkpointing, v.fast, v.compile)]
        kind = "probe (no clip, no EMA)" if v.probe else "train.py"
        if "error" in result:
            lines.append(f"| {name} | {v.batch} | {' | '.join(flags)} | {kind} | {result['error']} | | | | | | |")
            continue
        tflops = flops_per_clip * result["clips_per_s"] / 1e12 if flops_per_clip else None
        peak = "-" if result["peak_gb"] is None else f"{result['peak_gb']:.1f}"
        lines.append(
            f"| {name} | {v.batch} | {' | '.join(flags)} | {kind} | {result['s_per_step']:.3f} | "
            f"{result['clips_per_s']:.2f} | {result['clips_per_s'] / first:.2f} | {peak} | "
            f"{'-' if tflops is None else f'{tflops:.3g}'} | {format_ops(result.get('ops'))} | "
            f"{PROBE_60E8CBE.get(name, '-')} |"
        )
    return lines


def profile_lines(name: str, profile: dict) -> list[str]:
    """Where the ops of one step of variant ``name`` go (``train_step.step_profile``)."""

    def listed(counts: dict) -> str:
        return ", ".join(f"{key} {count:,}" for key, count in counts.items()) or "none"

    total = sum(profile["by_phase"].values())
    return [
        f"Where one step's ops go ({name}; compute ops our Python dispatched, top level, no views or allocations: "
        f"{total:,}):",
        "",
        f"- by phase: {listed(profile['by_phase'])}",
        f"- the forward by part of the model: {listed(profile['forward_by_part'])}",
        f"- the backward by autograd node (the largest): {listed(profile['backward_by_node'])}",
        f"- ops that read a value back to the host (on a GPU each waits for the queue): "
        f"{listed(profile['host_syncs_by_phase'])}",
    ]


def data_tables(data: dict, model_results: dict) -> list[str]:
    cost = data["collator"]
    lines = [
        f"Clips: {data['clips']} EGTEA Gaze+ layout clips of {data['frames']} frames at {data['size']}, 24 fps "
        f"({data['windows']} training windows; prepared in {data['seconds_to_prepare']:.1f} s). The collator, "
        f"per window on one core: decode {1e3 * cost['decode_cpu_s']:.0f} ms + resize and normalise "
        f"{1e3 * cost['process_cpu_s']:.0f} ms of CPU = {cost['clips_per_s_per_worker']:.2f} clips/s per "
        f"worker.",
        "",
        "| loader alone (pinned batches on the host) | clips / s | first round s |",
        "| --- | ---: | ---: |",
    ]
    lines += [
        f"| {r['workers']} workers | {r['clips_per_s']:.2f} | {r['first_round_s']:.1f} |" for r in data["loader_alone"]
    ]
    alone = {r["workers"]: r["clips_per_s"] for r in data["loader_alone"]}
    lines += [
        "",
        "| data-fed step | workers | clips / s | model only clips / s | loader alone clips / s | fed / model only |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for fed in data["fed"]:
        if "error" in fed:
            lines.append(f"| {fed['variant']} | {fed['workers']} | {fed['error']} | | | |")
            continue
        model = model_results.get(fed["variant"], {}).get("clips_per_s")
        ratio = "-" if not model else f"{fed['clips_per_s'] / model:.2f}"
        lines.append(
            f"| {fed['variant']} | {fed['workers']} | {fed['clips_per_s']:.2f} | "
            f"{'-' if model is None else f'{model:.2f}'} | "
            f"{alone.get(fed['workers'], float('nan')):.2f} | {ratio} |"
        )
    return lines


def hours_table(model_results: dict, data: dict | None, extra_clips: dict[str, int] | None = None) -> list[str]:
    rows = [("60e8cbe probe, B4, model only (H100)", PROBE_60E8CBE["B4+probe"])]
    best = fastest(model_results)
    if best:
        rows.append((f"this run, model only, {best}", model_results[best]["clips_per_s"]))
    fed = [r for r in (data or {}).get("fed", []) if "clips_per_s" in r]
    if fed:
        top = max(fed, key=lambda r: r["clips_per_s"])
        rows.append((f"this run, fed by the data path, {top['variant']}, {top['workers']} workers", top["clips_per_s"]))
    rows.append(("target", 15.0))
    counts = train_clip_counts(extra_clips)
    columns = "".join(f" {name} ({count:,} clips) GPU-h |" for name, count in counts.items())
    lines = [f"| 80 epochs on one GPU at | clips / s |{columns}", "| --- | ---: |" + " ---: |" * len(counts)]
    for label, rate in rows:
        hours = gpu_hours(rate, extra_clips)
        lines.append(f"| {label} | {rate:.2f} |" + "".join(f" {hours[name]:.1f} |" for name in counts))
    paper = "".join(f" {PAPER_GPU_HOURS.get(name, '-')} |" for name in counts)
    lines.append(f"| the paper: ~3 days (EGTEA Gaze+) and ~5 days (Ego4D) on 4x H100 | - |{paper}")
    return lines


def report(figures: dict) -> str:
    lines = [f"## Training throughput ({figures['device']}, {figures['preset']} geometry: {figures['geometry']})", ""]
    flops = figures.get("flops_per_clip")
    if flops:
        lines += [
            f"One training step costs {flops / 1e12:.3g} TFLOP per clip (matrix products and attention, "
            f"forward and backward, counted by torch.utils.flop_counter).",
            "",
        ]
    lines += ["Model only (random inputs, no data loading):", ""] + model_table(figures.get("model_only", {}), flops)
    profiled = [(name, r["profile"]) for name, r in figures.get("model_only", {}).items() if r.get("profile")]
    if profiled:
        lines += ["", *profile_lines(*profiled[0])]
    if figures.get("data"):
        lines += ["", "Through the data path:", ""] + data_tables(figures["data"], figures.get("model_only", {}))
    lines += ["", "GPU-hours:", ""] + hours_table(
        figures.get("model_only", {}), figures.get("data"), figures.get("train_clips")
    )
    if figures["skipped"]:
        lines += ["", f"Skipped for the time limit: {', '.join(figures['skipped'])}."]
    return "\n".join(lines) + "\n"
