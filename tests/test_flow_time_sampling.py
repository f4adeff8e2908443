"""Flow matching's training-time distribution (``config.flow_time_sampling``): the paper's uniform s, the
late-quadratic s = 1 - (1 - u)^2 and the logit-normal s, drawn in the one scheduler from one uniform per example."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel, unit_to_model
from transformers_gazeflow.models.gazeflow.configuration_gazeflow import FLOW_TIME_SAMPLINGS
from transformers_gazeflow.models.gazeflow.scheduling_gazeflow import draw_training_noise, flow_time_from_uniform

DRAWS = 20_000


def draws(sampling: str, count: int = DRAWS, seed: int = 0):
    generators = [torch.Generator().manual_seed(seed * 1_000_003 + i) for i in range(count)]
    return draw_training_noise(
        (count, 4, 2), generators, 0.5, torch.device("cpu"), torch.float32, flow_time_sampling=sampling
    )


def test_uniform_is_the_papers_draw_bit_for_bit():
    generators = [torch.Generator().manual_seed(i) for i in range(64)]
    paper = torch.cat([torch.rand(1, generator=torch.Generator().manual_seed(i)) for i in range(64)])
    noise = draw_training_noise((64, 4, 2), generators, 0.5, torch.device("cpu"), torch.float32)
    assert torch.equal(noise.time, paper)
    explicit = draws("uniform", 64)
    default = draw_training_noise(
        (64, 4, 2), [torch.Generator().manual_seed(i) for i in range(64)], 0.5, torch.device("cpu"), torch.float32
    )
    assert torch.equal(explicit.time, default.time)


@pytest.mark.parametrize(
    "sampling, cdf",
    [
        ("uniform", lambda s: s),
        ("late_quadratic", lambda s: 1 - np.sqrt(1 - s)),  # P(1 - (1 - u)^2 <= s) = P(u <= 1 - sqrt(1 - s))
        ("logit_normal", lambda s: stats.norm.cdf(np.log(s / (1 - s)))),
    ],
)
def test_each_sampling_has_its_distribution(sampling, cdf):
    times = draws(sampling).time.double().numpy()
    assert times.min() >= 0.0 and times.max() <= 1.0  # float32: 1 - (1 - u)^2 can round to 1
    result = stats.kstest(times, cdf)
    assert result.pvalue > 1e-3, (sampling, result)
    # and it is not one of the others (the test can fail: each is far from the other two)
    for other, other_cdf in [("uniform", lambda s: s), ("late_quadratic", lambda s: 1 - np.sqrt(1 - s))]:
        if other != sampling:
            assert stats.kstest(times, other_cdf).pvalue < 1e-6


def test_late_quadratic_puts_a_fifth_of_the_draws_above_0_96():
    late = draws("late_quadratic").time
    uniform = draws("uniform").time
    assert abs((late > 0.96).float().mean().item() - 0.2) < 0.01
    assert abs((uniform > 0.96).float().mean().item() - 0.04) < 0.005
    assert late.mean().item() == pytest.approx(2 / 3, abs=0.01)


@pytest.mark.parametrize("sampling", FLOW_TIME_SAMPLINGS)
def test_the_noise_and_the_coin_of_each_example_do_not_depend_on_the_time_sampling(sampling):
    reference, other = draws("uniform", 32, seed=3), draws(sampling, 32, seed=3)
    assert torch.equal(reference.noise, other.noise)
    assert torch.equal(reference.self_condition, other.self_condition)
    assert torch.equal(other.time, flow_time_from_uniform(reference.time, sampling))


def test_the_model_trains_on_its_configs_time_sampling():
    torch.manual_seed(0)
    model = GazeFlowModel(GazeFlowConfig.tiny(use_lora=False, flow_time_sampling="late_quadratic")).eval()
    tokens = torch.randn(8, 16, 32, generator=torch.Generator().manual_seed(1))
    gaze = unit_to_model(torch.rand(8, 8, 2, generator=torch.Generator().manual_seed(2)))
    generators = [torch.Generator().manual_seed(100 + i) for i in range(8)]
    out = model(encoder_hidden_states=tokens, gaze=gaze, generator=generators)
    uniform = torch.cat([torch.rand(1, generator=torch.Generator().manual_seed(100 + i)) for i in range(8)])
    torch.testing.assert_close(out.flow_time, 1 - (1 - uniform) ** 2)
    assert torch.isfinite(out.loss)


def test_logit_normal_stays_finite_at_the_ends():
    ends = flow_time_from_uniform(torch.tensor([0.0, 1e-12, 0.5, 1 - 1e-7]), "logit_normal")
    assert torch.isfinite(ends).all() and ends[2].item() == pytest.approx(0.5)
    assert 0.0 <= ends.min().item() and ends.max().item() <= 1.0
    assert math.isclose(flow_time_from_uniform(torch.tensor([0.75]), "late_quadratic").item(), 1 - 0.25**2)


def test_a_bad_time_sampling_is_named():
    with pytest.raises(ValueError, match=r"GazeFlowConfig: `flow_time_sampling` must be one of .*got 'late'"):
        GazeFlowConfig.tiny(flow_time_sampling="late")
    with pytest.raises(ValueError, match="flow_time_sampling"):
        draws("cubic", 2)
    config = GazeFlowConfig.tiny(flow_time_sampling="logit_normal")
    assert GazeFlowConfig.from_dict(config.to_dict()).flow_time_sampling == "logit_normal"
    assert GazeFlowConfig.tiny().flow_time_sampling == "uniform"
