#!/usr/bin/env python
"""Measure a training recipe on the panel of task families (``data.synthetic_tasks_panel``), as a user runs it.

For each family its raw EGTEA Gaze+ layout is written (``<output_dir>/data/<family>``); for each seed the model is
trained with exactly the documented user command, nothing else::

    python examples/train.py --recipe small-cpu --dataset_name egtea --data_dir D --seed N --output_dir O

then scored on the family's test clips beside the two priors (K=16, S=5, sigma 5 px, the paper protocol)::

    python examples/evaluate.py --model_name_or_path O $EVAL --num_samples 16 --num_steps 5 --sigma_px 5
    python examples/evaluate.py --baseline center_bias $EVAL --sigma_px 5
    python examples/evaluate.py --baseline random_walk_free $EVAL --sigma_px 5 --num_samples 16

with ``EVAL="--dataset_name egtea --data_dir D --dataset_config split1 --split test"``. The two checks' verdicts
after training, the stall check's (grounding left its plateau) and the validation success check's (learned on the
run's validation clips), are read from each run's ``trainer_state.json`` and set beside test-time success (the run's
AAE at most ``SUCCESS_AAE_RATIO`` of Center Bias's, ``metrics.baselines``); ``<output_dir>/panel.md`` and
``panel.json`` hold the table. Finished steps
(written data, trained runs, results) are skipped, so an interrupted panel resumes where it stopped; a run folder
without its final ``trainer_state.json`` resumes from its latest checkpoint (the same command with
``--resume_from_checkpoint latest``, which ends bit for bit as the uninterrupted run would) where its checkpoint
index is there, and is trained again from scratch where it is not (stopped before its first checkpoint). Every
step's output goes to ``<output_dir>/logs``; a failed step is reported and the rest go on (exit status 1).

``--records_dir R`` keeps what the table needs of each finished step, small enough to commit, apart from the runs:
``R/<family>/<method>.json`` with an evaluation's metrics, or a training's two verdicts, and the commit the runner
ran at. A step whose records are there is not run again, and the table reads a record where the step's own file is
gone, so a panel spread over machines that do not keep ``--output_dir`` goes on where it stopped (a seed's training
counts as done only beside its evaluation's record: the evaluation needs the trained model).

    python examples/recipe_panel.py --output_dir runs/panel                        # 8 families x 2 seeds: hours
    python examples/recipe_panel.py --output_dir runs/panel --families ring_cue --seeds 0 --dry_run
    python examples/recipe_panel.py --output_dir runs/panel --records_dir docs/recipe_panel_records
    python examples/recipe_panel.py --output_dir runs/table --records_dir docs/recipe_panel_records --table_only

``--smoke`` checks the runner itself in about a minute of CPU (a few short clips, two training steps, K=S=2): its
table is not a measurement.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from transformers_gazeflow.data.synthetic_tasks_panel import PANEL_NAMES, SMOKE_DATA, panel_family, write_panel_family
from transformers_gazeflow.metrics.baselines import SUCCESS_AAE_RATIO, beats_both_priors, beats_center_bias
from transformers_gazeflow.training.checkpointing import INDEX as CHECKPOINT_INDEX

EXAMPLES = Path(__file__).resolve().parent
EVALUATION = ["--num_samples", "16", "--num_steps", "5"]
"""K and S of the model's evaluation (the priors' are their own: Center Bias has no samples)."""
SIGMA_PX = "5"
SMOKE_TRAIN = ["--max_train_steps", "2", "--trial_starts", "1", "--per_device_train_batch_size", "2"]
SMOKE_TRAIN += ["--validation_fraction", "0.5", "--horizontal_flip_probability", "0"]
"""What ``--smoke`` adds to the training command (after the documented one, so overriding the recipe): two steps,
one start, half the few training clips held out (so that the stall check has a validation loss to read), no flips
(half the feature cache)."""
SMOKE_EVALUATION = ["--num_samples", "2", "--num_steps", "2"]
PRIORS = {"center_bias": [], "random_walk_free": ["--num_samples", "16"]}
"""The priors scored beside each family's runs, with their options (the free Random Walk's K)."""
DATA_MARKER = "panel_family.json"
"""Written into a family's data folder once its layout is complete (the settings it was written with)."""
METRICS = ("auc", "f1", "aae")
RECORD_KEYS = {"evaluation": ("metrics",), "training": ("grounding_plateau", "validation_success")}
"""What a step's record keeps of its done file (``results.json``, ``trainer_state.json``), as the table reads it."""
RESUME = ["--resume_from_checkpoint", "latest"]
"""What an unfinished training run's command gets when its checkpoint index (there once it saved one) is there."""


@dataclass
class Step:
    """One command of the panel: what it runs, where its log goes, and the file that says it is done."""

    name: str
    command: list[str]
    done_file: Path
    log: Path
    fresh_folder: Path | None = None  # removed before the command runs (an unfinished training run) ...
    resume_index: Path | None = None  # ... unless this file is there: then the command resumes from it
    needs: Path | None = None  # a file the command reads that an earlier step writes (the trained model's)
    kind: str = "evaluation"  # which of RECORD_KEYS its record keeps
    records: tuple[Path, ...] = ()  # with --records_dir: its own record first; all there: the step is done


@dataclass
class PanelRun:
    """Where a panel writes and what it runs (``--smoke`` adds its arguments to every command)."""

    output_dir: Path
    recipe: str
    smoke: bool = False
    records_dir: Path | None = None
    failures: list[str] = field(default_factory=list)

    def data_dir(self, family: str) -> Path:
        return self.output_dir / "data" / family

    def run_dir(self, family: str, seed: int) -> Path:
        return self.output_dir / "runs" / family / f"seed{seed}"

    def eval_dir(self, family: str, method: str) -> Path:
        return self.output_dir / "eval" / family / method

    def log(self, name: str) -> Path:
        return self.output_dir / "logs" / f"{name}.log"

    @property
    def identity(self) -> dict:
        """What a record must match to stand for a step of this panel."""
        return {"recipe": self.recipe, "smoke": self.smoke}

    def records(self, family: str, *methods: str) -> tuple[Path, ...]:
        """The records of a family's steps (``seed0``: an evaluation, ``seed0-training``), none without a folder."""
        if self.records_dir is None:
            return ()
        return tuple(self.records_dir / family / f"{method}.json" for method in methods)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default="small-cpu", help="the examples/train.py recipe measured")
    parser.add_argument("--families", nargs="+", default=list(PANEL_NAMES), help="panel families (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1], help="training seeds per family")
    parser.add_argument("--output_dir", required=True, help="data, runs, results, logs and the panel table")
    parser.add_argument("--dry_run", action="store_true", help="print the commands, run nothing")
    parser.add_argument("--smoke", action="store_true", help="a test of the runner (tiny data and runs), no figures")
    parser.add_argument("--records_dir", help="keep each finished step's record here (small; read back on resuming)")
    parser.add_argument("--table_only", action="store_true", help="write the table from what is there; run nothing")
    args = parser.parse_args(argv)
    for name in args.families:
        try:
            panel_family(name)
        except ValueError as err:
            parser.error(f"--families: {err}")
    if any(seed < 0 for seed in args.seeds):
        parser.error(f"--seeds must be integers >= 0, got {args.seeds}")
    return args


def train_step(panel: PanelRun, family: str, seed: int) -> Step:
    """The documented user command for one seed (``--smoke``: :data:`SMOKE_TRAIN` after it)."""
    run_dir = panel.run_dir(family, seed)
    command = [sys.executable, str(EXAMPLES / "train.py"), "--recipe", panel.recipe, "--dataset_name", "egtea"]
    command += ["--data_dir", str(panel.data_dir(family)), "--seed", str(seed), "--output_dir", str(run_dir)]
    command += SMOKE_TRAIN if panel.smoke else []
    log = panel.log(f"{family}-seed{seed}")
    done, index = run_dir / "trainer_state.json", run_dir / CHECKPOINT_INDEX
    records = panel.records(family, f"seed{seed}-training", f"seed{seed}")
    return Step(
        f"train {family} seed {seed}", command, done, log, fresh_folder=run_dir, resume_index=index,
        kind="training", records=records,
    )  # fmt: skip


def evaluate_step(panel: PanelRun, family: str, method: str, source: list[str]) -> Step:
    """``examples/evaluate.py`` on the family's test clips, ``source`` the model or baseline arguments."""
    out = panel.eval_dir(family, method)
    command = [sys.executable, str(EXAMPLES / "evaluate.py"), *source, "--dataset_name", "egtea"]
    command += ["--data_dir", str(panel.data_dir(family)), "--dataset_config", "split1", "--split", "test"]
    command += ["--sigma_px", SIGMA_PX, "--output_dir", str(out)]
    log, records = panel.log(f"{family}-{method}-eval"), panel.records(family, method)
    return Step(f"evaluate {family} {method}", command, out / "results.json", log, records=records)


def family_steps(panel: PanelRun, family: str, seeds: list[int]) -> list[Step]:
    """The priors' evaluations, then each seed's training and evaluation."""
    steps = []
    for prior, options in PRIORS.items():
        steps.append(evaluate_step(panel, family, prior, ["--baseline", prior, *options]))
    for seed in seeds:
        train = train_step(panel, family, seed)
        model = ["--model_name_or_path", str(panel.run_dir(family, seed))]
        model += SMOKE_EVALUATION if panel.smoke else EVALUATION
        evaluate = evaluate_step(panel, family, f"seed{seed}", model)
        evaluate.needs = train.done_file
        steps += [train, evaluate]
    return steps


def write_data(panel: PanelRun, family: str, dry_run: bool) -> bool:
    """The family's EGTEA layout, unless a complete one is there (its marker's settings must be this panel's);
    False when the folder holds another panel's data."""
    folder, settings = panel.data_dir(family), panel_family(family).settings
    expected = {"settings": asdict(settings), "smoke": panel.smoke}
    marker = folder / DATA_MARKER
    if marker.exists():
        if json.loads(marker.read_text(encoding="utf-8")) != expected:
            panel.failures.append(f"{folder}: holds data written with other settings ({marker}); use another folder")
            return False
        return True
    print(f"write {family}'s EGTEA layout to {folder}", flush=True)
    if dry_run:
        return True
    if folder.exists():
        shutil.rmtree(folder)  # an interrupted write: start again
    write_panel_family(folder, panel_family(family), smoke=panel.smoke)
    marker.write_text(json.dumps(expected, indent=1), encoding="utf-8")
    return True


def run_step(panel: PanelRun, step: Step, dry_run: bool) -> None:
    """Run a step unless its done file or its records are there; a failure is recorded in ``panel.failures`` (its
    log named), and so is a step whose input an earlier step did not write (it is not run). A finished step's
    record is written (:func:`write_record`) unless ``dry_run``."""
    if step.records and all(record.exists() for record in step.records):
        foreign = [record for record in step.records if read_done(record, ()).get("panel") != panel.identity]
        if foreign:
            panel.failures.append(f"{foreign[0]}: a record of another panel (not {panel.identity}); use another folder")
            return
        print(f"skip {step.name}: {step.records[0]} is there", flush=True)
        return
    if step.done_file.exists():
        print(f"skip {step.name}: {step.done_file} is there", flush=True)
        if not dry_run:
            write_record(panel, step)
        return
    print(" ".join(step.command), flush=True)
    if dry_run:
        return
    if step.needs is not None and not step.needs.exists():
        panel.failures.append(f"{step.name} not run: {step.needs} is missing (its training failed?)")
        return
    resuming = step.resume_index is not None and step.resume_index.exists()
    command = [*step.command, *RESUME] if resuming else step.command
    if resuming:
        print(f"  {step.resume_index.parent} holds an unfinished run: resumed from its latest checkpoint", flush=True)
    elif step.fresh_folder is not None and step.fresh_folder.exists():
        print(f"  {step.fresh_folder} holds an unfinished run: trained again from scratch", flush=True)
        shutil.rmtree(step.fresh_folder)
    step.log.parent.mkdir(parents=True, exist_ok=True)
    with open(step.log, "a" if resuming else "w", encoding="utf-8") as log:  # a resumed run's log goes on
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=EXAMPLES.parent)
    if result.returncode != 0 or not step.done_file.exists():
        panel.failures.append(f"{step.name} failed (exit status {result.returncode}); see {step.log}")
        print(f"  FAILED: see {step.log}", flush=True)
        return
    write_record(panel, step)


def write_record(panel: PanelRun, step: Step) -> None:
    """The step's record (with ``--records_dir``): what the table reads of its done file, the panel it belongs to
    (recipe, smoke) and the runner's commit."""
    if not step.records:
        return
    done = json.loads(step.done_file.read_text(encoding="utf-8"))
    record = {key: done.get(key) for key in RECORD_KEYS[step.kind]}
    record |= {"panel": panel.identity, "source": runner_source()}
    step.records[0].parent.mkdir(parents=True, exist_ok=True)
    step.records[0].write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def runner_source() -> dict | None:
    """``{"commit", "dirty"}`` of the runner's checkout (dirty: tracked files differ from it); None without git."""
    git = ["git", "-C", str(EXAMPLES.parent)]
    try:
        commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}


def read_done(done_file: Path, records: tuple[Path, ...]) -> dict | None:
    """A step's done file, else its record (``--records_dir``), else None."""
    for path in (done_file, *records[:1]):
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
    return None


def read_metrics(results_file: Path, records: tuple[Path, ...] = ()) -> dict[str, float] | None:
    """AUC, F1 and AAE from an ``examples/evaluate.py`` ``results.json``, or its record (None when neither is there)."""
    results = read_done(results_file, records)
    return None if results is None else {name: results["metrics"][name] for name in METRICS}


def read_verdicts(run_dir: Path, records: tuple[Path, ...] = ()) -> tuple[dict | None, dict | None]:
    """The two checks' verdicts on a run, from its ``trainer_state.json`` or its record: the stall check's
    (``grounding_plateau``) and the validation success check's (``validation_success``); None for each it does not
    hold."""
    state = read_done(run_dir / "trainer_state.json", records)
    if state is None:
        return None, None
    return state.get("grounding_plateau"), state.get("validation_success")


def panel_row(panel: PanelRun, family: str, seed: int) -> dict:
    """One run's row: its metrics, the priors', success, and whether each check's verdict agreed with it (the stall
    check's: grounding left its plateau; the validation success check's: learned on the validation clips)."""
    model = read_metrics(panel.eval_dir(family, f"seed{seed}") / "results.json", panel.records(family, f"seed{seed}"))
    priors = {
        prior: read_metrics(panel.eval_dir(family, prior) / "results.json", panel.records(family, prior))
        for prior in PRIORS
    }
    verdict, validation = read_verdicts(panel.run_dir(family, seed), panel.records(family, f"seed{seed}-training"))
    row = {"family": family, "kept_aside": panel_family(family).kept_aside, "seed": seed, "model": model, **priors}
    row["verdict"], row["validation_check"] = verdict, validation
    measured = model is not None and all(priors.values())
    row["success"] = beats_center_bias(model["aae"], priors["center_bias"]["aae"]) if measured else None
    row["beats_both_priors"] = beats_both_priors(model, *priors.values()) if measured else None
    row["verdict_agrees"] = _agrees(None if verdict is None else bool(verdict["left_plateau"]), row["success"])
    row["validation_check_agrees"] = _agrees(None if validation is None else validation["learned"], row["success"])
    return row


def _agrees(learned: bool | None, success: bool | None) -> bool | None:
    """Whether a check's verdict says what test-time success says (None where either is unknown)."""
    return None if learned is None or success is None else learned == success


def _cell(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def panel_markdown(rows: list[dict], recipe: str, smoke: bool) -> str:
    """The table: one row per family and seed, kept-aside families marked, the priors beside each run."""
    lines = [f"# Recipe panel: `--recipe {recipe}`", ""]
    if smoke:
        lines += ["**Smoke run of the runner (tiny data, two training steps): not a measurement.**", ""]
    lines += [
        f"Success: test AAE at most {SUCCESS_AAE_RATIO:g} x Center Bias's. Stall check: the run's verdict from its "
        "validation grounding loss (grounding left its plateau: yes/no, progress). Validation check: the run's verdict "
        f"on its validation clips (learned: AAE at most {SUCCESS_AAE_RATIO:g} x Center Bias's there: yes/no, the AAE "
        "ratio). Agrees: the check says what test-time success says. * kept aside.",
        "",
        "| family | seed | AUC | F1 | AAE | CB AUC | CB F1 | CB AAE | RW AUC | RW F1 | RW AAE | success "
        "| beats both priors | stall check | agrees | validation check | agrees |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- "
        "| --- |",
    ]
    for row in rows:
        cells = [row["family"] + (" *" if row["kept_aside"] else ""), str(row["seed"])]
        for source in ("model", "center_bias", "random_walk_free"):
            cells += [_cell(None if row[source] is None else row[source][name]) for name in METRICS]
        verdict, validation = row["verdict"], row["validation_check"]
        said = (
            "-" if verdict is None else f"{_cell(bool(verdict['left_plateau']))} ({_cell(verdict.get('progress'), 2)})"
        )
        checked = "-" if validation is None else _validation_cell(validation)
        cells += [_cell(row["success"]), _cell(row["beats_both_priors"]), said, _cell(row["verdict_agrees"])]
        cells += [checked, _cell(row["validation_check_agrees"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _validation_cell(validation: dict) -> str:
    """The validation check's cell: learned yes/no and the AAE ratio, or ``not made`` when it was skipped."""
    if validation["learned"] is None:
        return "not made"
    return f"{_cell(bool(validation['learned']))} ({_cell(validation['aae_ratio'], 2)})"


def write_table(panel: PanelRun, families: list[str], seeds: list[int]) -> list[dict]:
    """``panel.md`` and ``panel.json`` in the output folder, from whatever results are there."""
    rows = [panel_row(panel, family, seed) for family in families for seed in seeds]
    summary = {"recipe": panel.recipe, "smoke": panel.smoke, "success_aae_ratio": SUCCESS_AAE_RATIO, "rows": rows}
    summary["smoke_data"] = SMOKE_DATA if panel.smoke else None
    panel.output_dir.mkdir(parents=True, exist_ok=True)
    (panel.output_dir / "panel.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    (panel.output_dir / "panel.md").write_text(panel_markdown(rows, panel.recipe, panel.smoke), encoding="utf-8")
    print(f"wrote {panel.output_dir / 'panel.md'} and {panel.output_dir / 'panel.json'}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    records_dir = None if args.records_dir is None else Path(args.records_dir)
    panel = PanelRun(Path(args.output_dir), args.recipe, smoke=args.smoke, records_dir=records_dir)
    for family in [] if args.table_only else args.families:
        if not write_data(panel, family, args.dry_run):
            continue
        for step in family_steps(panel, family, args.seeds):
            run_step(panel, step, args.dry_run)
    if args.dry_run:
        return 0
    write_table(panel, args.families, args.seeds)
    for failure in panel.failures:
        print(f"recipe_panel.py: {failure}", file=sys.stderr)
    return 1 if panel.failures else 0


if __name__ == "__main__":
    sys.exit(main())
