"""``benchmarks/gpu_suite.sh`` on the CPU, so that the GPU suite cannot rot before a GPU runs it: the dry run prints the
plan and names every step and the pip commands (which must carry every package the GPU image lacks), a step past its
time limit is stopped and an optional step past the budget is skipped, ``--device cpu --tiny`` runs every step once
(one call, as on the GPU) and writes its figures, and the summary reads them."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "benchmarks" / "gpu_suite.sh"
STEPS = [
    "install",
    "preflight",
    "tests",
    "train",
    "inference",
    "pipeline",
    "decode",
    "streaming",
    "inference-compile",
    "predict",
    "streaming-bundled",
    "streaming-compile",
    "profile",
]

sys.path.insert(0, str(REPO / "benchmarks"))
import gpu_predict  # noqa: E402
import gpu_summary  # noqa: E402
import gpu_wheels  # noqa: E402


def suite(*args: str, timeout: float = 1800, **env_overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **env_overrides}
    return subprocess.run(
        ["bash", str(SUITE), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def status(out_dir: Path) -> dict[str, str]:
    rows = [line.split("\t") for line in (out_dir / "status.tsv").read_text().splitlines()]
    return {row[0]: row[1] for row in rows}


def test_a_batch_run_predicts_for_the_longest_of_its_processes_sums():
    # process r takes rows r, r + N, ...: with 2 processes, rows 0 and 2 (1.0 + 3.0 s) and rows 1 and 3 (2.0 + 0.5)
    rows = [{"seconds": seconds} for seconds in ("1.0", "2.0", "3.0", "0.5")]
    assert gpu_predict.batch_makespan(rows, 2) == 4.0
    assert gpu_predict.batch_makespan(rows, 1) == 6.5
    assert gpu_predict.batch_makespan(rows, 4) == 3.0


def test_the_wheel_list_carries_every_package_the_gpu_image_lacks():
    needed, problems = gpu_wheels.requirement_closure()
    assert problems == []
    carried = {gpu_wheels.normalize(name) for name, _, _ in gpu_wheels.wheel_list()}
    assert {"datasets", "evaluate", "av", "pysaliency", "scikit-video"} <= needed <= carried
    assert carried - needed == set(), "gpu_wheels.txt carries a wheel nothing needs"
    image = gpu_wheels.image_packages()
    assert {"torch", "transformers", "accelerate", "peft", "numpy", "pytest"} <= image and not carried & image


def test_dry_run_prints_every_step_and_the_pip_commands(tmp_path):
    result = suite(str(tmp_path), "--device", "cpu", "--tiny", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert status(tmp_path) == {"environment": "dry-run", **{step: "dry-run" for step in STEPS}}
    downloads = [line for line in result.stdout.splitlines() if "pip download" in line or "pip wheel" in line]
    for name, version, from_sdist in gpu_wheels.wheel_list():
        assert any(f" {name}=={version}" in line and ("--no-binary" in line) == from_sdist for line in downloads), name
    assert all("--python-version 3.12" in line for line in downloads if "pip download" in line)
    installs = [line for line in result.stdout.splitlines() if "pip install" in line]
    assert len(installs) == 2 and all("--no-deps" in line and "--target /tmp/site" in line for line in installs)
    assert installs[0].endswith(".whl/*.whl")
    assert (tmp_path / "summary.md").exists()
    plan = result.stdout[result.stdout.index("plan:") : result.stdout.index("== install")]
    assert "budget 3600 s" in plan and all(f"  {step} " in plan for step in STEPS)
    assert "  profile            optional" in plan and "  train              required        120s" in plan


def test_a_step_past_its_limit_is_stopped_and_optional_steps_wait_for_the_budget(tmp_path):
    result = suite(
        str(tmp_path),
        "--device",
        "cpu",
        "--tiny",
        "--only",
        "preflight,profile",
        "--budget-s",
        "0",
        GAZEFLOW_SUITE_LIMITS="preflight=1",
    )
    assert result.returncode == 1 and "steps that failed or timed out: preflight" in result.stdout
    assert status(tmp_path) == {"environment": "0", "preflight": "timeout 1 s", "profile": "skipped (budget)"}
    summary = (tmp_path / "summary.md").read_text()
    assert "| preflight | required | 16 | 1 | timeout 1 s |" in summary
    assert "| profile | optional | 45 | 900 | skipped (budget) | 0 |" in summary


@pytest.mark.parametrize(
    "args,message",
    [
        (["--only", "tests,bench"], "unknown step 'bench'"),
        (["--device", "tpu"], "--device must be cuda or cpu, got 'tpu'"),
        (["--frobnicate"], "unknown argument '--frobnicate'"),
        (["--budget-s", "soon"], "--budget-s must be a whole number of seconds, got 'soon'"),
    ],
)
def test_bad_arguments_are_named(tmp_path, args, message):
    result = suite(str(tmp_path), *args)
    assert result.returncode == 2 and message in result.stderr


def inference_figures(encoder_ms: float, ms_per_frame: float, peak: float | None, compile_: bool = False) -> dict:
    k_s = {"K": 30, "S": 5}
    return {
        "benchmark": "inference",
        "compile": compile_,
        "targets": {"encoder_ms": 30.0, "sampler_ms": 5.0, "ms_per_frame": 0.5, "peak_memory_gb": 3.0},
        "paper": {
            "encoder_ms": 450.0,
            "ms_per_frame_k30_s5": 11.4,
            "sampler_ms_k50_s50": 2920.0,
            "peak_memory_gb": 9.2,
            "method_ms_per_frame": {"GazeFlow (K=30, S=5)": 11.4},
        },
        "encoder_ms": {"fast": encoder_ms, "reference": 10 * encoder_ms},
        "sampler_ms_grid": {"30": {"5": 2.0}},
        "ks_grid_ratio_to_paper": {"30": {"5": (encoder_ms + 2.0) / 730}},
        "generate_ms_per_frame": ms_per_frame,
        "method_time_ours_ms_per_frame": {"GazeFlow (K=30, S=5)": ms_per_frame},
        "at": {
            **k_s,
            "sampler_ms": {"fast": 2.0, "reference": 200.0},
            "ms_per_frame": {"fast": ms_per_frame, "reference": 10 * ms_per_frame},
            "max_abs_difference": 1e-3,
        },
        "peak_memory_gb": None if peak is None else {"fast": peak, "reference": 2 * peak},
        "targets_met": {
            "encoder_ms": encoder_ms <= 30,
            "sampler_ms": True,
            "ms_per_frame": ms_per_frame <= 0.5,
            "peak_memory_gb": peak is not None and peak <= 3,
        },
    }


def test_summary_merges_the_calls_and_marks_each_target(tmp_path):
    first, second = tmp_path / "call1", tmp_path / "call2"
    first.mkdir(), second.mkdir()
    (first / "environment.json").write_text(
        json.dumps(
            {
                "device_type": "cuda",
                "device": "NVIDIA H100 80GB HBM3",
                "capability": "9.0",
                "memory_gib": 79.2,
                "multiprocessors": 132,
                "python": "3.12.3",
                "torch": "2.11.0+cu130",
                "cuda": "13.0",
                "transformers": "5.17.0",
                "accelerate": "1.15.0",
                "peft": "0.18.0",
                "numpy": "2.5.2",
                "source": {"tree_hash": "ab" * 32, "commit": "c0ffee", "dirty": False, "tree_matches_record": True},
            }
        )
    )
    (first / "status.tsv").write_text("inference\t0\t200.1\tpython benchmarks/bench_inference.py --json x\n")
    (first / "inference.json").write_text(json.dumps(inference_figures(15.0, 0.4, 2.5)))
    (second / "status.tsv").write_text("streaming\t1\t50.0\tpython benchmarks/bench_streaming.py\n")
    (second / "inference-compile.json").write_text(json.dumps(inference_figures(45.0, 0.6, None, compile_=True)))
    (second / "streaming.json").write_text(
        json.dumps(
            {
                "K": 30,
                "S": 5,
                "dtype": "bf16",
                "target_p99_ms": 5.0,
                "targets_met": {"p99_ms": False},
                "ms_per_frame": {"streamer, total": {"mean": 4.0, "p50": 3.9, "p95": 5.5, "p99": 6.25, "max": 7.0}},
                "primary_mode": "cuda-graph",
                "modes": {
                    "cuda-graph": {
                        "ms_per_frame": {"p50": 3.9, "p95": 5.5, "p99": 6.25},
                        "setup_s": 0.2,
                        "aten_ops_per_frame": 14.0,
                        "cuda_kernels_per_frame": 1413.0,
                        "peak_memory_gb": 3.08,
                        "max_abs_difference_to_eager": 0.0,
                    },
                    "reduce-overhead": {"error": "RuntimeError: no compiler"},
                },
            }
        )
    )
    text = gpu_summary.summary([first, second], tmp_path / "summary.md")
    assert "device: `NVIDIA H100 80GB HBM3` (capability 9.0, 79.2 GiB, 132 SMs)" in text
    assert "commit: `c0ffee`; the tree matches it" in text
    assert "| inference | - | - | - | 0 | 200.1 |" in text and "| streaming | - | - | - | 1 | 50.0 |" in text
    assert "| encoder ms per clip | eager | 30.00 | 15.000 | 450.00 | 0.0333 | **met** |" in text
    assert "| encoder ms per clip | compiled | 30.00 | 45.000 | 450.00 | 0.1000 | **missed** |" in text
    assert "| peak memory GB, one clip | compiled | 3.00 | - | 9.20 | - | **missed** |" in text
    assert (
        "| causal streamer p99 ms per frame, paper geometry (K=30, S=5; cuda-graph; p50 3.90, p95 5.50) | bf16 | "
        "5.0 | 6.25 |"
    ) in text
    assert "## Causal streamer by mode, paper geometry (K=30, S=5, bf16; best: cuda-graph)" in text
    assert "| cuda-graph | 3.90 | 5.50 | 6.25 | 0.2 | 14 | 1413 | 3.08 | 0.0e+00 |" in text
    assert "| reduce-overhead | failed: RuntimeError: no compiler |" in text
    assert gpu_summary.missed_targets(first) == [] and gpu_summary.missed_targets(second) == [
        "inference",
        "streaming",
    ]


def figures(out_dir: Path, name: str) -> dict:
    return json.loads((out_dir / name).read_text())


ONE_CALL = (
    "preflight,tests,train,inference,pipeline,decode,streaming,inference-compile,predict,streaming-bundled,"
    "streaming-compile,profile"
)


@pytest.fixture(scope="module")
def one_call(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """Every step but the install, in one call as on the GPU (``--device cpu --tiny``)."""
    folder = tmp_path_factory.mktemp("suite")
    result = suite(
        str(folder / "out"), "--device", "cpu", "--tiny", "--only", ONE_CALL, "--bundle", str(folder / "bundle")
    )
    return result, folder / "out", folder / "bundle"


@pytest.mark.slow
def test_every_step_runs_on_the_cpu_in_one_call_and_writes_its_figures(one_call):
    result, out, bundle = one_call
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert status(out) == {step: "0" for step in ["environment", "prepare", *ONE_CALL.split(",")]}
    assert all(entry["ok"] for entry in figures(out, "preflight.json")["imports"].values())
    inference = figures(out, "inference.json")
    assert inference["encoder_ms"]["fast"] > 0 and inference["at"]["max_abs_difference"] < 1e-4
    assert set(inference["targets_met"]) == {"encoder_ms", "sampler_ms", "ms_per_frame", "peak_memory_gb"}
    compiled = figures(out, "inference-compile.json")
    assert compiled["compile"] and compiled["at"]["max_abs_difference"] < 1e-4
    streaming = figures(out, "streaming.json")
    assert streaming["ms_per_frame"]["streamer, total"]["p99"] > 0 and (streaming["K"], streaming["S"]) == (30, 5)
    assert set(streaming["modes"]) == {"reference", "eager"} and streaming["primary_mode"] == "eager"
    bundled = figures(out, "streaming-bundled.json")
    assert bundled["preset"] == "bundled" and bundled["ms_per_frame"]["streamer, total"]["p99"] > 0
    compiled_streamer = figures(out, "streaming-compile.json")
    assert set(compiled_streamer["modes"]) == {"eager"} and compiled_streamer["preset"] == "tiny"
    assert figures(out, "profile-inference.json")["profile"] and figures(out, "profile-streaming.json")["profile"]
    pipeline = figures(out, "pipeline.json")["throughput"]["runs"]
    assert {(run["size"], run["path"]) for run in pipeline} == {
        (size, path) for size in ("64x64", "160x120") for path in ("serial", "overlapped")
    }
    assert all(run["frames_per_second"] > 0 for run in pipeline)
    decode = figures(out, "decode.json")
    assert set(decode["decode"]["ms_per_frame"]) == {"64x64", "160x120"}
    assert all(value > 0 for row in decode["decode"]["ms_per_frame"].values() for value in row.values())
    runs = figures(out, "predict.json")["runs"]
    assert set(runs) == {"bundled", "tiny random, 160x120"}
    assert all(run["exit_code"] == 0 and run["frames_per_second"] > 0 for run in runs.values())
    batch = figures(out, "predict.json")["batch"]  # the folder of two copies of the 64x64 video, 1 and 2 processes
    assert [run["processes"] for run in batch.values()] == [1, 2]
    assert all(run["exit_code"] == 0 and run["statuses"] == ["ok"] for run in batch.values())
    assert all(run["videos"] == 2 and run["frames"] == 2 * runs["bundled"]["frames"] for run in batch.values())
    assert all(0 < run["frames_per_second_wall"] < run["frames_per_second"] for run in batch.values())
    # every benchmark step's figures with their provenance, collected for docs/benchmark_results
    sections = {path.name: set(json.loads(path.read_text())["sections"]) for path in (out / "results").glob("*.json")}
    assert sections == {
        "bench_inference.cpu.json": {"eager", "compiled", "profile"},
        "bench_decode.cpu.json": {"decode", "decode-batch"},
        "bench_pipeline.cpu.json": {"throughput"},
        "bench_streaming.cpu.json": {"tiny", "bundled", "tiny-compiled", "tiny-profile"},
        "bench_train.cpu.json": {"tiny"},
        "gazeflow_predict.cpu.json": {"tiny"},
    }


@pytest.mark.slow
def test_the_gpu_tests_pass_on_the_cpu(one_call):
    _, out, _ = one_call
    counts = gpu_summary.test_counts(out, "tests.xml")
    assert counts["tests"] >= 12 and counts["failures"] == counts["errors"] == 0, counts
    # on a CPU only what captures CUDA graphs is skipped, and says so
    assert len(counts["skip_reasons"]) == counts["skipped"] <= 2, counts
    assert all("needs a CUDA device" in reason for reason in counts["skip_reasons"]), counts


@pytest.mark.slow
def test_the_training_benchmark_measures_the_model_and_the_data_path(one_call):
    _, out, _ = one_call
    train = figures(out, "train.json")
    assert set(train["model_only"]) == {"B2+probe", "B2+fast+ckpt"}
    assert all(result["clips_per_s"] > 0 for result in train["model_only"].values())
    assert train["flops_per_clip"] > 0 and train["skipped"] == []
    data = train["data"]
    assert data["size"] == "160x120" and data["windows"] > 0 and data["collator"]["decode_cpu_s"] > 0
    assert [r["workers"] for r in data["loader_alone"]] == [0, 2] and all(
        r["clips_per_s"] > 0 for r in data["loader_alone"]
    )
    assert data["fed"][0]["variant"] == "B2+fast+ckpt" and data["fed"][0]["clips_per_s"] > 0
    assert set(train["gpu_hours"]["model_only"]) == {"EGTEA Gaze+", "Ego4D"}


@pytest.mark.slow
def test_the_bundle_holds_the_summary_of_every_step(one_call):
    _, _, bundle = one_call
    summary = (bundle / "summary.md").read_text()
    assert "device: `CPU`" in summary and "a dry run on the CPU" in summary and "commit: `" in summary
    assert "| end to end ms per frame (K=2, S=2) | eager |" in summary and "gazeflow predict --no-overlay" in summary
    assert "## Pipeline: gazeflow predict --no-overlay's path (bench_pipeline.py --throughput; K=30, S=5" in summary
    assert "| tiny | 160x120 | overlapped | float32 |" in summary
    assert "| train | required | 120 | 900 | 0 |" in summary and "## Training throughput (CPU, tiny geometry" in summary
    assert "| 60e8cbe probe, B4, model only (H100) | 7.50 | 24.6 | 45.4 |" in summary
    assert "## tests/gpu: " in summary and "Fast vs reference (compiled, K=2, S=2)" in summary
    assert (bundle / "gpu_suite.tar.gz").stat().st_size > 0
