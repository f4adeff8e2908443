"""The scheduler (scheduling_gazeflow): the noise processes and their inverses, against the paper's formulas, and the
projection hook the coherent windows use."""

import ast
from pathlib import Path

import pytest
import torch

from transformers_gazeflow import GazeFlowConfig
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import (
    REGRESSION_INPUT_TIME,
    DDIMScheduler,
    FlowMatchingScheduler,
    RegressionScheduler,
    estimate_endpoint,
    scaled,
    scheduler_for,
)

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformers_gazeflow"


def test_ot_interpolant_and_its_velocity_target():
    scheduler = FlowMatchingScheduler(sigma_min=0.1)
    g = torch.tensor([[0.5, -0.25]], dtype=torch.float64)
    x0 = torch.tensor([[-1.0, 2.0]], dtype=torch.float64)
    assert torch.equal(scheduler.add_noise(g, x0, 0.0), x0)
    assert torch.allclose(scheduler.add_noise(g, x0, 1.0), g + 0.1 * x0)
    assert torch.allclose(scheduler.add_noise(g, x0, 0.3), 0.73 * x0 + 0.3 * g)
    # the target is d x_s / ds, the same at every s (a straight path)
    h = 1e-6
    derivative = (scheduler.add_noise(g, x0, 0.4 + h) - scheduler.add_noise(g, x0, 0.4 - h)) / (2 * h)
    assert torch.allclose(derivative, scheduler.velocity_target(g, x0), atol=1e-8)
    assert torch.allclose(scheduler.velocity_target(g, x0), g - 0.9 * x0)
    # per-example times broadcast
    times = torch.tensor([0.0, 1.0], dtype=torch.float64).view(2, 1, 1)
    both = scheduler.add_noise(g.expand(2, 1, 2), x0.expand(2, 1, 2), times)
    assert torch.allclose(both[0], x0) and torch.allclose(both[1], g + 0.1 * x0)


def test_the_endpoint_of_the_true_velocity_is_the_data_point_up_to_sigma_min():
    scheduler = FlowMatchingScheduler(sigma_min=1e-3)
    g, x0 = torch.randn(3, 4, 2, dtype=torch.float64), torch.randn(3, 4, 2, dtype=torch.float64)
    for s in (0.0, 0.25, 0.9):
        x_s = scheduler.add_noise(g, x0, s)
        endpoint = estimate_endpoint(x_s, s, scheduler.velocity_target(g, x0))
        assert torch.allclose(endpoint, g + 1e-3 * x0, atol=1e-12)  # = x_1, whatever s


def test_ddim_noising_and_clean_estimate_are_inverse():
    scheduler = DDIMScheduler(5, 1000)
    g = torch.rand(2, 6, 2, dtype=torch.float64) * 1.8 - 0.9
    eps = torch.randn(2, 6, 2, dtype=torch.float64)
    for t in (0, 400, 999):
        x_t = scheduler.add_noise(g, eps, t)
        alpha_bar = scheduler.alpha_bar(t)
        assert torch.allclose(x_t, alpha_bar**0.5 * g + (1 - alpha_bar) ** 0.5 * eps)
        assert torch.allclose(scheduler.clean_estimate(x_t, eps, alpha_bar), g, atol=1e-9)
    assert torch.equal(scheduler.add_noise(g, eps, -1), g)  # t = -1: the clean end
    timesteps = torch.tensor([0, 999])
    tensor_alpha = scheduler.alpha_bar_of(timesteps, g)
    assert tensor_alpha.shape == (2, 1, 1)
    assert torch.allclose(scheduler.noised(g, eps, tensor_alpha)[1], scheduler.add_noise(g[1], eps[1], 999))
    assert scheduler.model_time(500) == 0.5


@pytest.mark.parametrize("solver", ["euler", "heun", "midpoint"])
def test_every_network_call_sees_the_projected_state(solver):
    """``project`` pins frame 0 to the interpolant of a known trajectory: each call reads exactly that value, and
    frame 1 (free) evolves by the solver."""
    scheduler = FlowMatchingScheduler(4, solver, sigma_min=1e-3)
    known = torch.tensor([0.6, -0.4])
    noise = torch.randn(1, 2, 2, 2, generator=torch.Generator().manual_seed(0))
    seen = []

    def project(x, s):
        x = x.clone()
        x[:, :, 0] = scheduler.add_noise(known, noise[:, :, 0], s)
        return x

    def model_fn(x, s, x1_hat):
        seen.append((s, x[:, :, 0].clone()))
        return -x

    free = scheduler.sample(model_fn, noise, project=project)
    assert len(seen) == 4 * scheduler.calls_per_step
    for s, value in seen:
        assert torch.allclose(value, scheduler.add_noise(known, noise[:, :, 0], s), atol=1e-6), s
    plain = scheduler.sample(lambda x, s, x1: -x, noise)
    assert torch.allclose(free[:, :, 1], plain[:, :, 1])  # -x acts frame by frame: frame 1 is untouched


def test_the_scheduler_step_is_pure():
    scheduler = FlowMatchingScheduler(3, "heun")
    x, x1_hat = torch.randn(1, 2, 3, 2), torch.randn(1, 2, 3, 2)
    before = (x.clone(), x1_hat.clone())
    first = scheduler.step(lambda a, s, b: a * s + b, x, x1_hat, 0.0, 1 / 3)
    second = scheduler.step(lambda a, s, b: a * s + b, x, x1_hat, 0.0, 1 / 3)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    assert torch.equal(x, before[0]) and torch.equal(x1_hat, before[1])


def test_scheduler_for_each_objective():
    flow = scheduler_for(GazeFlowConfig.tiny(sigma_min=0.01), 4, "midpoint")
    assert isinstance(flow, FlowMatchingScheduler) and (flow.num_steps, flow.solver, flow.sigma_min) == (
        4,
        "midpoint",
        0.01,
    )
    ddim = scheduler_for(GazeFlowConfig.tiny(objective="diffusion", diffusion_timesteps=50), 5)
    assert isinstance(ddim, DDIMScheduler) and ddim.timesteps() == [49, 39, 29, 19, 9]
    regression = scheduler_for(GazeFlowConfig.tiny(objective="regression"), 5)
    assert isinstance(regression, RegressionScheduler)
    calls = []
    out = regression.sample(lambda x, s, x1: calls.append((x.abs().sum().item(), s)) or x + 1, torch.randn(1, 1, 3, 2))
    assert calls == [(0.0, REGRESSION_INPUT_TIME)] and torch.equal(out, torch.ones(1, 1, 3, 2))
    with pytest.raises(ValueError, match="num_steps"):
        FlowMatchingScheduler(0)
    with pytest.raises(ValueError, match="solver"):
        FlowMatchingScheduler(2, "rk4")


def test_the_scheduler_imports_only_torch_the_config_and_the_conventions():
    """The scheduler sits below the model and the samplers: objectives and engines import it, it imports neither."""
    tree = ast.parse((PACKAGE / "models" / "gazeflow" / "scheduling_gazeflow.py").read_text(encoding="utf-8"))
    ours = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            ours.add(node.module)
        elif isinstance(node, ast.Import):
            assert all(alias.name.split(".")[0] in {"torch", "math"} for alias in node.names)
    assert ours <= {"configuration_gazeflow", "geometry", "windows", "choices"}, ours


def test_progress_runs_from_noise_to_data_for_both_schedulers():
    flow, ddim = FlowMatchingScheduler(5), DDIMScheduler(5, 1000)
    assert [flow.progress(s) for s in flow.timesteps()] == flow.timesteps()
    assert ddim.progress(999) == 0.0 and ddim.progress(-1) == 1.0 and ddim.progress(199) == 0.8


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_scaled_is_the_python_float_product_bit_for_bit(dtype):
    """The scheduler's steps multiply by 0-dim tensors kept per value (fewer host ops); every product equals the
    Python float's, for the dtypes it keeps a tensor for and the ones it passes through (bf16)."""
    tensor = torch.randn(3, 30, 8, 2, generator=torch.Generator().manual_seed(0)).to(dtype)
    for factor in (0.2, 1 / 3, 0.8, 1 / 7, 1.0 - 0.6, 1000.0):
        assert torch.equal(scaled(factor, tensor), factor * tensor), factor
    flow_time = torch.full((3, 1, 1, 1), 0.25, dtype=dtype)  # a tensor factor (training) is used as it is
    assert torch.equal(scaled(flow_time, tensor), flow_time * tensor)


def test_a_time_grid_power_puts_the_steps_near_the_data_end():
    assert FlowMatchingScheduler(5).timesteps() == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    late = FlowMatchingScheduler(4, time_grid_power=2.0).timesteps()
    assert late == pytest.approx([0.0, 1 - 0.75**2, 1 - 0.5**2, 1 - 0.25**2, 1.0])  # s_i = 1 - (1 - i / S)^2
    recorded = []

    def record(sample, time, self_condition):
        recorded.append(time)
        return torch.zeros_like(sample)

    FlowMatchingScheduler(4, "heun", time_grid_power=2.0).sample(record, torch.zeros(1, 1, 2, 2))
    assert recorded[::2] == pytest.approx(late[:-1]) and recorded[1::2] == pytest.approx(late[1:])
    with pytest.raises(ValueError, match="`time_grid_power` must be a number >= 1, got 0.5"):
        FlowMatchingScheduler(4, time_grid_power=0.5)


def test_the_config_time_grid_reaches_the_window_sampler_and_the_streamer():
    """``config.time_grid_power`` p = 2 at S = 2: flow times 0 and 1 - (1 - 1/2)^2 = 0.75, read by the windowed
    sampler's network calls and prepared in the causal streamer's step."""
    from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
    from transformers_gazeflow.generation.streaming_step import GazeFlowStreamerStep
    from transformers_gazeflow.models.gazeflow.generation_gazeflow import SamplingSettings

    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, causal=True, time_grid_power=2)).eval()
    settings = SamplingSettings.resolve(model.config, num_samples=1, num_steps=2)
    assert GazeFlowStreamerStep(model, settings).velocity_network.flow_times == [0.0, 0.75]
    seen = []
    original = model.velocity

    def recording(sample, flow_time, *args, **kwargs):
        seen.append(float(flow_time) if not torch.is_tensor(flow_time) else flow_time.flatten()[0].item())
        return original(sample, flow_time, *args, **kwargs)

    model.velocity = recording
    model.generate(encoder_hidden_states=torch.randn(1, 16, 32), num_samples=1, num_steps=2)
    assert seen == [0.0, 0.75]
    with pytest.raises(ValueError, match=r"^GazeFlowConfig: `time_grid_power` must be a number >= 1"):
        GazeFlowConfig.tiny(time_grid_power=0.5)
