"""Render the docs' measured tables from the benchmarks' results files, and check them.

    python benchmarks/render_tables.py            # rewrite every marked table and value in the docs
    python benchmarks/render_tables.py --check    # exit 1 when one is out of date or its model is not the shipped one

A rendered table sits between marker comments, and only what is between them is rewritten (the prose around stays
hand-written)::

    <!-- table: bench_pipeline.cpu/ops-paths -->
    (rendered: the command that measured it, the commit, the machine, the model's fingerprint; then the table)
    <!-- end table -->

``bench_pipeline.cpu`` is the results file ``docs/benchmark_results/bench_pipeline.cpu.json`` and ``ops-paths``
a table of ``result_tables.TABLES``; ``<!-- value: SOURCE/NAME -->400.2<!-- end value -->`` renders one figure
inside a sentence. ``region_calibration`` as the source is the bundled model's ``region_calibration.json``
(``region_calibration.causal`` the causal model's).

The checks (``--check``, and ``tests/test_benchmark_results.py``):

* every marked block is as its results file renders it;
* every model a block was measured on is the one shipped now: a bundled model folder's fingerprint equals the
  tree's, a model built from a configuration has the fingerprint of the configuration its benchmark builds now;
  unless the marker says ``as of COMMIT`` (``<!-- table: bench_x.cpu/name as of 1aa7744 -->``: a table kept as
  measured on an older commit's model, whose results file must then be of that commit);
* every table of ``docs/benchmarks.md`` is either rendered or inside a ``<!-- measured: commit ABCDEF1, model ...
  -->`` ... ``<!-- end measured -->`` block that names the commit and the model it was measured on (figures whose
  results files were not kept).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the benchmarks' builders import their siblings by name
    sys.path.insert(0, str(HERE))

from result_tables import REGION_CALIBRATION, TABLES  # noqa: E402
from results import REPO, RESULTS_DIR, SHIPPED_MODEL_FOLDERS, config_fingerprint, folder_fingerprint  # noqa: E402

DOCUMENTS = (REPO / "docs" / "benchmarks.md", REPO / "docs" / "results.md", REPO / "README.md")
"""The files whose marked blocks are rendered."""
MARKED_TABLES_DOCUMENT = REPO / "docs" / "benchmarks.md"
"""The file in which every table must be rendered or marked as measured on a named commit and model."""
BLOCK = re.compile(
    r"<!-- (?P<kind>table|value): (?P<source>[\w.-]+)/(?P<name>[\w-]+)(?: as of (?P<as_of>[0-9a-f]{7,40}))? -->"
    r"(?P<body>.*?)<!-- end (?P=kind) -->",
    re.S,
)
MEASURED = re.compile(r"<!-- measured: (?P<note>[^\n]*?) -->(?P<body>.*?)<!-- end measured -->", re.S)
MEASURED_NOTE = re.compile(r"\bcommit (?P<commit>[0-9a-f]{7,40})\b.*\bmodels?\b", re.S)


@dataclass(frozen=True)
class Sources:
    """Where the blocks' data come from: the results files' folder and the bundled model folders."""

    results_dir: Path = RESULTS_DIR
    model_folders: tuple[tuple[str, Path], ...] = tuple(SHIPPED_MODEL_FOLDERS.items())

    def folder(self, shipped: str) -> Path:
        return dict(self.model_folders)[shipped]


class RenderError(ValueError):
    """A marked block that cannot be rendered (unknown table, missing results file or section)."""


def block_label(match: re.Match) -> str:
    return f"{match['kind']} {match['source']}/{match['name']}"


def load_block(match: re.Match, sources: Sources) -> tuple[dict | None, dict]:
    """The results section a block reads (None for a shipped model file) and the data its renderer takes."""
    source, name = match["source"], match["name"]
    benchmark = source.split(".")[0]
    entry = TABLES.get((benchmark, name))
    if entry is None:
        known = ", ".join(sorted(f"{b}/{n}" for b, n in TABLES))
        raise RenderError(f"{block_label(match)}: no such table in result_tables.TABLES (known: {known})")
    if entry.inline != (match["kind"] == "value"):
        raise RenderError(
            f"{block_label(match)}: {name} is a {'value' if entry.inline else 'table'}, not a {match['kind']}"
        )
    if benchmark == REGION_CALIBRATION:
        shipped = "default_model_causal" if source.endswith(".causal") else "default_model"
        path = sources.folder(shipped) / "region_calibration.json"
        return None, json.loads(path.read_text())
    path = sources.results_dir / f"{source}.json"
    if not path.exists():
        raise RenderError(f"{block_label(match)}: no results file {path} (run the benchmark with --results-dir)")
    sections = json.loads(path.read_text()).get("sections", {})
    if entry.section not in sections:
        raise RenderError(f"{block_label(match)}: {path} has no section {entry.section!r} (has {sorted(sections)})")
    section = sections[entry.section]
    return section, section["figures"]


def machine_text(machine: dict) -> str:
    if machine.get("device") == "cuda":
        return f"{machine['gpu']}, torch {machine['torch']} (CUDA {machine.get('cuda')})"
    load = machine.get("load_average")
    load_text = f", load average {load[0]:.1f}" if load else ""
    threads = machine["threads"]
    return (
        f"CPU {machine['cpu']} ({machine['cpu_cores']} cores{load_text}), torch {machine['torch']}, "
        f"{threads} thread{'s' if threads != 1 else ''}"
    )


def model_text(model: dict) -> str:
    if model["kind"] == "folder" and model.get("shipped"):
        return f"the bundled `{model['shipped']}` (fingerprint {model['sha256'][:12]})"
    if model["kind"] == "folder":
        return f"{model['name']}: the folder `{model.get('path')}` (fingerprint {model['sha256'][:12]})"
    return f"{model['name']} (configuration fingerprint {model['sha256'][:12]}, `{model['builder']}`)"


def provenance(section: dict | None, as_of: str | None) -> str:
    """The line above a rendered table: what measured it, where, when, on which model."""
    if section is None:
        return (
            "From the bundled model's `region_calibration.json`, written by `examples/evaluate.py --split test "
            "--region_split validation --save_region_calibration` (the causal model's with `--online`)."
        )
    state = " with uncommitted changes" if section.get("dirty") else ""
    models = "; ".join(model_text(model) for model in section["models"]) or "no model"
    line = (
        f"Measured by `{section['command']}` at commit {str(section['commit'])[:7]}{state}, {section['date']}; "
        f"{machine_text(section['machine'])}. Model: {models}."
    )
    if as_of:
        line += f" Kept as of commit {as_of}: not measured on the model shipped now."
    return line


def render_block(match: re.Match, sources: Sources) -> str:
    section, data = load_block(match, sources)
    entry = TABLES[match["source"].split(".")[0], match["name"]]
    rendered = entry.render(data)
    if entry.inline:
        body = rendered
    else:
        body = "\n" + provenance(section, match["as_of"]) + "\n\n" + "\n".join(rendered) + "\n\n"
    as_of = f" as of {match['as_of']}" if match["as_of"] else ""
    head = f"<!-- {match['kind']}: {match['source']}/{match['name']}{as_of} -->"
    return f"{head}{body}<!-- end {match['kind']} -->"


def render_text(text: str, sources: Sources = Sources()) -> str:
    """``text`` with every marked block rendered from its source."""
    return BLOCK.sub(lambda match: render_block(match, sources), text)


# ---------------------------------------------------------------------------------------------------- checks
def builder_fingerprint(model: dict) -> str:
    """The fingerprint of the configuration a model entry's builder (``module:function`` in benchmarks/) makes now."""
    module_name, function = model["builder"].split(":")
    config = getattr(importlib.import_module(module_name), function)(**model.get("arguments", {}))
    return config_fingerprint(config)


def model_problem(model: dict, sources: Sources) -> str | None:
    """Why a measured model is not the one shipped now (None when it is)."""
    if model["kind"] == "folder":
        if not model.get("shipped"):
            return f"measured on the folder {model.get('path')}, which is not a bundled model"
        now = folder_fingerprint(sources.folder(model["shipped"]))
        if now != model["sha256"]:
            return f"measured on {model['shipped']} with fingerprint {model['sha256'][:12]}, shipped now: {now[:12]}"
        return None
    now = builder_fingerprint(model)
    if now != model["sha256"]:
        return (
            f"measured on a configuration with fingerprint {model['sha256'][:12]}; {model['builder']} builds "
            f"{now[:12]} now"
        )
    return None


def block_problems(text: str, sources: Sources = Sources()) -> list[str]:
    """Every marked block's problem: not rendered as its results file says, measured on a model that is not the one
    shipped now (unless marked ``as of``), or an ``as of`` commit that is not its results' commit."""
    problems = []
    for match in BLOCK.finditer(text):
        try:
            section, _ = load_block(match, sources)
            if match[0] != render_block(match, sources):
                problems.append(f"{block_label(match)}: out of date with its results (run render_tables.py)")
        except RenderError as err:
            problems.append(str(err))
            continue
        if section is None:
            continue
        if match["as_of"]:
            if not str(section["commit"]).startswith(match["as_of"]):
                problems.append(
                    f"{block_label(match)}: marked as of {match['as_of']}, its results are of {section['commit']}"
                )
            continue
        for model in section["models"]:
            problem = model_problem(model, sources)
            if problem:
                problems.append(
                    f"{block_label(match)}: {problem}: re-measure (`{section['command']}`) or mark it "
                    f"'as of {str(section['commit'])[:7]}'"
                )
    return problems


def unmarked_tables(text: str) -> list[str]:
    """Tables that are neither rendered nor inside a ``measured`` block naming a commit and a model, and
    ``measured`` blocks that name no commit or no model."""
    problems = []
    for match in MEASURED.finditer(text):
        if not MEASURED_NOTE.search(match["note"]):
            problems.append(f"measured block '{match['note'][:80]}': name the commit (commit abcdef1) and the model")
    spans = [match.span() for pattern in (BLOCK, MEASURED) for match in pattern.finditer(text)]
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        is_rule = line.startswith("| ---") or line.startswith("|---")
        if is_rule and not any(start <= offset < end for start, end in spans):
            problems.append(f"line {number}: a table neither rendered nor marked as measured (<!-- measured: ... -->)")
        offset += len(line)
    return problems


def measured_commits(text: str) -> list[str]:
    """The commits the ``measured`` blocks name."""
    return [
        MEASURED_NOTE.search(match["note"])["commit"]
        for match in MEASURED.finditer(text)
        if MEASURED_NOTE.search(match["note"])
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a stale or unshipped block")
    parser.add_argument("files", nargs="*", type=Path, default=list(DOCUMENTS), help="default: the docs and README")
    args = parser.parse_args(argv)
    problems = []
    for path in args.files:
        text = path.read_text(encoding="utf-8")
        if args.check:
            problems += [f"{path.name}: {problem}" for problem in block_problems(text)]
            if path.resolve() == MARKED_TABLES_DOCUMENT.resolve():
                problems += [f"{path.name}: {problem}" for problem in unmarked_tables(text)]
            continue
        try:
            rendered = render_text(text)
        except RenderError as err:
            print(f"{path}: {err}", file=sys.stderr)
            return 1
        count = len(BLOCK.findall(text))
        if rendered != text:
            path.write_text(rendered, encoding="utf-8")
        print(
            f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}: {count} blocks"
            f"{', rewritten' if rendered != text else ', up to date'}"
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
