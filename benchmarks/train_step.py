"""The training step ``bench_train.py`` measures: ``examples/train.py``'s (forward, backward, gradient clipping, AdamW,
the EMA update) built as a :class:`~train_sweep.Variant` says, its random inputs, and the ops one step dispatches.

The presets: ``paper`` (ViT-L, 24 layers, 64 frames of 256x256, LoRA r16 on query/value: the paper's geometry),
``paper16`` (the same model on 16x16 frames, one token per tubelet: every layer, adapter, attention and optimizer
tensor of the paper's step, op for op, at a CPU's cost; its timings are not the paper's) and ``tiny`` (the test model).
"""

from __future__ import annotations

import copy
from collections import Counter

import torch
from op_counts import VIEW_AND_ALLOCATION_OPS, count_aten_ops
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.profiler import record_function
from train_sweep import Variant
from transformers import VJEPA2Config

from transformers_gazeflow import GazeFlowConfig, GazeFlowModel
from transformers_gazeflow.training.device_speed import (
    FrozenWeightCast,
    adamw,
    attention_kernels,
    compile_encoder_layers,
    enable_gradient_checkpointing,
)

PRESETS = ("paper", "paper16", "tiny")


def make_config(preset: str) -> GazeFlowConfig:
    """The model of ``preset`` (:data:`PRESETS`), with LoRA."""
    if preset == "tiny":
        return GazeFlowConfig.tiny(use_lora=True)
    if preset == "paper16":
        return GazeFlowConfig(use_lora=True, encoder_config=VJEPA2Config(crop_size=16))
    return GazeFlowConfig(use_lora=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


_last_compile_key: list = [None]  # the settings the compiled layers were last traced under, in this process


class TrainStep:
    """One model, optimizer and EMA set up as ``variant`` says; ``__call__(batch)`` runs one training step.

    ``probe``: AdamW fused on a GPU, no clipping, no EMA; ``fast``: the frozen matrix weights in bf16 once and fused
    AdamW on a GPU; ``adamw=``: that AdamW implementation instead; ``sdpa=``: the attention kernel tried first, for
    the whole step (its compiled layers are traced under it); ``compile``/``graphs``: each encoder layer compiled,
    as CUDA graphs with ``graphs``; ``nodrop``: the config's LoRA dropout set to 0."""

    def __init__(self, config: GazeFlowConfig, variant: Variant, device: torch.device) -> None:
        if variant.no_lora_dropout:
            config = copy.deepcopy(config)
            config.lora_dropout = 0.0
        torch.manual_seed(0)
        with device:
            self.model = GazeFlowModel(config).train()
        self.device, self.variant = device, variant
        if variant.checkpointing:
            enable_gradient_checkpointing(self.model)
        on_gpu = device.type == "cuda"
        self.cast = FrozenWeightCast(self.model) if variant.fast and on_gpu else None
        if variant.compile:
            if _last_compile_key[0] not in (None, variant.compile_key):
                torch.compiler.reset()  # the kernel and the mode are baked into the traced graphs: trace again
            _last_compile_key[0] = variant.compile_key
            compile_encoder_layers(self.model, **({"mode": "reduce-overhead"} if variant.graphs else {}))
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        settings = dict(lr=1e-4, betas=(0.9, 0.999), weight_decay=1e-4)
        if variant.optimizer is not None:
            self.optimizer = adamw(self.trainable, device, variant.optimizer, **settings)
        elif variant.probe:  # the probe's optimizer: AdamW fused on a GPU
            self.optimizer = adamw(self.trainable, device, "fused" if on_gpu else None, **settings)
        elif variant.fast:
            self.optimizer = adamw(self.trainable, device, **settings)
        else:  # train.py before the GPU settings
            self.optimizer = torch.optim.AdamW(self.trainable, **settings)
        self.ema = None if variant.probe else AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(0.995))
        self.autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=on_gpu)

    def __call__(self, batch: dict) -> torch.Tensor:
        if self.variant.graphs:
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the graphs' previous outputs may be overwritten
        with attention_kernels(self.variant.attention):
            with record_function("step:forward"), self.autocast:
                loss = self.model(
                    pixel_values_videos=batch["pixel_values_videos"],
                    gaze=batch["gaze"],
                    valid_mask=batch.get("valid_mask"),
                ).loss
            with record_function("step:backward"):
                loss.backward()
        if not self.variant.probe:
            with record_function("step:clip"):
                torch.nn.utils.clip_grad_norm_(self.trainable, 1.0)
        with record_function("step:optimizer"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            with record_function("step:ema"):
                self.ema.update_parameters(self.model)
        return loss.detach()


def random_batch(config: GazeFlowConfig, batch: int, device: torch.device) -> dict:
    generator = torch.Generator().manual_seed(0)
    size, frames = config.image_size, config.num_frames
    return {
        "pixel_values_videos": torch.randn(batch, frames, 3, size, size, generator=generator).to(device),
        "gaze": (torch.rand(batch, frames, 2, generator=generator) * 2 - 1).to(device),
        "valid_mask": torch.ones(batch, frames, dtype=torch.bool, device=device),
    }


def step_ops(step: TrainStep, batch: dict) -> dict:
    """The aten ops one more step dispatches (``op_counts.count_aten_ops``: all, compute, top level) and on CUDA the
    kernels it launches."""
    device = step.device

    def one_step() -> None:
        step(batch)
        synchronize(device)

    return count_aten_ops(one_step, cuda=device.type == "cuda")


#: aten ops that wait for the device (a value read back to the host): on a GPU each drains the queue of kernels
HOST_SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")


def step_profile(step: TrainStep, batch: dict) -> dict:
    """Where the ops of one more step go: the compute ops our Python dispatched (top level, no views or allocations)
    by phase (``forward``, ``backward``, ``clip``, ``optimizer``, ``ema``), the forward's by the model's parts, the
    backward's by autograd node (the 8 largest), and the ops that read a value back to the host, by phase."""
    from torch.profiler import ProfilerActivity, profile

    hooks, open_labels = [], []

    def enter(name: str):
        def hook(module, args) -> None:
            open_labels.append(record_function(f"part:{name}"))
            open_labels[-1].__enter__()

        return hook

    def leave(module, args, output) -> None:
        open_labels.pop().__exit__(None, None, None)

    for name, module in step.model.named_children():
        hooks += [module.register_forward_pre_hook(enter(name)), module.register_forward_hook(leave)]
    try:
        with profile(activities=[ProfilerActivity.CPU]) as profiler:
            step(batch)
            synchronize(step.device)
    finally:
        for hook in hooks:
            hook.remove()
    by_phase, by_part, by_node, syncs = Counter(), Counter(), Counter(), Counter()
    for event in profiler.events():
        if not event.name.startswith("aten::"):
            continue
        parents = []
        parent = event.cpu_parent
        while parent is not None:
            parents.append(parent.name)
            parent = parent.cpu_parent
        phase = next((name.split(":", 1)[1] for name in parents if name.startswith("step:")), "other")
        if event.name in HOST_SYNC_OPS:
            syncs[phase] += 1
        if (parents and parents[0].startswith("aten::")) or event.name in VIEW_AND_ALLOCATION_OPS:
            continue
        by_phase[phase] += 1
        part = next((name.split(":", 1)[1] for name in parents if name.startswith("part:")), None)
        if part is not None:
            by_part[part] += 1
        node = next(
            (name.rsplit(": ", 1)[-1] for name in parents if name.startswith("autograd::engine::evaluate")), None
        )
        if node is not None:
            by_node[node] += 1
    return {
        "by_phase": dict(by_phase),
        "forward_by_part": dict(by_part.most_common()),
        "backward_by_node": dict(by_node.most_common(8)),
        "host_syncs_by_phase": dict(syncs),
    }
