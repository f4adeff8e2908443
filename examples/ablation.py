#!/usr/bin/env python
"""Train and evaluate GazeFlow's ablation variants and write the ablation tables in the paper's columns.

Each variant is one set of config switches (paper Section 4.4-4.5, Appendix F.4; ``GazeFlowConfig``) over the same
base config, trained by ``examples/train.py`` with the frozen-encoder protocol (no LoRA, encoder features cached
once) and scored by ``examples/evaluate.py`` under the paper's protocol. Then the full model (and the diffusion
variant, if trained) are re-evaluated over S: Euler and Heun at S in --sweep_steps, Euler also at 2S (equal network
calls), DDIM at S for diffusion.

    python examples/ablation.py --data_dir data/synthetic --dataset_config small --output_dir runs/ablation
    python examples/ablation.py ... --variants full regression no_task_cross_attention no_rope --max_train_steps 2000
    python examples/ablation.py ... --variants pe_compare k_sweep      # Tables pe_compare and k_sweep (Appendix F)

Writes ``<output_dir>/ablation.md`` (the tables, each with the commands that made it) and ``ablation.json``; every
variant's model and ``results.json`` stay under ``<output_dir>/<variant>/``. Runs are skipped when their
``results.json`` already exists (rerun with --overwrite), so an interrupted sweep resumes.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent

VARIANTS: dict[str, tuple[str, str]] = {
    # name: (row label as in the paper's tables, config switches)
    "full": ("Full", ""),
    "no_visual_cross_attention": ("- Bottom-up Visual Feature", "use_visual_cross_attention=False"),
    "no_task_cross_attention": ("- Top-down Task Guidance", "use_task_cross_attention=False"),
    "no_rope": ("- Temporal RoPE", "position_encoding=none"),
    "regression": ("- Joint Distribution Modeling (regression)", "objective=regression,num_samples=1"),
    "learned_pe": ("Learnable PE", "position_encoding=learned"),
    "concat": ("Concat task guidance", "task_guidance=concat"),
    "pooled_only": ("Pooled token only (M=0)", "num_task_queries=0"),
    "diffusion": ("Diffusion (DDIM)", "objective=diffusion"),
    "causal": ("Causal", "causal=True"),
    # Table k_sweep: M learnable task queries, the global pool token kept
    **{f"task_queries_{m}": (f"M={m}", f"num_task_queries={m}") for m in (1, 2, 4, 8, 16)},
}
DEFAULT_VARIANTS = ("full", "no_visual_cross_attention", "no_task_cross_attention", "no_rope", "regression")
#: names that stand for a paper table's variants in --variants
VARIANT_GROUPS: dict[str, tuple[str, ...]] = {
    "ablation": DEFAULT_VARIANTS,
    "pe_compare": ("full", "pooled_only", "concat", "learned_pe"),
    "k_sweep": tuple(f"task_queries_{m}" for m in (1, 2, 4, 8, 16)),
}
#: Table pe_compare's rows (its own labels) and columns
PE_COMPARE_ROWS = {
    "full": "Default",
    "pooled_only": "w/o Learnable Queries",
    "concat": "Concat",
    "learned_pe": "Learnable PE",
}

ABLATION_COLUMNS = (
    ("AUC", "auc", 1.0, 3),
    ("F1", "f1", 1.0, 3),
    ("P", "precision", 1.0, 3),
    ("R", "recall", 1.0, 3),
    ("AAE", "aae", 1.0, 2),
    ("ADE (x10^2 px)", "ade_mean", 1e-2, 3),
    ("DTW (x10^2 px)", "dtw_mean", 1e-2, 3),
    ("Disp Mean (x H)", "displacement_mean_ratio", 1.0, 2),
    ("Disp Med (x H)", "displacement_median_ratio", 1.0, 2),
    ("JSD", "displacement_jsd", 1.0, 4),
)
#: the columns of Tables pe_compare and k_sweep
SHORT_COLUMNS = ABLATION_COLUMNS[:5]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="synthetic clips are rendered here if absent")
    parser.add_argument("--dataset_config", default="small", help="synthetic builder config: tiny/small/default/large")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument(
        "--variants",
        nargs="+",
        default=list(DEFAULT_VARIANTS),
        choices=sorted(VARIANTS) + sorted(VARIANT_GROUPS),
        help="variants to train and score; a table's name stands for its variants: ablation "
        "(Table ablation, the default), pe_compare (Default / w/o learnable queries / concat / "
        "learnable PE) and k_sweep (M = 1, 2, 4, 8, 16 task queries)",
    )
    parser.add_argument(
        "--config_preset",
        choices=["paper", "tiny"],
        default="tiny",
        help="base config of every variant (tiny: CPU-sized; paper: ViT-L + d=256)",
    )
    parser.add_argument(
        "--config_overrides",
        default="",
        help="key=value over the preset for every variant, e.g. 'hidden_size=64,num_frames=16'",
    )
    parser.add_argument("--max_train_steps", type=int, default=1000)
    parser.add_argument("--per_device_train_batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--num_samples", type=int, default=None, help="K at evaluation (default: the config's)")
    parser.add_argument("--num_steps", type=int, default=None, help="S at evaluation (default: the config's)")
    parser.add_argument(
        "--sweep_steps", type=int, nargs="*", default=[1, 2, 3, 5], help="S of the solver sweep (empty: no sweep)"
    )
    parser.add_argument("--max_clips", type=int, default=None, help="evaluate the first N test clips only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--dry_run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    args.variants = expand_variants(args.variants)
    return args


def expand_variants(names: list[str]) -> list[str]:
    """``--variants`` with table names replaced by their variants, each variant once, in the order given."""
    expanded: list[str] = []
    for name in names:
        for variant in VARIANT_GROUPS.get(name, (name,)):
            if variant not in expanded:
                expanded.append(variant)
    return expanded


def run(command: list[str], dry_run: bool) -> None:
    print("$ " + shlex.join(command), flush=True)
    if not dry_run:
        subprocess.run(command, check=True)


def train_command(args: argparse.Namespace, variant: str, model_dir: Path) -> list[str]:
    overrides = ",".join(filter(None, [args.config_overrides, VARIANTS[variant][1]]))
    command = [
        sys.executable,
        str(EXAMPLES / "train.py"),
        "--dataset_name",
        "synthetic",
        "--data_dir",
        args.data_dir,
        "--dataset_config",
        args.dataset_config,
        "--output_dir",
        str(model_dir),
        "--config_preset",
        args.config_preset,
        "--no-use_lora",
        "--cache_features",
        "--max_train_steps",
        str(args.max_train_steps),
        "--per_device_train_batch_size",
        str(args.per_device_train_batch_size),
        "--learning_rate",
        str(args.learning_rate),
        "--seed",
        str(args.seed),
        "--dataloader_num_workers",
        "0",
        # one cache per encoder-token layout, shared by the variants (same seed: same frozen encoder)
        "--feature_cache_dir",
        str(Path(args.output_dir) / "feature_cache" / ("causal" if variant == "causal" else "bidirectional")),
    ]
    return command + (["--config_overrides", overrides] if overrides else [])


def evaluate_command(
    args: argparse.Namespace,
    variant: str,
    model_dir: Path,
    out_dir: Path,
    name: str,
    num_steps: int | None = None,
    solver: str | None = None,
) -> list[str]:
    command = [
        sys.executable,
        str(EXAMPLES / "evaluate.py"),
        "--model_name_or_path",
        str(model_dir),
        "--dataset_name",
        "synthetic",
        "--data_dir",
        args.data_dir,
        "--dataset_config",
        args.dataset_config,
        "--split",
        "test",
        "--seed",
        str(args.seed),
        "--method_name",
        name,
        "--output_dir",
        str(out_dir),
    ]
    if args.num_samples and variant != "regression":  # the regression head gives K = 1
        command += ["--num_samples", str(args.num_samples)]
    steps = num_steps or args.num_steps
    if steps:
        command += ["--num_steps", str(steps)]
    if solver:
        command += ["--solver", solver]
    if args.max_clips:
        command += ["--max_clips", str(args.max_clips)]
    return command


def evaluated(args: argparse.Namespace, command: list[str], out_dir: Path) -> dict | None:
    results = out_dir / "results.json"
    if args.overwrite or not results.exists():
        run(command, args.dry_run)
    else:
        print(f"(kept {results})")
    return None if args.dry_run else json.loads(results.read_text())


def cell(metrics: dict, key: str, scale: float, digits: int) -> str:
    value = metrics.get(key)
    return "-" if value is None or value != value else f"{value * scale:.{digits}f}"


def ablation_table(rows: dict[str, dict], columns=ABLATION_COLUMNS, first: str = "Variant") -> str:
    lines = [f"| {first} | " + " | ".join(c[0] for c in columns) + " |", "| --- |" + " ---: |" * len(columns)]
    for label, metrics in rows.items():
        lines.append(f"| {label} | " + " | ".join(cell(metrics, k, s, d) for _, k, s, d in columns) + " |")
    return "\n".join(lines)


def paper_tables(metrics: dict[str, dict]) -> str:
    """Tables ablation, pe_compare and k_sweep from ``{variant: metrics}``: each with the rows that were run (a
    table is left out when fewer than two of its variants were)."""
    sections = []
    ablation = {
        VARIANTS[v][0]: m
        for v, m in metrics.items()
        if v not in VARIANT_GROUPS["k_sweep"] and v not in ("pooled_only", "concat", "learned_pe")
    }
    if ablation:
        sections.append(ablation_table(ablation))
    pe_compare = {PE_COMPARE_ROWS[v]: metrics[v] for v in VARIANT_GROUPS["pe_compare"] if v in metrics}
    if len(pe_compare) >= 2:
        sections.append("### Table pe_compare\n\n" + ablation_table(pe_compare, SHORT_COLUMNS))
    k_sweep = {VARIANTS[v][0].removeprefix("M="): metrics[v] for v in VARIANT_GROUPS["k_sweep"] if v in metrics}
    if len(k_sweep) >= 2:
        sections.append(
            "### Table k_sweep (M learnable task queries, the pool token kept)\n\n"
            + ablation_table(k_sweep, SHORT_COLUMNS, first="M")
        )
    return "\n\n".join(sections)


def sweep_table(rows: list[tuple[str, int, int, dict]]) -> str:
    lines = ["| sampler | S | network calls | F1 | AUC | AAE | JSD | s per clip |", "| --- |" + " ---: |" * 7]
    for sampler, steps, calls, results in rows:
        m = results["metrics"]
        lines.append(
            f"| {sampler} | {steps} | {calls} | {cell(m, 'f1', 1, 3)} | {cell(m, 'auc', 1, 3)} | "
            f"{cell(m, 'aae', 1, 2)} | {cell(m, 'displacement_jsd', 1, 4)} | "
            f"{results.get('seconds_per_clip', float('nan')):.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    output = Path(args.output_dir)
    output.mkdir(parents=True, exist_ok=True)
    commands: list[str] = []
    rows: dict[str, dict] = {}
    by_variant: dict[str, dict] = {}
    for variant in args.variants:
        model_dir = output / variant / "model"
        command = train_command(args, variant, model_dir)
        if args.overwrite or not (model_dir / "config.json").exists():
            run(command, args.dry_run)
        else:
            print(f"(kept {model_dir})")
        commands.append(shlex.join(command))
        eval_cmd = evaluate_command(args, variant, model_dir, output / variant / "eval", VARIANTS[variant][0])
        commands.append(shlex.join(eval_cmd))
        results = evaluated(args, eval_cmd, output / variant / "eval")
        if results is not None:
            rows[VARIANTS[variant][0]] = results["metrics"]
            by_variant[variant] = results["metrics"]

    sweeps: list[tuple[str, int, int, dict]] = []
    for variant, samplers in (("full", ("euler", "heun")), ("diffusion", ("ddim",))):
        if variant not in args.variants:
            continue
        for steps in args.sweep_steps:
            plan = [(s, steps) for s in samplers] + ([("euler", 2 * steps)] if "heun" in samplers else [])
            for sampler, s in plan:
                calls = 2 * s if sampler == "heun" else s
                out_dir = output / variant / f"sweep_{sampler}_S{s}"
                command = evaluate_command(
                    args,
                    variant,
                    output / variant / "model",
                    out_dir,
                    f"{variant} {sampler} S={s}",
                    num_steps=s,
                    solver=None if sampler == "ddim" else sampler,
                )
                commands.append(shlex.join(command))
                results = evaluated(args, command, out_dir)
                if results is not None and not any(r[0] == sampler and r[1] == s for r in sweeps):
                    sweeps.append((sampler, s, calls, results))
    if args.dry_run:
        return 0
    sweeps.sort(key=lambda r: (r[0], r[1]))
    report = (
        f"## Ablations on synthetic / {args.dataset_config} ({args.config_preset} preset, "
        f"{args.max_train_steps} steps, frozen encoder)\n\n{paper_tables(by_variant)}\n"
    )
    if sweeps:
        report += f"\n## Few-step sampling (equal network calls: Euler 2S vs Heun S)\n\n{sweep_table(sweeps)}\n"
    report += "\nCommands:\n\n```\n" + "\n".join(commands) + "\n```\n"
    (output / "ablation.md").write_text(report)
    (output / "ablation.json").write_text(
        json.dumps(
            {
                "rows": rows,
                "sweeps": [
                    {
                        "sampler": a,
                        "num_steps": b,
                        "network_calls": c,
                        "metrics": d["metrics"],
                        "seconds_per_clip": d.get("seconds_per_clip"),
                    }
                    for a, b, c, d in sweeps
                ],
            },
            indent=2,
            default=float,
        )
    )
    print(report)
    print(f"wrote {output / 'ablation.md'} and {output / 'ablation.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
