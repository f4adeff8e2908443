"""The streaming blender equals blend_windows, piece by piece, and hands frames back as soon as they are final."""

import pytest
import torch

from transformers_gazeflow.models.gazeflow.windows import StreamingBlender, blend_windows, window_starts


@pytest.mark.parametrize("num_frames", [1, 5, 8, 9, 12, 13, 16, 17, 31, 64, 100])
@pytest.mark.parametrize("window,stride", [(8, 4), (8, 8), (8, 3), (6, 1)])
@pytest.mark.parametrize("frame_dim", [0, 1, 2])
def test_streaming_blend_equals_blend_windows(num_frames, window, stride, frame_dim):
    generator = torch.Generator().manual_seed(num_frames * 100 + window * 10 + stride)
    starts = window_starts(num_frames, window, stride)
    shape = [3, 2, 2]
    shape[frame_dim] = window
    values = [torch.randn(shape, generator=generator, dtype=torch.float64) for _ in starts]
    expected = blend_windows(values, starts, num_frames, frame_dim=frame_dim)

    blender = StreamingBlender(frame_dim=frame_dim)
    pieces = []
    for value, start in zip(values, starts):
        covered_before = blender.emitted
        piece = blender.push(value, start)
        if piece is not None:
            assert piece.shape[frame_dim] == start - covered_before  # everything before the new start is final
            pieces.append(piece)
        assert blender.emitted == start
    pieces.append(blender.finish(num_frames))
    streamed = torch.cat(pieces, dim=frame_dim)
    assert streamed.shape == expected.shape
    assert torch.allclose(streamed, expected, atol=1e-12, rtol=0)


def test_streaming_blender_holds_at_most_one_window():
    blender = StreamingBlender(frame_dim=0)
    for start in window_starts(1000, 8, 4):
        blender.push(torch.zeros(8, 2), start)
        assert blender.covered_until - blender.emitted <= 8


def test_streaming_blender_rejects_bad_orders():
    blender = StreamingBlender(frame_dim=0)
    with pytest.raises(ValueError, match="first window must start at frame 0"):
        blender.push(torch.zeros(8, 2), 4)
    blender.push(torch.zeros(8, 2), 0)
    with pytest.raises(ValueError, match="must lie after the previous start"):
        blender.push(torch.zeros(8, 2), 0)
    with pytest.raises(ValueError, match="must lie after the previous start"):
        blender.push(torch.zeros(8, 2), 9)  # a gap: frame 8 would be uncovered
    with pytest.raises(ValueError, match="ends inside"):
        blender.push(torch.zeros(2, 2), 4)
    with pytest.raises(ValueError, match="cannot end the clip"):
        blender.finish(9)
    assert blender.finish(8).shape == (8, 2)
    with pytest.raises(ValueError, match="no window was pushed"):
        StreamingBlender(frame_dim=0).finish(3)


def test_keep_mode_keeps_the_earlier_values_and_overlap_reads_them():
    """mode="keep" (the noise of coherent windows): an overlap keeps what earlier windows gave it; ``overlap(start)``
    is what a window starting there shares with the frames stitched so far."""
    blender = StreamingBlender(frame_dim=1, mode="keep")
    first, second, third = (torch.full((1, 8, 2), float(v)) for v in (1, 2, 3))
    assert blender.overlap(0) is None
    blender.push(first, 0)
    assert torch.equal(blender.overlap(4), first[:, 4:]) and blender.overlap(8) is None
    assert blender.push(second, 4).shape == (1, 4, 2)
    third_start = 6  # an end-aligned window overlapping 6 frames
    shared = blender.overlap(third_start)
    assert torch.equal(shared, torch.cat([torch.full((1, 2, 2), 1.0), torch.full((1, 4, 2), 2.0)], dim=1))
    blender.push(third, third_start)
    rest = blender.finish(14)
    assert torch.equal(rest[:, :2], torch.full((1, 2, 2), 1.0))
    assert torch.equal(rest[:, 2:6], torch.full((1, 4, 2), 2.0))
    assert torch.equal(rest[:, 6:], torch.full((1, 8, 2), 3.0)[:, 6:])
    blend = StreamingBlender(frame_dim=0)
    blend.push(torch.zeros(8), 0)
    blend.push(torch.ones(8), 4)
    with pytest.raises(ValueError, match="handed back already"):
        blend.overlap(2)
    with pytest.raises(ValueError, match="mode"):
        StreamingBlender(frame_dim=0, mode="average")
