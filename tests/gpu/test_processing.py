"""The processor's two resize precisions on the device against the CPU: frames already on the device are processed
there (``GazeFlowVideoProcessor.preprocess`` keeps the input's device)."""

import numpy as np
import torch

from transformers_gazeflow.data.processing import GazeFlowVideoProcessor

from .conftest import full_fp32


def _grey_levels(processed: torch.Tensor, processor: GazeFlowVideoProcessor) -> np.ndarray:
    mean = torch.tensor(processor.image_mean, dtype=torch.float64).view(3, 1, 1)
    std = torch.tensor(processor.image_std, dtype=torch.float64).view(3, 1, 1)
    return ((processed.detach().cpu().double() * std + mean) * 255).numpy()


def test_uint8_resize_on_the_device_is_whole_grey_levels_within_one_of_the_cpus(device):
    """Where the device has no uint8 resize kernel the float32 resize is rounded to whole grey levels: within one
    grey level of the CPU's uint8 kernel (each rounds once, from the same antialiased bilinear weights)."""
    video = np.random.default_rng(0).integers(0, 256, (3, 480, 640, 3), dtype=np.uint8)
    processor = GazeFlowVideoProcessor(size=64, resize_dtype="uint8")
    with full_fp32():
        on_device = _grey_levels(processor.preprocess(torch.from_numpy(video).to(device)), processor)
        exact = _grey_levels(GazeFlowVideoProcessor(size=64).preprocess(torch.from_numpy(video).to(device)), processor)
    on_cpu = _grey_levels(processor.preprocess(video), processor)
    np.testing.assert_allclose(on_device, np.round(on_device), atol=1e-3)
    np.testing.assert_allclose(on_device, on_cpu, atol=1 + 1e-3)
    # rounded from the device's own float32 resize (the CPU's kernel, with fixed-point weights: within one)
    np.testing.assert_allclose(on_device, exact, atol=(1.0 if device.type == "cpu" else 0.5) + 1e-3)
