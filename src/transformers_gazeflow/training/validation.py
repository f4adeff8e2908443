"""The validation loss of a training run: what early stopping, the best-weights choice and the trial starts read.

It is measured on the EMA weights with fixed draws of the flow time s, the noise x_0 and the objective's coins (one
generator seeded with ``--seed``), so that two epochs, or two trial starts, are scored on the same draws and the
measurement takes nothing from the training random state.
"""

from __future__ import annotations

import torch

MODEL_INPUTS = ("pixel_values_videos", "encoder_hidden_states", "gaze", "valid_mask")
"""The keys of a collated batch that ``GazeFlowModel.forward`` takes (decoded frames, or the feature cache's encoder
tokens)."""


def model_inputs(batch: dict) -> dict:
    """The model's arguments out of a collated batch (:data:`MODEL_INPUTS` present in it)."""
    return {key: batch[key] for key in MODEL_INPUTS if key in batch}


@torch.no_grad()
def validation_loss(model, dataloader, accelerator, seed: int) -> tuple[float, float | None]:
    """Mean loss of ``config.objective`` (flow matching: Eq. cfm_loss) over the validation windows, with fixed s,
    x_0 and coin draws (comparable across epochs, and drawing nothing from the training random state); and, for a
    model with the grounding head, the mean grounding loss beside it (else None).

    Early stopping and the best-weights choice read the first number only: the grounding loss is a training aid,
    and on small datasets it starts to overfit epochs before the flow-matching loss stops improving."""
    model.eval()
    generator = torch.Generator(device=accelerator.device).manual_seed(seed)
    zero = lambda: torch.zeros((), device=accelerator.device)  # noqa: E731
    objective_total, grounding_total, count = zero(), zero(), zero()
    has_grounding = False
    for batch in dataloader:
        with accelerator.autocast():
            output = model(**model_inputs(batch), generator=generator)
        size = torch.tensor(float(batch["gaze"].shape[0]), device=accelerator.device)
        objective = output.objective_loss if output.objective_loss is not None else output.loss
        objective_total += accelerator.reduce(objective.detach().float() * size, "sum")
        if output.grounding_loss is not None:
            has_grounding = True
            grounding_total += accelerator.reduce(output.grounding_loss.detach().float() * size, "sum")
        count += accelerator.reduce(size, "sum")
    count = count.clamp_min(1)
    return (objective_total / count).item(), ((grounding_total / count).item() if has_grounding else None)


__all__ = ["MODEL_INPUTS", "model_inputs", "validation_loss"]
