"""examples/ablation.py: the commands it plans for each variant and the table it writes (no training here; the
script itself is run end to end in docs/results.md)."""

from pathlib import Path

import pytest

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "ablation.py"


@pytest.fixture(scope="module")
def ablation():
    return load_script(SCRIPT, "ablation")


def test_every_variant_is_a_valid_config_and_differs_from_full(ablation, tmp_path):
    args = ablation.parse_args(["--data_dir", str(tmp_path), "--output_dir", str(tmp_path)])
    for variant, (_, switches) in ablation.VARIANTS.items():
        command = ablation.train_command(args, variant, tmp_path / variant)
        assert "--cache_features" in command and "--no-use_lora" in command  # the frozen-encoder protocol
        overrides = dict(item.split("=") for item in switches.split(",") if item)
        values = {k: {"False": False, "True": True}.get(v, int(v) if v.isdigit() else v) for k, v in overrides.items()}
        config = GazeFlowConfig.tiny(**values)  # raises if a variant's switches are not a valid config
        if variant == "full":
            assert "--config_overrides" not in command
        elif variant in ablation.VARIANT_GROUPS["k_sweep"]:  # M set outright: equal to the base's M for one of them
            assert command[command.index("--config_overrides") + 1] == switches
            assert config.num_task_queries == int(variant.rsplit("_", 1)[1])
        else:
            assert command[command.index("--config_overrides") + 1] == switches
            assert any(getattr(config, k) != getattr(GazeFlowConfig.tiny(), k) for k in values)


def test_dry_run_plans_training_evaluation_and_the_solver_sweep(ablation, tmp_path, capsys):
    assert (
        ablation.main(
            [
                "--data_dir",
                str(tmp_path / "data"),
                "--output_dir",
                str(tmp_path / "out"),
                "--dry_run",
                "--variants",
                "full",
                "no_rope",
                "--sweep_steps",
                "1",
                "2",
            ]
        )
        == 0
    )
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("$ ")]
    assert sum("train.py" in line for line in printed) == 2
    sweep = [line for line in printed if "sweep_" in line]
    assert len(sweep) == 6  # S in {1, 2}: Euler S, Heun S, Euler 2S
    assert any("--solver heun --max" in line or line.endswith("--solver heun") for line in sweep)


def test_table_has_the_papers_columns(ablation):
    metrics = dict(
        auc=0.97,
        f1=0.493,
        precision=0.401,
        recall=0.638,
        aae=8.81,
        ade_mean=57.0,
        dtw_mean=45.0,
        displacement_mean_ratio=0.91,
        displacement_median_ratio=1.08,
        displacement_jsd=0.0011,
    )
    table = ablation.ablation_table({"Full": metrics, "- Temporal RoPE": {}})
    header, _, full, ablated = table.splitlines()
    assert header.split(" | ")[1:4] == ["AUC", "F1", "P"] and "JSD" in header
    assert full == "| Full | 0.970 | 0.493 | 0.401 | 0.638 | 8.81 | 0.570 | 0.450 | 0.91 | 1.08 | 0.0011 |"
    assert ablated.count("-") >= 10


def test_regression_is_evaluated_with_its_single_sample(ablation, tmp_path):
    args = ablation.parse_args(["--data_dir", str(tmp_path), "--output_dir", str(tmp_path), "--num_samples", "10"])
    assert "--num_samples" not in ablation.evaluate_command(args, "regression", tmp_path, tmp_path, "r")
    full = ablation.evaluate_command(args, "full", tmp_path, tmp_path, "f")
    assert full[full.index("--num_samples") + 1] == "10"


def test_table_names_stand_for_their_variants(ablation, tmp_path):
    args = ablation.parse_args(
        ["--data_dir", str(tmp_path), "--output_dir", str(tmp_path), "--variants", "pe_compare", "k_sweep", "full"]
    )
    assert args.variants == [
        "full",
        "pooled_only",
        "concat",
        "learned_pe",
        "task_queries_1",
        "task_queries_2",
        "task_queries_4",
        "task_queries_8",
        "task_queries_16",
    ]
    assert ablation.parse_args(["--data_dir", "d", "--output_dir", "o"]).variants == list(ablation.DEFAULT_VARIANTS)


def test_pe_compare_and_k_sweep_tables(ablation):
    def metrics(f1):
        return dict(auc=0.9, f1=f1, precision=0.4, recall=0.6, aae=9.0, ade_mean=50.0)

    tables = ablation.paper_tables(
        {
            "full": metrics(0.5),
            "pooled_only": metrics(0.48),
            "concat": metrics(0.47),
            "task_queries_1": metrics(0.41),
            "task_queries_16": metrics(0.42),
        }
    )
    ablation_part, pe_part, k_part = tables.split("\n\n### ")
    assert "| Full | 0.900 | 0.500 |" in ablation_part and "Concat" not in ablation_part
    pe_lines = pe_part.splitlines()
    assert pe_lines[0] == "Table pe_compare" and pe_lines[2] == "| Variant | AUC | F1 | P | R | AAE |"
    assert pe_lines[4:] == [
        "| Default | 0.900 | 0.500 | 0.400 | 0.600 | 9.00 |",
        "| w/o Learnable Queries | 0.900 | 0.480 | 0.400 | 0.600 | 9.00 |",
        "| Concat | 0.900 | 0.470 | 0.400 | 0.600 | 9.00 |",
    ]
    k_lines = k_part.splitlines()
    assert k_lines[2] == "| M | AUC | F1 | P | R | AAE |"
    assert k_lines[4:] == [
        "| 1 | 0.900 | 0.410 | 0.400 | 0.600 | 9.00 |",
        "| 16 | 0.900 | 0.420 | 0.400 | 0.600 | 9.00 |",
    ]
    # one variant of a table is not a table
    assert "pe_compare" not in ablation.paper_tables({"full": metrics(0.5), "task_queries_1": metrics(0.4)})
