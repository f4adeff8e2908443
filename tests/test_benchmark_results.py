"""The docs' measured tables come from the benchmarks' results files (``benchmarks/results.py``,
``benchmarks/render_tables.py``): the renderer against hand-written tables, the fingerprints against ``sha256sum``,
a stale table or a model that is no longer the shipped one as failures, and the committed docs up to date."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
import render_tables  # noqa: E402
import results  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def sha256sum_lines(folder: Path) -> str:
    """``sha256sum config.json model.safetensors | sha256sum``, written out with hashlib."""
    lines = "".join(
        f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}\n"
        for name in ("config.json", "model.safetensors")
    )
    return hashlib.sha256(lines.encode()).hexdigest()


@pytest.fixture
def made_up(tmp_path):
    """A model folder (made-up bytes), a results file of ``bench_pipeline`` measured on it, and the sources."""
    model = tmp_path / "transformers_gazeflow" / "default_model"
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"hidden_size": 64}\n')
    (model / "model.safetensors").write_bytes(b"\x00weights\x01" * 10)
    (model / "region_calibration.json").write_text(
        json.dumps(
            {
                "format": "gazeflow-region-calibration",
                "version": 2,
                "levels": [0.5, 0.9],
                "factors": [1.25, 2.5],
                "split": "synthetic / validation",
                "clips": 3,
                "frames": 1200,
                "coverage_raw": [0.4, 0.8],
                "coverage_calibrated": [0.5, 0.875],
                "held_out": {
                    "split": "synthetic / test",
                    "clips": 4,
                    "frames": 1500,
                    "coverage_raw": [0.3, 0.7],
                    "coverage_calibrated": [0.52, 0.9],
                },
            }
        )
    )
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    section = {
        "command": "python benchmarks/bench_pipeline.py --ops",
        "commit": COMMIT,
        "dirty": False,
        "date": "2026-11-29 10:00 UTC",
        "machine": {"device": "cpu", "cpu": "Made-up CPU", "cpu_cores": 2, "torch": "2.13.0", "threads": 1},
        "models": [{"name": "bundled", "kind": "folder", "shipped": "default_model", "sha256": sha256sum_lines(model)}],
        "figures": {
            "paths": {"serial": {"all": 500.0, "compute": 120.5}, "overlapped": {"all": 1400.25, "compute": 95.0}}
        },
    }
    path = results_dir / "bench_pipeline.cpu.json"
    path.write_text(json.dumps({"benchmark": "bench_pipeline", "sections": {"ops": section}}))
    sources = render_tables.Sources(results_dir=results_dir, model_folders=(("default_model", model),))
    return sources, path, model


TEXT = """Prose stays.
<!-- table: bench_pipeline.cpu/ops-paths -->
anything
<!-- end table -->
We count <!-- value: bench_pipeline.cpu/ops-overlapped -->?<!-- end value --> ops: target
<!-- value: bench_pipeline.cpu/ops-target -->?<!-- end value -->.
"""


def expected_text(fingerprint: str) -> str:
    return f"""Prose stays.
<!-- table: bench_pipeline.cpu/ops-paths -->
Measured by `python benchmarks/bench_pipeline.py --ops` at commit 0123456, 2026-11-29 10:00 UTC; CPU Made-up CPU \
(2 cores), torch 2.13.0, 1 thread. Model: the bundled `default_model` (fingerprint {fingerprint[:12]}).

| path | all aten ops / output frame | without views and allocations / output frame |
| --- | ---: | ---: |
| serial (one window at a time, frames read in the model's loop, fp32, eager sampling) | 500.0 | 120.5 |
| **overlapped (the default)** | 1,400.2 | 95.0 |

<!-- end table -->
We count <!-- value: bench_pipeline.cpu/ops-overlapped -->1,400.2<!-- end value --> ops: target
<!-- value: bench_pipeline.cpu/ops-target -->missed<!-- end value -->.
"""


def test_the_renderer_rewrites_only_the_marked_blocks(made_up):
    sources, _, model = made_up
    rendered = render_tables.render_text(TEXT, sources)
    assert rendered == expected_text(sha256sum_lines(model))
    assert render_tables.render_text(rendered, sources) == rendered
    assert render_tables.block_problems(rendered, sources) == []


def test_a_table_out_of_date_with_its_results_fails(made_up):
    sources, path, _ = made_up
    rendered = render_tables.render_text(TEXT, sources)
    document = json.loads(path.read_text())
    document["sections"]["ops"]["figures"]["paths"]["overlapped"]["all"] = 399.0
    path.write_text(json.dumps(document))
    problems = render_tables.block_problems(rendered, sources)
    assert problems and all("out of date with its results" in problem for problem in problems)
    assert len(problems) == 3  # the table and both values


def test_a_model_that_is_no_longer_the_shipped_one_fails_unless_marked_as_of(made_up):
    sources, _, model = made_up
    rendered = render_tables.render_text(TEXT, sources)
    (model / "model.safetensors").write_bytes(b"retrained")
    problems = render_tables.block_problems(rendered, sources)
    assert len(problems) == 3
    assert all("shipped now" in problem and "as of 0123456" in problem for problem in problems)
    kept = rendered.replace("/ops-paths -->", "/ops-paths as of 0123456 -->")
    kept = render_tables.render_text(kept, sources)
    assert "Kept as of commit 0123456: not measured on the model shipped now." in kept
    assert [p for p in render_tables.block_problems(kept, sources) if "table bench_pipeline" in p] == []
    wrong = render_tables.render_text(rendered.replace("/ops-paths -->", "/ops-paths as of abcdef1 -->"), sources)
    assert any("marked as of abcdef1" in p for p in render_tables.block_problems(wrong, sources))


def test_a_model_built_from_a_configuration_is_checked_against_its_builder(made_up, tmp_path, monkeypatch):
    sources, path, _ = made_up
    (tmp_path / "made_up_builder.py").write_text("def config(width):\n    return {'hidden_size': width}\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])  # not syspath_prepend: the tests' pkg_resources shim
    monkeypatch.setitem(sys.modules, "made_up_builder", None)
    del sys.modules["made_up_builder"]  # imported by the check below, dropped again after the test
    document = json.loads(path.read_text())
    document["sections"]["ops"]["models"] = [
        results.config_model("random", {"hidden_size": 64}, "made_up_builder:config", width=64)
    ]
    path.write_text(json.dumps(document))
    rendered = render_tables.render_text(TEXT, sources)
    assert "configuration fingerprint" in rendered and render_tables.block_problems(rendered, sources) == []
    document["sections"]["ops"]["models"][0]["arguments"] = {"width": 128}  # the benchmark builds another now
    path.write_text(json.dumps(document))
    rendered = render_tables.render_text(TEXT, sources)
    assert any("made_up_builder:config builds" in p for p in render_tables.block_problems(rendered, sources))


def test_a_model_folder_that_is_not_bundled_fails(made_up, tmp_path):
    sources, path, _ = made_up
    document = json.loads(path.read_text())
    document["sections"]["ops"]["models"] = [{"name": "mine", "kind": "folder", "path": "/x", "sha256": "0" * 64}]
    path.write_text(json.dumps(document))
    rendered = render_tables.render_text(TEXT, sources)
    assert any("not a bundled model" in p for p in render_tables.block_problems(rendered, sources))


@pytest.mark.parametrize(
    "marker, message",
    [
        ("<!-- table: bench_pipeline.cpu/no-such-table -->x<!-- end table -->", "no such table"),
        ("<!-- table: bench_pipeline.gpu/ops-paths -->x<!-- end table -->", "no results file"),
        ("<!-- table: bench_pipeline.cpu/ops-overlapped -->x<!-- end table -->", "is a value, not a table"),
        ("<!-- table: bench_streaming.cpu/bundled-modes -->x<!-- end table -->", "no results file"),
    ],
)
def test_a_block_that_cannot_be_rendered_is_named(made_up, marker, message):
    sources, path, _ = made_up
    with pytest.raises(render_tables.RenderError, match=message):
        render_tables.render_text(marker, sources)
    assert any(message in problem for problem in render_tables.block_problems(marker, sources))


def test_a_missing_section_is_named(made_up):
    sources, path, _ = made_up
    path.write_text(json.dumps({"benchmark": "bench_pipeline", "sections": {}}))
    with pytest.raises(render_tables.RenderError, match="has no section 'ops'"):
        render_tables.render_text(TEXT, sources)


def test_the_region_factors_and_coverage_come_from_the_model_folder(made_up):
    sources, _, _ = made_up
    text = (
        "<!-- value: region_calibration/factors -->?<!-- end value --> on "
        "<!-- value: region_calibration/split -->?<!-- end value -->, tested on "
        "<!-- value: region_calibration/held-out -->?<!-- end value -->\n"
        "<!-- table: region_calibration/coverage -->\n<!-- end table -->"
    )
    rendered = render_tables.render_text(text, sources)
    assert rendered.startswith(
        "<!-- value: region_calibration/factors -->f_0.5 = 1.250, f_0.9 = 2.500<!-- end value --> on "
        "<!-- value: region_calibration/split -->synthetic / validation, 3 clips, 1,200 frames<!-- end value -->, "
        "tested on <!-- value: region_calibration/held-out -->synthetic / test, 4 clips, 1,500 frames<!-- end value -->"
    )
    header = (
        "| nominal q | factor f_q | validation: raw spread | validation: calibrated | test: raw spread "
        "| test: calibrated |"
    )
    assert header in rendered
    assert (
        "| 0.50 | 1.250 | 0.400 | 0.500 | 0.300 | 0.520 |\n| 0.90 | 2.500 | 0.800 | 0.875 | 0.700 | 0.900 |\n"
        in rendered
    )
    coverage = "<!-- value: region_calibration/held-out-coverage -->?<!-- end value -->"
    assert render_tables.render_text(coverage, sources) == coverage.replace("?", "0.520 at q = 0.5, 0.900 at q = 0.9")
    causal = made_up[2].parent / "default_model_causal"  # the causal model's file is its own folder's
    causal.mkdir()
    (causal / "region_calibration.json").write_text(json.dumps({"levels": [0.9], "factors": [3.0]}))
    both = render_tables.Sources(sources.results_dir, sources.model_folders + (("default_model_causal", causal),))
    marker = "<!-- value: region_calibration.causal/factors -->?<!-- end value -->"
    assert render_tables.render_text(marker, both) == marker.replace("?", "f_0.9 = 3.000")


def test_every_table_of_the_benchmarks_page_is_rendered_or_marked_as_measured():
    table = "| a | b |\n| --- | ---: |\n| 1 | 2 |\n"
    assert render_tables.unmarked_tables(table) == [
        "line 2: a table neither rendered nor marked as measured (<!-- measured: ... -->)"
    ]
    marked = f"<!-- measured: commit abcdef1; model: the tiny configuration -->\n\n{table}\n<!-- end measured -->\n"
    assert render_tables.unmarked_tables(marked) == []
    assert render_tables.measured_commits(marked) == ["abcdef1"]
    vague = f"<!-- measured: a while ago -->\n\n{table}\n<!-- end measured -->\n"
    assert render_tables.unmarked_tables(vague) == [
        "measured block 'a while ago': name the commit (commit abcdef1) and the model"
    ]


def test_a_folder_fingerprint_is_sha256sum_of_config_and_weights(made_up):
    _, _, model = made_up
    assert results.folder_fingerprint(model) == sha256sum_lines(model)
    (model / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"default_model: a model folder needs model.safetensors"):
        results.folder_fingerprint(model)


def test_a_configuration_fingerprint_ignores_who_wrote_it():
    base = {"hidden_size": 64, "encoder_config": {"layers": 2, "transformers_version": "5.0"}}
    other = {"transformers_version": "9.9", "encoder_config": {"transformers_version": "6.1", "layers": 2}}
    other["hidden_size"] = 64
    expected = hashlib.sha256(b'{"encoder_config":{"layers":2},"hidden_size":64}').hexdigest()
    assert results.config_fingerprint(base) == results.config_fingerprint(other) == expected
    assert results.config_fingerprint({**base, "hidden_size": 65}) != expected


def test_a_section_is_written_with_its_provenance_and_keeps_the_others(tmp_path):
    first = results.write_section(tmp_path, "bench_x", "one", {"value": 1.5}, [], argv=["benchmarks/bench_x.py"])
    results.write_section(
        tmp_path, "bench_x", "two", {"value": 2}, [], argv=[str(REPO / "benchmarks/bench_x.py"), "-v"]
    )
    assert first == tmp_path / "bench_x.cpu.json"
    document = results.read_results(first)
    assert list(document["sections"]) == ["one", "two"]
    one, two = document["sections"]["one"], document["sections"]["two"]
    assert one["figures"] == {"value": 1.5} and two["command"] == "python benchmarks/bench_x.py -v"
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode == 0:
        assert two["commit"] == head.stdout.strip() and isinstance(two["dirty"], bool)
    assert two["machine"]["device"] == "cpu" and two["machine"]["threads"] >= 1
    assert results.write_section(None, "bench_x", "one", {}, []) is None
    with pytest.raises(ValueError, match="holds results of 'bench_x', not 'bench_y'"):
        first.rename(tmp_path / "bench_y.cpu.json")
        results.write_section(tmp_path, "bench_y", "one", {}, [])
    with pytest.raises(TypeError, match="a benchmark figure of type object cannot be written as JSON"):
        results.write_section(tmp_path, "bench_z", "one", {"x": object()}, [])


def test_merging_results_files_replaces_sections_by_name(tmp_path):
    into, incoming = tmp_path / "into", tmp_path / "incoming"
    into.mkdir(), incoming.mkdir()
    section = {"command": "c", "commit": COMMIT, "date": "d", "machine": {}, "models": [], "figures": {}}
    (into / "b.gpu.json").write_text(json.dumps({"benchmark": "b", "sections": {"a": section, "z": section}}))
    new = {**section, "figures": {"x": 1}}
    (incoming / "b.gpu.json").write_text(json.dumps({"benchmark": "b", "sections": {"a": new, "m": new}}))
    results.merge([incoming / "b.gpu.json"], into)
    merged = json.loads((into / "b.gpu.json").read_text())["sections"]
    assert list(merged) == ["a", "m", "z"] and merged["a"]["figures"] == {"x": 1} and merged["z"]["figures"] == {}
    (incoming / "b.gpu.json").write_text(json.dumps({"benchmark": "b", "sections": {"a": {"command": "c"}}}))
    with pytest.raises(ValueError, match="section 'a' lacks commit, date, machine, models, figures"):
        results.merge([incoming / "b.gpu.json"], into)


# ------------------------------------------------------------------------------------------------ the committed docs
@pytest.mark.parametrize("document", render_tables.DOCUMENTS, ids=lambda path: path.name)
def test_the_committed_docs_are_rendered_from_their_results_and_the_shipped_models(document):
    problems = render_tables.block_problems(document.read_text(encoding="utf-8"))
    assert problems == [], "\n".join(problems) + "\n(re-measure, then: python benchmarks/render_tables.py)"


def test_every_table_of_the_committed_benchmarks_page_names_its_commit_and_model():
    text = render_tables.MARKED_TABLES_DOCUMENT.read_text(encoding="utf-8")
    assert render_tables.unmarked_tables(text) == []
    assert render_tables.BLOCK.search(text) and render_tables.MEASURED.search(text)


def test_the_commits_the_measured_tables_name_are_in_the_history():
    shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPO, capture_output=True, text=True)
    if shallow.returncode != 0 or shallow.stdout.strip() != "false":
        pytest.skip("not a git checkout with its whole history")
    text = render_tables.MARKED_TABLES_DOCUMENT.read_text(encoding="utf-8")
    missing = [
        commit
        for commit in sorted(set(render_tables.measured_commits(text)))
        if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO, capture_output=True).returncode
    ]
    assert missing == []


def test_the_committed_results_files_are_named_by_benchmark_and_machine():
    files = sorted(results.RESULTS_DIR.glob("*.json"))
    assert files
    for path in files:
        document = results.read_results(path)
        assert path.name.startswith(document["benchmark"] + ".")
        for section in document["sections"].values():
            assert path.name == f"{document['benchmark']}.{results.machine_slug(section['machine'])}.json"
