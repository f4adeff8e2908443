"""examples/reflow_probe.py: the teacher's pairs, a tiny round end to end beside dynamics_probe.py's own reading, and
its errors."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.script_loading import load_script

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
READING = ["--eval_windows", "2", "--num_samples", "2", "--reference_windows", "30", "--num_steps", "1", "2"]
TINY_ROUND = ["--pairs", "8", "--reflow_steps", "3", "--batch_size", "4", "--teacher_steps", "4", *READING]


@pytest.fixture(scope="module")
def scripts():
    probe = load_script(EXAMPLES / "dynamics_probe.py", "dynamics_probe", register=True)
    reflow = load_script(EXAMPLES / "reflow_probe.py", "reflow_probe", register=True)
    yield probe, reflow
    for name in ("dynamics_probe", "reflow_probe"):
        sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def saved_teacher(scripts, tmp_path_factory):
    """A 3-step probe model saved as dynamics_probe.py saves it, with that script's own reading of it."""
    probe, _ = scripts
    folder = tmp_path_factory.mktemp("probe_models")
    tiny = ["--objectives", "flow_matching", "--max_train_steps", "3", "--num_warmup_steps", "1", *READING]
    tiny += ["--config_overrides", "hidden_size=32,num_hidden_layers=1,intermediate_size=64"]
    probe.main([*tiny, "--save_dir", str(folder)])
    return folder


def table_rows(text: str, prefix: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {prefix}")]


def test_the_teacher_s_path_ends_where_its_euler_steps_on_its_grid_end(scripts):
    _, reflow = scripts
    x0 = torch.tensor([[[[1.0, -2.0], [0.5, 4.0]]]])  # [N=1, K=1, T=2, 2]
    constant = reflow.teacher_path(lambda x, s, c: torch.full_like(x, 0.3), x0, 4, 3.0, 4)[-1]
    torch.testing.assert_close(constant, x0 + 0.3)  # the steps add up to 1 on any grid
    # v = -x on S = 2, p = 2: s = 0, 0.75, 1, so x_1 = x_0 (1 - 0.75)(1 - 0.25) = 0.1875 x_0
    decaying = reflow.teacher_path(lambda x, s, c: -x, x0, 2, 2.0, 2)[-1]
    torch.testing.assert_close(decaying, 0.1875 * x0)


def test_the_teacher_s_path_is_kept_at_the_student_s_grid(scripts):
    _, reflow = scripts
    x0 = torch.tensor([[[[2.0, -1.0]]]])  # [N=1, K=1, T=1, 2]
    # v = -x on S = 4, p = 1: each step multiplies x by 0.75; stride 2 keeps s = 0, 0.5, 1
    states = reflow.teacher_path(lambda x, s, c: -x, x0, 4, 1.0, 2)
    torch.testing.assert_close(states, torch.stack([x0, 0.5625 * x0, 0.31640625 * x0]))


def test_grid_targets_are_the_teacher_s_steps_and_the_self_conditioning_it_would_read(scripts):
    _, reflow = scripts
    grid = torch.tensor([0.0, 0.5, 0.875, 1.0])  # p = 3, S' = 2 would give 0, 0.875, 1; any increasing grid works
    states = torch.tensor([1.0, 2.0, 3.0, 5.0]).view(4, 1, 1, 1).expand(4, 1, 1, 2)
    examples = reflow.grid_targets(states, grid)
    # targets: (2 - 1) / 0.5 = 2, (3 - 2) / 0.375 = 8/3, (5 - 3) / 0.125 = 16
    torch.testing.assert_close(examples.targets[:, 0, 0, 0], torch.tensor([2.0, 8 / 3, 16.0]))
    torch.testing.assert_close(examples.inputs[:, 0, 0, 0], torch.tensor([1.0, 2.0, 3.0]))
    # x1_hat before segment 1: 1 + (1 - 0) 2 = 3; before segment 2: 2 + (1 - 0.5) 8/3 = 10/3; zeros before segment 0
    torch.testing.assert_close(examples.self_conditions[:, 0, 0, 0], torch.tensor([0.0, 3.0, 10 / 3]))


def test_the_grid_loss_reads_each_example_s_segment_input_time_and_self_conditioning(scripts):
    _, reflow = scripts
    grid = torch.tensor([0.0, 0.5, 1.0])
    states = torch.tensor([0.0, 1.0, 3.0]).view(3, 1, 1, 1).expand(3, 1, 1, 2)  # targets 2 and 4
    examples = reflow.grid_targets(states, grid)

    class Student:  # v = 10 x + s + x1_hat: segment 0 reads (0, 0, 0), segment 1 reads (1, 0.5, 2)
        config = SimpleNamespace(whitened_flow=False)

        def velocity(self, sample, flow_time, condition, self_condition):
            return 10 * sample + flow_time.view(-1, 1, 1, 1) + self_condition

    valid = torch.ones(2, 1, dtype=torch.bool)
    loss = reflow.grid_loss(Student(), None, examples, torch.tensor([0, 0]), torch.tensor([0, 1]), valid)
    # predictions 0 and 12.5 against targets 2 and 4 on both coordinates: 2 (2^2 + 8.5^2) / (2 x 2 valid frames)
    torch.testing.assert_close(loss, torch.tensor(2 * (4 + 72.25) / 4))


def test_the_teacher_s_segment_starts_from_the_given_state_and_self_conditioning(scripts):
    _, reflow = scripts
    x = torch.tensor([[[[2.0, -4.0]]]])
    # v = -x over s = 0.5, 0.75, 1: each step multiplies x by 0.75
    torch.testing.assert_close(
        reflow.teacher_segment(lambda x, s, c: -x, x, torch.zeros_like(x), [0.5, 0.75, 1.0])[0], 0.5625 * x
    )
    # v = x1_hat: the first step reads the given 3, then x1_hat = x + (1 - 0.5) 3 = x + 1.5 at s = 0.5
    start = torch.full_like(x, 3.0)
    landed, _ = reflow.teacher_segment(lambda x, s, c: c, x, start, [0.5, 0.75, 1.0])
    torch.testing.assert_close(landed, x + 0.25 * 3.0 + 0.25 * (x + 1.5))


def test_prior_draws_follow_the_teacher_s_ar1_prior(scripts, monkeypatch):
    _, reflow = scripts
    innovations = torch.tensor([1.0, 2.0, -1.0]).view(1, 1, 3, 1).expand(1, 1, 3, 2)
    monkeypatch.setattr(reflow, "draw_noise", lambda shape, generator, device: innovations.clone())
    config = SimpleNamespace(num_frames=3, noise_correlation=0.6)
    draws = reflow.prior_draws(config, 1, torch.Generator())
    # x[0] = e[0] = 1; x[1] = 0.6 + 0.8 x 2 = 2.2; x[2] = 0.6 x 2.2 - 0.8 = 0.52
    torch.testing.assert_close(draws[0, 0, :, 0], torch.tensor([1.0, 2.2, 0.52]))


def test_on_policy_examples_start_at_the_student_s_own_states(scripts, monkeypatch):
    _, reflow = scripts
    x0 = torch.tensor([4.0, -8.0]).view(1, 1, 1, 2)  # one path, one frame

    class Model:  # the velocity field it samples with, read through the patched cached_velocity_fn
        config = SimpleNamespace(num_frames=1, noise_correlation=0.0)

        def __init__(self, velocity):
            self.field = velocity

    monkeypatch.setattr(reflow, "cached_velocity_fn", lambda model, tokens, frames: model.field)
    monkeypatch.setattr(reflow, "constant_tokens", lambda config, batch: None)
    monkeypatch.setattr(reflow, "draw_noise", lambda shape, generator, device: x0.clone())
    teacher, student = Model(lambda x, s, c: -x), Model(lambda x, s, c: torch.zeros_like(x))  # the student stays
    args = SimpleNamespace(pairs=1, teacher_steps=4, teacher_grid_power=1.0, student_grid_steps=2)
    examples = reflow.on_policy_targets(args, teacher, student, torch.Generator())
    torch.testing.assert_close(examples.grid, torch.tensor([0.0, 0.5, 1.0]))
    # both of the student's states are x_0; from each the teacher's two steps of v = -x land at 0.5625 x_0, so each
    # target is (0.5625 - 1) x_0 / 0.5 = -0.875 x_0 (on the teacher's own path segment 1 would start at 0.5625 x_0)
    torch.testing.assert_close(examples.inputs[:, 0, 0], x0[0, 0].expand(2, 2))
    torch.testing.assert_close(examples.targets[:, 0, 0], -0.875 * x0[0, 0].expand(2, 2))
    # the self-conditioning the student read: zeros, then its x1_hat = x_0 + (1 - 0) 0 = x_0
    torch.testing.assert_close(examples.self_conditions[:, 0, 0], torch.stack([torch.zeros(2), x0[0, 0, 0]]))
    # a teacher that reads only its self-conditioning, v = x1_hat: segment 0 from x1_hat = 0 lands at 1.25 x_0 (target
    # 0.5 x_0); segment 1 starts from the student's x1_hat = x_0: x_0 + 0.25 x_0 + 0.25 (x_0 + 0.5 x_0) = 1.625 x_0
    reader = Model(lambda x, s, c: c)
    examples = reflow.on_policy_targets(args, reader, student, torch.Generator())
    torch.testing.assert_close(examples.targets[:, 0, 0], torch.tensor([[0.5], [1.25]]) * x0[0, 0])


def test_on_policy_rounds_add_the_student_s_examples_to_the_teacher_s_at_even_steps(
    scripts, saved_teacher, monkeypatch
):
    _, reflow = scripts
    sizes, drawn, original = [], [], reflow.grid_loss

    def counting_loss(student, condition, examples, index, segment, valid):
        sizes.append(examples.inputs.shape[1])
        drawn.append(int(index.max()))
        return original(student, condition, examples, index, segment, valid)

    monkeypatch.setattr(reflow, "grid_loss", counting_loss)
    grid = ["--student_objective", "grid", "--student_grid_steps", "2", "--time_grid_powers", "3"]
    rounds = ["--on_policy_rounds", "2", "--reflow_steps", "6"]
    args = reflow.parse_args(["--load_dir", str(saved_teacher), *TINY_ROUND, *grid, *rounds])
    teacher = reflow.GazeFlowModel.from_pretrained(next(saved_teacher.iterdir())).eval()
    reflow.reflow(args, teacher, 0)
    assert sizes == [8, 8, 16, 16, 24, 24]  # 8 teacher paths, then 8 of the student's own at steps 2 and 4
    assert all(index < size for index, size in zip(drawn, sizes)) and max(drawn[2:]) >= 8  # the new ones are drawn


def test_a_tiny_round_reads_the_teacher_as_dynamics_probe_does_then_its_student(scripts, saved_teacher, capsys):
    probe, reflow = scripts
    capsys.readouterr()
    probe.main(["--objectives", "flow_matching", "--load_dir", str(saved_teacher), *READING])
    probe_rows = table_rows(capsys.readouterr().out, "flow_matching")
    assert reflow.main(["--load_dir", str(saved_teacher), *TINY_ROUND]) == 0
    out = capsys.readouterr().out
    rows = table_rows(out, "flow_matching")
    teacher_rows = [row for row in rows if reflow.REFLOW_SUFFIX not in row]
    student_rows = [row for row in rows if reflow.REFLOW_SUFFIX in row]
    assert teacher_rows == probe_rows and len(probe_rows) == 2  # S = 1 and 2, the same figures to the last digit
    assert [row.split(" | ")[1] for row in student_rows] == ["1", "2"]
    assert all(" | 3 | " in row for row in student_rows)  # the round's training steps
    figures = [row.split(" | ")[5:] for row in rows]
    assert figures[2:] != figures[:2]  # three steps on the pairs moved the student
    assert table_rows(out, "true process") and table_rows(out, "motionless")


@pytest.mark.parametrize("objective, grid", [("grid", [0.0, 0.875, 1.0]), ("reflow", [0.0, 1.0])])
def test_the_teacher_s_states_are_kept_at_the_student_s_grid(scripts, saved_teacher, objective, grid):
    _, reflow = scripts
    # the teacher's S = 4 on p = 3, the student's S' = 2: s = 0, 1 - 0.5^3 = 0.875, 1 (reflow: the endpoints)
    chosen = ["--student_objective", objective, "--student_grid_steps", "2", "--time_grid_powers", "3"]
    args = reflow.parse_args(["--load_dir", str(saved_teacher), *TINY_ROUND, *chosen])
    teacher = reflow.GazeFlowModel.from_pretrained(next(saved_teacher.iterdir())).eval()
    noise = torch.randn(3, 1, 16, 2, generator=torch.Generator().manual_seed(0))
    states, times = reflow.teacher_states(args, teacher, noise)
    torch.testing.assert_close(times, torch.tensor(grid))
    velocity = reflow.cached_velocity_fn(teacher, reflow.constant_tokens(teacher.config, 3), 16)
    assert states.shape == (len(grid), 3, 16, 2)
    torch.testing.assert_close(states[0], noise[:, 0])
    sampled = reflow.FlowMatchingScheduler(4, "euler", time_grid_power=3.0).sample(velocity, noise)  # the package's
    torch.testing.assert_close(states[-1], sampled[:, 0])


def test_a_tiny_grid_distillation_names_its_student_and_trains_it_otherwise_than_reflow(scripts, saved_teacher, capsys):
    _, reflow = scripts
    assert reflow.main(["--load_dir", str(saved_teacher), *TINY_ROUND]) == 0
    reflowed = [row.split(" | ")[5:] for row in table_rows(capsys.readouterr().out, "flow_matching")]
    grid = ["--student_objective", "grid", "--student_grid_steps", "2", "--time_grid_powers", "1", "3"]
    assert reflow.main(["--load_dir", str(saved_teacher), *TINY_ROUND, *grid]) == 0
    out = capsys.readouterr().out
    assert " distilled to its S=2 grid seed 0: 3 steps, " in out  # each run's line as it arrives, before the table
    rows = table_rows(out, "flow_matching")
    student_rows = [row for row in rows if " distilled to its S=2 grid" in row]
    assert len(rows) == 8 and len(student_rows) == 4  # S = 1, 2 on grids p = 1, 3
    teacher_rows = [row.split(" | ")[5:] for row in rows if row not in student_rows and "[grid p=3]" not in row]
    assert teacher_rows == reflowed[:2]  # the same teacher
    assert [row.split(" | ")[5:] for row in student_rows if "[grid p=3]" not in row] != reflowed[2:]  # another student


@pytest.mark.parametrize(
    ("objective", "rounds", "expected"),
    [
        ("grid", 0, " distilled to its S=5 grid"),
        ("grid", 2, " distilled to its S=5 grid, 2 on-policy rounds"),
        ("reflow", 0, " after one reflow round"),
    ],
)
def test_the_student_s_rows_say_how_it_was_taught(scripts, objective, rounds, expected):
    _, reflow = scripts
    args = SimpleNamespace(student_objective=objective, student_grid_steps=5, on_policy_rounds=rounds)
    assert reflow.student_suffix(args) == expected


def test_the_probe_s_path_and_clip_readings_are_rows_for_both(scripts, saved_teacher, capsys):
    _, reflow = scripts
    extra = ["--endpoint_times", "0.5", "--clip_frames", "24", "--clip_count", "2"]
    assert reflow.main(["--load_dir", str(saved_teacher), *TINY_ROUND, *extra]) == 0
    rows = table_rows(capsys.readouterr().out, "")
    for name, count in (("x1_hat at s=0.50", 1), ("whole 24-frame clips", 2)):  # one S; each S
        named = [row for row in rows if name in row]
        assert len(named) == 2 * count and sum(reflow.REFLOW_SUFFIX in row for row in named) == count, named


def test_a_teacher_of_other_windows_is_named(scripts, saved_teacher):
    _, reflow = scripts
    with pytest.raises(ValueError, match=r"probe_models.*its windows have 16 frames; pass --num_frames"):
        reflow.main(["--load_dir", str(saved_teacher), *TINY_ROUND, "--num_frames", "8"])


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--pairs", "0"], "--pairs must be >= 1, got 0"),
        (["--teacher_grid_power", "0.5"], "--teacher_grid_power must be >= 1, got 0.5"),
        (["--time_grid_powers", "0.5"], "--time_grid_powers must all be >= 1, got [0.5]"),
        (["--endpoint_times", "1"], "--endpoint_times must all be in [0, 1), got [1.0]"),
        (["--clip_frames", "16"], "--clip_frames must be 0 or more than --num_frames=16"),
        (["--clip_count", "0"], "--clip_count must be >= 1, got 0"),
        (["--num_samples", "0"], "--num_samples, --reference_windows and every --num_steps must be >= 1"),
        (["--student_grid_steps", "0"], "--student_grid_steps must be >= 1, got 0"),
        (["--on_policy_rounds", "-1"], "--on_policy_rounds must be >= 0, got -1"),
        (["--on_policy_rounds", "1"], "--on_policy_rounds=1 needs --student_objective grid and fewer rounds than"),
        (
            [
                "--student_objective",
                "grid",
                "--time_grid_powers",
                "3",
                "--on_policy_rounds",
                "3",
                "--reflow_steps",
                "3",
            ],
            "--on_policy_rounds=3 needs --student_objective grid and fewer rounds than --reflow_steps=3",
        ),
        (
            ["--student_objective", "grid", "--student_grid_steps", "3"],
            "--student_grid_steps=3 must divide --teacher_steps=50 (the student's grid is a subset of the teacher's)",
        ),
        (
            ["--student_objective", "grid", "--num_steps", "2", "5", "--time_grid_powers", "1"],
            "--num_steps must include --student_grid_steps=5 and --time_grid_powers --teacher_grid_power=3",
        ),
        (
            ["--student_objective", "grid", "--num_steps", "2", "--time_grid_powers", "3"],
            "--num_steps must include --student_grid_steps=5 and --time_grid_powers --teacher_grid_power=3",
        ),
    ],
)
def test_bad_arguments_name_themselves(scripts, saved_teacher, capsys, extra, message):
    _, reflow = scripts
    with pytest.raises(SystemExit):
        reflow.parse_args(["--load_dir", str(saved_teacher), *extra])
    assert message in capsys.readouterr().err


def test_a_folder_without_a_probe_model_is_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "reflow_probe.py"), "--load_dir", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"reflow_probe.py: error: {tmp_path}/flow_matching-uniform-rho0-seed0: no probe model there "
        "(expected one saved by dynamics_probe.py)"
    ]
