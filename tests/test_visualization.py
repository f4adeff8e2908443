"""Overlay drawing: heatmap blending, sample dots, the point-estimate trail, sizes kept."""

import numpy as np
import pytest

from transformers_gazeflow.data.synthetic.scene import TASK_COLORS
from transformers_gazeflow.metrics.heatmaps import heatmap_sigma_px, render_heatmaps
from transformers_gazeflow.outputs.overlay import (
    COLOUR_TABLE,
    SAMPLE_COLOUR,
    OverlayLegend,
    OverlayRenderer,
    OverlayVideoWriter,
    blend_heatmap,
    draw_gaze,
    draw_ground_truth,
    readable_scale,
)


def grey(height=48, width=64):
    return np.full((height, width, 3), 100, np.uint8)


def test_the_heatmap_shows_on_dark_and_on_bright_scenes():
    """Every level of the colour map that is drawn differs clearly from black and from white."""
    assert COLOUR_TABLE.shape == (256, 3) and COLOUR_TABLE.dtype == np.uint8
    heatmap = render_heatmaps(np.array([[[0.5, 0.5]]]), 64, 48, sigma=6.0)[0].numpy()
    for level in (0, 255):
        frame = np.full((48, 64, 3), level, np.uint8)
        out = blend_heatmap(frame, heatmap)
        at_peak = np.abs(out[24, 32].astype(int) - level).max()
        at_two_sigma = np.abs(out[24, 32 + 12].astype(int) - level).max()
        assert at_peak > 100 and at_two_sigma > 40, (level, at_peak, at_two_sigma)
        np.testing.assert_array_equal(out[:, :10], frame[:, :10])  # 3.5 sigma away: untouched


def test_heatmap_is_blended_where_the_mass_is():
    frame = grey()
    heatmap = render_heatmaps(np.array([[[0.25, 0.5]]]), 64, 48, sigma=4.0)[0].numpy()
    out = blend_heatmap(frame, heatmap, max_alpha=0.6)
    assert out.shape == frame.shape and out.dtype == np.uint8
    assert np.abs(out[24, 16].astype(int) - 100).sum() > 50  # at the peak: coloured
    np.testing.assert_array_equal(out[:, 50:], frame[:, 50:])  # far away: the frame as it was
    np.testing.assert_array_equal(blend_heatmap(frame, np.zeros((48, 64))), frame)
    with pytest.raises(ValueError, match="same size"):  # a map larger than the frame, or a box reaching outside it
        blend_heatmap(frame, np.zeros((60, 10)))
    with pytest.raises(ValueError, match="box inside the frame"):
        blend_heatmap(frame, np.ones((10, 10)), origin=(60, 0))
    box = heatmap[10:39, 2:31]  # the same map given as a box of the frame (3.5 sigma around the mass): the same overlay
    np.testing.assert_array_equal(blend_heatmap(frame, box, max_alpha=0.6, origin=(2, 10)), out)


def test_samples_and_point_are_drawn_at_their_pixels():
    frame = grey()
    out = draw_gaze(frame, samples_px=np.array([[10.0, 10.0], [50.0, 30.0]]), point_px=np.array([32.0, 24.0]))
    assert out.shape == frame.shape
    assert tuple(out[10, 10]) == (0, 230, 255) and tuple(out[30, 50]) == (0, 230, 255)  # sample dots
    ring = out[20:29, 28:37].reshape(-1, 3)
    assert (ring == 255).all(axis=1).any()  # the white ring of the point estimate
    assert tuple(out[0, 0]) == (100, 100, 100)


def test_the_uncertainty_region_is_an_outline_around_the_point_estimate():
    frame = np.zeros((120, 160, 3), np.uint8)
    drawn = draw_gaze(frame, np.array([[80.0, 60.0]]), np.array([80.0, 60.0]), region_px=40.0)
    assert drawn[60, 120].min() > 200 and drawn[20, 80].min() > 200  # white on the circle, right and above
    assert drawn[60, 100].max() == 0 and drawn[60, 130].max() == 0  # nothing inside it (but the marks) or beyond
    assert np.array_equal(
        draw_gaze(frame, np.array([[80.0, 60.0]]), np.array([80.0, 60.0])),
        draw_gaze(frame, np.array([[80.0, 60.0]]), np.array([80.0, 60.0]), region_px=None),
    )


def test_ground_truth_is_a_red_disc_or_an_off_frame_ring():
    frame = grey()
    disc = draw_ground_truth(frame, np.array([32.0, 24.0]))
    assert tuple(disc[24, 32]) == (230, 20, 20) and tuple(disc[0, 0]) == (100, 100, 100)
    ring = draw_ground_truth(frame, np.array([63.9, 24.0]), off_frame=True)  # clamped to the right border
    assert tuple(ring[24, 63]) == (100, 100, 100)  # hollow: the centre is the frame
    colours = {tuple(c) for c in ring[14:35, 50:64].reshape(-1, 3)}
    assert (230, 20, 20) in colours and (255, 230, 0) in colours  # the red ring and its yellow halo
    assert frame[24, 32].tolist() == [100, 100, 100]  # the input is left as it was


def test_renderer_keeps_a_short_trail_and_odd_sizes():
    renderer = OverlayRenderer(trail=3)
    frame = grey(31, 17)
    for i in range(6):
        point = np.array([2.0 + 2 * i, 5.0 + 4 * i])
        out = renderer.render(frame, point[None], point, heatmap=np.ones((31, 17)))
        assert out.shape == (31, 17, 3) and out.dtype == np.uint8
    assert len(renderer._trail) == 4
    with pytest.raises(ValueError, match="trail"):
        OverlayRenderer(trail=-1)
    with pytest.raises(ValueError, match="uint8"):
        renderer.render(frame.astype(np.float32), point[None], point)


# ------------------------------------------------------------------------------------------- 720p, as the command draws
def save_overlay_png(frame: np.ndarray, samples: np.ndarray, path, sigma_px: float | None = None, trail: int = 0):
    """Draw one overlay frame exactly as ``gazeflow predict`` does (``commands.overlay_frames.render_overlay_frame``:
    the heatmap at 3.9% of the width unless given, the samples, the point estimate) and save it as PNG. Returns
    (path, sigma)."""
    from PIL import Image

    from transformers_gazeflow.commands.overlay_frames import render_overlay_frame

    sigma = heatmap_sigma_px(frame.shape[1], sigma_px)
    out = render_overlay_frame(OverlayRenderer(trail=trail), frame, samples, samples.mean(axis=0), sigma)
    Image.fromarray(out).save(path)
    return path, sigma


@pytest.mark.parametrize("scene", ["grey noise", "black", "white"])
def test_a_720p_overlay_frame_shows_the_heatmap(tmp_path, scene):
    from PIL import Image

    rng = np.random.default_rng(0)
    height, width = 720, 1280
    if scene == "grey noise":  # every brightness, dark to bright
        frame = np.repeat(rng.integers(0, 256, (height, width, 1), dtype=np.uint8), 3, axis=2)
    else:
        frame = np.full((height, width, 3), 0 if scene == "black" else 255, np.uint8)
    samples = np.array([0.62, 0.4]) + rng.normal(0, 0.003, (16, 2))  # K = 16 samples within ~4 px
    path, sigma = save_overlay_png(frame, samples, tmp_path / "overlay_720p.png")
    assert sigma == pytest.approx(50.0)  # 3.9% of 1280 px: the paper's 25 px at 640 px
    shown = np.asarray(Image.open(path).convert("RGB")).astype(int)
    assert shown.shape == frame.shape
    ys, xs = np.mgrid[0:height, 0:width]
    point = samples.mean(axis=0) * [width, height]
    distance = np.hypot(xs + 0.5 - point[0], ys + 0.5 - point[1])
    difference = np.abs(shown - frame).max(axis=2)
    marks = distance <= 0.03 * height  # the point-estimate ring and the sample dots cover this disc (their colours may
    near = (distance <= 2 * sigma) & ~marks  # equal a noise pixel's): the heatmap shows around it
    assert difference[near].min() >= 25, difference[near].min()  # every pixel within 2 sigma visibly changed
    far_from_samples = np.min([np.hypot(xs + 0.5 - x * width, ys + 0.5 - y * height) for x, y in samples], axis=0)
    assert (difference[far_from_samples > 3 * sigma] == 0).all()  # far away: the frame exactly as it was


def test_the_true_gaze_is_a_distinct_marker():
    frame = grey(96, 128)
    out = draw_gaze(frame, samples_px=np.array([[20.0, 20.0]]), truth_px=np.array([90.0, 60.0]))
    white = (out >= 240).all(axis=-1)
    ys, xs = np.nonzero(white)
    assert white.sum() > 10 and abs(xs.mean() - 90) < 2 and abs(ys.mean() - 60) < 2
    assert not white[:, :60].any()  # only there
    rim = (out[55:66, 85:96] <= 10).all(axis=-1)
    assert rim.sum() > white.sum()  # in a black rim wider than the cross
    np.testing.assert_array_equal(draw_gaze(frame, np.zeros((0, 2)), truth_px=np.array([np.nan, np.nan])), frame)


@pytest.mark.parametrize("background", [*map(tuple, COLOUR_TABLE[::15]), *TASK_COLORS], ids=str)
def test_the_true_gaze_stands_out_on_every_heatmap_colour_and_scene_object(background):
    """The cross's own colour is far (>= 100 in some channel) from each colour the heatmap blends towards and each
    saturated object colour of the synthetic scenes (the magenta cross vanished on the magenta object and the red
    heatmap)."""
    frame = np.empty((96, 128, 3), np.uint8)
    frame[...] = background
    out = draw_gaze(frame, np.zeros((0, 2)), truth_px=np.array([64.0, 48.0]))
    assert np.abs(out[48, 64].astype(int) - np.asarray(background)).max() >= 100


def test_the_legend_is_burned_in_with_each_marks_colours_and_a_small_video_is_enlarged():
    frame = grey(192, 256)
    legend = OverlayLegend(num_samples=16, heatmap=True, region=False, truth=True)
    renderer = OverlayRenderer(trail=0, legend=legend, min_short_side=480)
    samples = np.array([[200.0, 150.0], [210.0, 140.0]])
    out = renderer.render(frame, samples, samples.mean(axis=0), truth_px=np.array([180.0, 120.0]))
    assert out.shape == (576, 768, 3)  # 3x: the short side 192 -> 576 >= 480
    rows = legend.entries()
    assert [mark for mark, _ in rows] == ["samples", "point", "heatmap", "truth"]
    box = out[:120, :300]
    assert (box[2, 2] == frame[0, 0] // 4).all()  # behind the legend, the frame darkened to a quarter
    assert (np.abs(box.astype(int) - SAMPLE_COLOUR).max(axis=-1) < 20).any()  # the samples' swatch
    assert (np.abs(box.astype(int) - COLOUR_TABLE[255].astype(int)).max(axis=-1) < 20).any()  # the heatmap's
    assert (box >= 250).all(axis=-1).sum() > 50  # white text, the ring and the cross
    # the samples are drawn where they are, three times further from the origin
    near = out[int(150 * 3) - 2 : int(150 * 3) + 3, int(200 * 3) - 2 : int(200 * 3) + 3].astype(int)
    assert (np.abs(near - SAMPLE_COLOUR).max(axis=-1) < 40).any()
    plain = OverlayRenderer(trail=0).render(frame, samples, samples.mean(axis=0))
    assert plain.shape == frame.shape and (plain[:20, :20] == frame[:20, :20]).all()  # the library's default: as is
    assert (
        readable_scale(192, 256, 480) == 3
        and readable_scale(720, 1280, 480) == 1
        and readable_scale(100, 50, None) == 1
    )


def test_heatmap_sigma_px():
    assert heatmap_sigma_px(640) == pytest.approx(25.0) and heatmap_sigma_px(256) == pytest.approx(10.0)
    assert heatmap_sigma_px(1280, sigma_px=7) == 7.0 and heatmap_sigma_px(200, fraction=0.1) == pytest.approx(20.0)
    with pytest.raises(ValueError, match="> 0 px"):
        heatmap_sigma_px(100, sigma_px=0)


def test_the_overlay_writer_encodes_in_the_background_and_abort_leaves_nothing(tmp_path):
    from transformers_gazeflow.data.video import iter_frames, probe_video

    frames = [np.full((48, 64, 3), 20 * i, np.uint8) for i in range(10)]
    with OverlayVideoWriter(tmp_path / "a.mp4", fps=12.5) as writer:
        for frame in frames:
            writer.write(frame)
    info = probe_video(tmp_path / "a.mp4")
    assert (info.num_frames, info.width, info.height, info.fps) == (10, 64, 48, 12.5)
    decoded = list(iter_frames(tmp_path / "a.mp4"))
    assert all(abs(int(d.mean()) - int(f.mean())) <= 3 for d, f in zip(decoded, frames))
    odd = OverlayVideoWriter(tmp_path / "odd.mp4", fps=10)
    odd.write(np.zeros((31, 17, 3), np.uint8))
    assert probe_video(odd.close()).width == 17  # odd sizes in 4:4:4
    with pytest.raises(RuntimeError, match="stop"):
        with OverlayVideoWriter(tmp_path / "b.mp4", fps=10) as writer:
            writer.write(frames[0])
            raise RuntimeError("stop")
    assert not (tmp_path / "b.mp4").exists()
    broken = OverlayVideoWriter(tmp_path / "no_such_dir" / "c.mp4", fps=10)
    with pytest.raises(OSError, match="cannot encode the overlay video"):
        for frame in frames * 10:
            broken.write(frame)
        broken.close()
    with pytest.raises(ValueError, match="uint8"):
        OverlayVideoWriter(tmp_path / "d.mp4", fps=10).write(np.zeros((4, 4, 3), np.float32))


def test_the_overlay_writer_can_draw_in_its_thread(tmp_path):
    from transformers_gazeflow.data.video import iter_frames

    with OverlayVideoWriter(
        tmp_path / "drawn.mp4", fps=10, render=lambda level: np.full((16, 16, 3), level, np.uint8)
    ) as writer:
        for level in (0, 128, 255):
            writer.write(level)
    assert [int(frame.mean()) for frame in iter_frames(tmp_path / "drawn.mp4")] == pytest.approx([0, 128, 255], abs=3)

    def broken(item):
        raise KeyError("a drawing bug")

    writer = OverlayVideoWriter(tmp_path / "bug.mp4", fps=10, render=broken)
    with pytest.raises(KeyError, match="a drawing bug"):  # a bug is not disguised as a file error
        for _ in range(100):
            writer.write(0)
        writer.close()
    writer.abort()
    assert not (tmp_path / "bug.mp4").exists()


def test_the_overlay_writer_pads_odd_sizes_to_an_even_4_2_0_video_for_browsers(tmp_path):
    import av

    from transformers_gazeflow.data.video import iter_frames
    from transformers_gazeflow.outputs.overlay import pad_to_even

    frame = grey(47, 63)
    padded = pad_to_even(frame)
    assert padded.shape == (48, 64, 3) and pad_to_even(padded) is padded
    np.testing.assert_array_equal(padded[:47, :63], frame)
    np.testing.assert_array_equal(padded[47, :63], frame[46])  # the edge row repeated
    for even, expected in ((True, ((64, 48), "yuv420p")), (False, ((63, 47), "yuv444p"))):
        path = tmp_path / f"even_{even}.mp4"
        with OverlayVideoWriter(path, fps=10, even_size=even) as writer:
            for _ in range(3):
                writer.write(frame)
        with av.open(str(path)) as container:
            context = container.streams.video[0].codec_context
            assert ((context.width, context.height), context.pix_fmt) == expected
        assert len(list(iter_frames(path))) == 3
