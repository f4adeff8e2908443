"""The training-step candidates of ``benchmarks/bench_train.py`` (``train_step``, ``train_sweep``) and the
``training.device_speed`` pieces they use: each option computes what the plain step computes (checked on the CPU
against an independent reference, within the tolerances stated here), a kernel named is the kernel that runs, and a
bad variant or setting is a one-line error."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import profile

from tests.script_loading import load_script
from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.training.device_speed import (
    ADAMW_IMPLEMENTATIONS,
    adamw,
    attention_kernel_support,
    attention_kernels,
)

REPO = Path(__file__).resolve().parents[1]
train_step = load_script(REPO / "benchmarks" / "train_step.py", "train_step_under_test")
Variant = train_step.Variant


# ------------------------------------------------------------------------------------------------ AdamW
def reference_adamw(parameters, gradients, steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
    """AdamW (Loshchilov & Hutter, decoupled weight decay; PyTorch's documented update) by hand in float64."""
    values = [p.detach().double().clone() for p in parameters]
    first = [torch.zeros_like(v) for v in values]
    second = [torch.zeros_like(v) for v in values]
    for step in range(1, steps + 1):
        for index, (value, gradient) in enumerate(zip(values, gradients[step - 1])):
            gradient = gradient.double()
            value.mul_(1 - lr * weight_decay)
            first[index] = betas[0] * first[index] + (1 - betas[0]) * gradient
            second[index] = betas[1] * second[index] + (1 - betas[1]) * gradient**2
            corrected = first[index] / (1 - betas[0] ** step)
            denominator = (second[index] / (1 - betas[1] ** step)).sqrt() + eps
            value.sub_(lr * corrected / denominator)
    return values


@pytest.mark.parametrize("implementation", sorted(ADAMW_IMPLEMENTATIONS))
def test_every_adamw_implementation_is_adamw_by_hand(implementation):
    generator = torch.Generator().manual_seed(0)
    shapes = [(7, 5), (5,), (3, 4, 2)]
    parameters = [torch.nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]
    gradients = [[torch.randn(shape, generator=generator) for shape in shapes] for _ in range(3)]
    expected = reference_adamw(parameters, gradients, steps=3)
    optimizer = adamw(parameters, "cpu", implementation, lr=1e-3, weight_decay=1e-2)
    assert optimizer.defaults["fused"] is (True if implementation == "fused" else None)
    assert optimizer.defaults["foreach"] is {"fused": None, "foreach": True, "loop": False}[implementation]
    for step_gradients in gradients:
        for parameter, gradient in zip(parameters, step_gradients):
            parameter.grad = gradient.clone()
        optimizer.step()
    for parameter, value in zip(parameters, expected):  # float32 arithmetic against float64: 1e-6 of a unit
        torch.testing.assert_close(parameter.detach().double(), value, atol=1e-6, rtol=1e-6)


def test_a_fused_step_marks_its_parameters_changed_as_the_others_do():
    # the fused kernel itself leaves the version counters alone; a cache keyed on them would read stale weights
    parameters = [torch.nn.Parameter(torch.ones(3)) for _ in range(2)]
    bare = torch.optim.AdamW(parameters, fused=True)
    for parameter in parameters:
        parameter.grad = torch.ones(3)
    bare.step()
    assert [p._version for p in parameters] == [0, 0]
    for implementation in sorted(ADAMW_IMPLEMENTATIONS):
        optimizer = adamw(parameters, "cpu", implementation)
        before = [p._version for p in parameters]
        optimizer.step()
        assert all(p._version > v for p, v in zip(parameters, before)), implementation


def test_an_unknown_adamw_implementation_is_named():
    with pytest.raises(ValueError, match=r"^adamw: implementation must be one of \['foreach', 'fused', 'loop'\]"):
        adamw([torch.nn.Parameter(torch.zeros(1))], "cpu", "apex")


def test_the_steps_with_each_adamw_agree_and_the_fused_one_dispatches_fewer_ops():
    config = GazeFlowConfig.tiny(use_lora=True)
    batch = train_step.random_batch(config, 2, torch.device("cpu"))
    names = ("B2", "B2+adamw=fused", "B2+adamw=foreach")
    steps = {name: train_step.TrainStep(config, Variant.parse(name), torch.device("cpu")) for name in names}
    losses = {}
    for name, step in steps.items():
        torch.manual_seed(1)  # the same noise and LoRA dropout in every run
        losses[name] = [float(step(batch)) for _ in range(2)]
    plain = dict(steps["B2"].model.named_parameters())
    for name in ("B2+adamw=fused", "B2+adamw=foreach"):
        # the first step's loss is the same computation; the second reads parameters one update apart in rounding
        assert losses[name][0] == losses["B2"][0]
        assert losses[name][1] == pytest.approx(losses["B2"][1], rel=1e-5)
        for parameter_name, parameter in steps[name].model.named_parameters():
            torch.testing.assert_close(parameter, plain[parameter_name], atol=1e-6, rtol=1e-5)
    loop_ops = train_step.step_ops(steps["B2"], batch)["compute"]
    fused_ops = train_step.step_ops(steps["B2+adamw=fused"], batch)["compute"]
    assert loop_ops - fused_ops >= len(steps["B2"].trainable)  # at least one op per trainable tensor saved


# ------------------------------------------------------------------------------------------------ attention kernels
def attention_ops(kernel: str | None) -> set[str]:
    query = torch.randn(2, 2, 16, 8, requires_grad=True)
    with attention_kernels(kernel), profile() as profiler:
        torch.nn.functional.scaled_dot_product_attention(query, query, query).sum().backward()
    return {event.name for event in profiler.events()}


def test_the_kernel_named_is_the_kernel_that_runs_and_the_setting_is_undone():
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in attention_ops(None)  # PyTorch's CPU choice
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in attention_ops("flash")
    math_ops = attention_ops("math")
    assert "aten::_scaled_dot_product_attention_math" in math_ops
    assert not any("flash" in name for name in math_ops)
    assert "aten::_scaled_dot_product_attention_math" in attention_ops("cudnn")  # no cuDNN on a CPU: math, no other
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in attention_ops(None)  # the context restored it


def test_an_unknown_attention_kernel_is_named_and_support_is_empty_off_cuda():
    with pytest.raises(ValueError, match=r"^attention_kernels: the kernel must be one of \['cudnn', 'efficient'"):
        attention_kernels("fa3")
    assert attention_kernel_support((1, 2, 16, 8), torch.bfloat16, "cpu") == {}


def loss_and_gradients(config: GazeFlowConfig, kernel: str | None, attn_implementation: str = "sdpa"):
    torch.manual_seed(0)
    model = GazeFlowModel(config).train()
    model.set_attn_implementation(attn_implementation)
    assert model.video_encoder.config._attn_implementation == attn_implementation
    for module in model.modules():  # LoRA dropout off: the same computation in every run, whatever the RNG
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    batch = train_step.random_batch(config, 2, torch.device("cpu"))
    with attention_kernels(kernel):
        loss = model(**batch, generator=torch.Generator().manual_seed(1)).loss
        loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kernel", ["math", "flash"])
def test_each_attention_kernel_gives_the_eager_loss_and_gradients(kernel):
    config = GazeFlowConfig.tiny(use_lora=True)
    expected_loss, expected = loss_and_gradients(config, None, "eager")  # transformers' matmul-softmax attention
    loss, gradients = loss_and_gradients(config, kernel)
    assert loss.item() == pytest.approx(expected_loss.item(), rel=1e-5)  # float32: kernels differ in rounding only
    assert gradients.keys() == expected.keys() and any("lora_" in name for name in gradients)
    for name, gradient in gradients.items():
        torch.testing.assert_close(gradient, expected[name], atol=1e-5, rtol=1e-4, msg=name)


# ------------------------------------------------------------------------------------------------ the variants
def test_nodrop_builds_the_adapters_without_dropout_and_leaves_the_config_alone():
    config = GazeFlowConfig.tiny(use_lora=True)
    plain = train_step.TrainStep(config, Variant.parse("B1"), torch.device("cpu"))
    nodrop = train_step.TrainStep(config, Variant.parse("B1+nodrop"), torch.device("cpu"))
    assert config.lora_dropout == 0.05 and nodrop.model.config.lora_dropout == 0.0

    def adapter_dropouts(step):
        modules = step.model.video_encoder.named_modules()
        return [type(module) for name, module in modules if name.endswith(".lora_dropout.default")]

    layers = config.encoder_config.num_hidden_layers
    assert adapter_dropouts(plain) == [torch.nn.Dropout] * 2 * layers  # query and value in every layer
    assert adapter_dropouts(nodrop) == [torch.nn.Identity] * 2 * layers


def test_compiled_variants_trace_again_when_the_kernel_or_the_mode_changes(monkeypatch):
    resets, modes = [], []
    monkeypatch.setattr(train_step.torch.compiler, "reset", lambda: resets.append(True))
    monkeypatch.setattr(train_step, "compile_encoder_layers", lambda model, **kwargs: modes.append(kwargs))
    monkeypatch.setattr(train_step, "_last_compile_key", [None])
    config = GazeFlowConfig.tiny(use_lora=True)
    for name in (
        "B1+compile",
        "B1+compile+nodrop",
        "B1+compile+sdpa=math",
        "B1+compile+sdpa=math",
        "B1+compile+graphs",
    ):
        train_step.TrainStep(config, Variant.parse(name), torch.device("cpu"))
    assert len(resets) == 2  # to sdpa=math, then to graphs; never between variants traced alike
    assert modes == [{}, {}, {}, {}, {"mode": "reduce-overhead"}]


def test_variants_parse_and_bad_ones_are_one_line_errors():
    variant = Variant.parse("B8+fast+compile+graphs+sdpa=cudnn+adamw=foreach+nodrop")
    assert (variant.batch, variant.attention, variant.optimizer, variant.graphs, variant.no_lora_dropout) == (
        8,
        "cudnn",
        "foreach",
        True,
        True,
    )
    for text in ("B8+sdpa=fa3", "B8+adamw", "B8+fast+fast", "B8+sdpa=math+sdpa=flash", "fast", "B8+cudnn"):
        with pytest.raises(ValueError, match=r"^--variants: .* must be B<clips> joined with") as error:
            Variant.parse(text)
        assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"'graphs' \(CUDA graphs of the compiled layers\) needs 'compile'"):
        Variant.parse("B8+graphs")


def test_bench_train_names_a_bad_variant_on_one_line():
    result = subprocess.run(
        [sys.executable, "benchmarks/bench_train.py", "--variants", "B2+sdpa=fa3"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("bench_train.py: error: --variants: 'B2+sdpa=fa3' must be")


def test_the_gpu_suites_training_variants_parse(tmp_path):
    result = subprocess.run(
        ["bash", "benchmarks/gpu_suite.sh", str(tmp_path), "--dry-run", "--only", "train"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    command = next(line for line in result.stdout.splitlines() if line.startswith("== train"))
    words = command.split()
    variants = words[words.index("--variants") + 1 : words.index("--data-variants")]
    parsed = [Variant.parse(text) for text in variants + [words[words.index("--data-variants") + 1]]]
    assert {v.attention for v in parsed} >= {None, "cudnn", "flash"} and any(v.graphs for v in parsed)
    assert variants[0] == words[words.index("--data-variants") + 1]  # the baseline is the data-fed step


def test_the_profile_puts_the_loop_optimizers_ops_and_host_reads_in_its_phase():
    config = GazeFlowConfig.tiny(use_lora=True)
    batch = train_step.random_batch(config, 2, torch.device("cpu"))
    profiles = {}
    for name in ("B2+adamw=loop", "B2+adamw=fused"):
        step = train_step.TrainStep(config, Variant.parse(name), torch.device("cpu"))
        step(batch)  # the optimizer's state made
        profiles[name] = (train_step.step_profile(step, batch), len(step.trainable))
    loop, trainable = profiles["B2+adamw=loop"]
    fused, _ = profiles["B2+adamw=fused"]
    assert set(loop["by_phase"]) == {"forward", "backward", "clip", "optimizer", "ema"}
    assert loop["host_syncs_by_phase"]["optimizer"] == trainable  # the loop reads each tensor's step count back
    # the loop dispatches several ops per tensor, the fused one a few for all of them
    assert loop["by_phase"]["optimizer"] >= 5 * trainable and fused["by_phase"]["optimizer"] < trainable
    assert set(loop["forward_by_part"]) == {"video_encoder", "condition_encoder", "velocity_network"}
