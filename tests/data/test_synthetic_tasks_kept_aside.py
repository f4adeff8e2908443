"""The kept-aside task families (data/synthetic_tasks_kept_aside.py): each family's rule read back from the rendered
frames, the gaze's share on the target against the share the documented process gives, determinism, and the EGTEA
layout read back through the EGTEA builder."""

import numpy as np
import pytest

from transformers_gazeflow.data.loading import load_gaze_dataset
from transformers_gazeflow.data.synthetic_tasks import GroundingTaskSettings, clip_split, write_task_egtea_layout
from transformers_gazeflow.data.synthetic_tasks_kept_aside import (
    KEPT_ASIDE_TASKS,
    NEAR_SHADES,
    KeptAsideSettings,
    generate_kept_aside_clip,
)

SIZES = {"wide_occluded_shape_cue": (192, 80)}
WHITE = np.array([250, 250, 250])
GREY = np.array([128, 128, 128])


def _clips(task, n=10, min_frames=40, max_frames=60, **kwargs):
    width, height = SIZES.get(task, (128, 96))
    settings = KeptAsideSettings(
        task=task, num_clips=n, min_frames=min_frames, max_frames=max_frames, width=width, height=height, **kwargs
    )
    return [generate_kept_aside_clip(settings, i) for i in range(n)]


def _centre_pixel(clip, frame, k, t):
    x, y = clip.objects[k].track[t]
    return frame[int(y * clip.height), int(x * clip.width)]


def _apart(clip, k, t, factor=2.2):
    """Whether object k's centre is clear of every other object in frame t (pixels; radii in frame widths)."""
    here = clip.objects[k].track[t] * [clip.width, clip.height]
    for j, other in enumerate(clip.objects):
        if j != k:
            gap = np.hypot(*(other.track[t] * [clip.width, clip.height] - here))
            if gap < factor * max(other.radius, clip.objects[k].radius) * clip.width:
                return False
    return True


def _runs(mask):
    """(start, length) of each run of True in a bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2])]


def test_flash_target_only_the_target_flashes_in_short_regular_bursts():
    counts = set()
    for clip in _clips("flash_target"):
        counts.add(len(clip.objects))
        assert len({(o.shape, o.color) for o in clip.objects}) == 1 and clip.cue is None  # alike, no cue patch
        white_at_target = np.zeros(clip.num_frames, bool)
        for t in range(clip.num_frames):
            frame = clip.frame(t).astype(int)
            white = (frame == WHITE).all(-1)
            white_at_target[t] = (_centre_pixel(clip, frame, 0, t) == WHITE).all()
            assert white.any() == white_at_target[t]  # white shows nowhere but on the target
            for k in range(1, len(clip.objects)):
                if _apart(clip, k, t):
                    assert (_centre_pixel(clip, frame, k, t) == clip.objects[k].color).all()
        runs = _runs(white_at_target)
        assert runs and runs[0][0] < 20
        assert all(length == 2 for start, length in runs if start + 2 <= clip.num_frames)  # 2 frames each
        gaps = np.diff([start for start, _ in runs])
        assert gaps.min() >= 10 and gaps.max() <= 20  # a flash starts every 10-20 frames
    assert counts == {4, 5, 6}


def test_near_shade_cue_the_target_wears_the_shade_the_left_edge_cue_shows():
    labels = set()
    for clip in _clips("near_shade_cue", n=16):
        assert len({o.shape for o in clip.objects}) == 1 and len(clip.objects) in (4, 5)
        for t in (0, clip.num_frames // 2, clip.num_frames - 1):
            frame = clip.frame(t).astype(int)
            cue = frame[clip.height // 2, int(0.06 * clip.width)]  # the middle of the left edge
            assert any((cue == shade).all() for shade in NEAR_SHADES)
            assert (frame[clip.height // 2, 0] == 25).all() or (frame[clip.height // 2, 0] == cue).all()
            assert (_centre_pixel(clip, frame, 0, t) == cue).all()
            for k in range(1, len(clip.objects)):
                if _apart(clip, k, t) and clip.objects[k].track[t, 0] > 0.14:  # clear of the others and the cue
                    shade = _centre_pixel(clip, frame, k, t)
                    assert not (shade == cue).all()
                    assert np.abs(shade - cue).max() <= 4 * 22 and np.abs(shade - cue).min() >= 22  # near, not equal
        labels.add(clip.label)
    assert len(labels) >= 4  # the cued shade changes from clip to clip


def test_fast_crossing_the_target_is_the_fastest_and_crosses_the_others():
    crossings = 0
    for clip in _clips("fast_crossing", n=12, min_frames=64, max_frames=96):
        assert len({(o.shape, o.color) for o in clip.objects}) == 1 and clip.cue is None
        pixels = [o.track * [clip.width, clip.height] for o in clip.objects]
        speeds = [np.hypot(*np.diff(p, axis=0).T) * clip.fps / clip.width for p in pixels]  # frame widths per s
        assert 0.45 * 0.97 <= speeds[0].mean() <= 0.7 + 1e-6  # kept through the bounces
        assert np.median(speeds[0]) >= 0.45 - 1e-6
        assert max(s.max() for s in speeds[1:]) < 0.3  # the others never as fast as the target
        assert (clip.target.track >= 0.1 - 1e-9).all() and (clip.target.track <= 0.9 + 1e-9).all()
        for t in range(0, clip.num_frames, 7):  # drawn where its track says (the target is drawn over the others)
            assert (_centre_pixel(clip, clip.frame(t).astype(int), 0, t) == clip.target.color).all()
        gaps = [np.hypot(*(pixels[0] - p).T).min() for p in pixels[1:]]
        crossings += min(gaps) < clip.target.radius * clip.width
    assert crossings >= 4  # the target's path goes over the others' in many clips


def test_wide_occluded_shape_cue_frame_cue_shape_and_panel():
    masks, hidden = {}, 0
    for clip in _clips("wide_occluded_shape_cue", n=12):
        assert len({o.color for o in clip.objects}) == 1 and len({o.shape for o in clip.objects}) == len(clip.objects)
        for t in range(0, clip.num_frames, 5):
            frame = clip.frame(t).astype(int)
            assert frame.shape == (80, 192, 3)
            cue = (frame == [245, 245, 245]).all(-1)
            ys, xs = np.nonzero(cue)
            assert xs.min() > 0.9 * 192 and abs(ys.mean() - 40) < 2  # at the middle of the right edge
            masks.setdefault(clip.label, set()).add(cue.tobytes())
            x0, _, x1, _ = clip.occluders[0][t]
            assert 0.2 - 1e-9 <= x1 - x0 <= 0.3 + 1e-9
            column = frame[:, int((x0 + x1) / 2 * 192)]
            assert (column[:30] == GREY).all() and (column[50:] == GREY).all()  # full height
            centre = clip.target.track[t]
            if x0 + 0.01 < centre[0] < x1 - 0.01:
                assert (_centre_pixel(clip, frame, 0, t) == GREY).all()
                hidden += 1
            elif (centre[0] < x0 - 0.01 or centre[0] > x1 + 0.01) and centre[0] < 0.9:
                assert (_centre_pixel(clip, frame, 0, t) == clip.target.color).all()
    assert hidden > 5
    assert len(masks) >= 3 and all(len(drawn) == 1 for drawn in masks.values())  # one glyph per named shape


@pytest.mark.parametrize("task", KEPT_ASIDE_TASKS)
def test_the_gaze_is_on_the_target_the_documented_share_of_fixation_frames(task):
    """The documented process: a fixation's anchor is the target with probability 0.8 (after one away, always, for
    the occluded family: a chain whose stationary share of target fixations is 1 / 1.2), lasting a median 0.40 s
    against 0.25 s; the same log-normal spread on both, so the target's share of fixation frames is
    p 0.40 / (p 0.40 + (1 - p) 0.25)."""
    p = 1 / 1.2 if task == "wide_occluded_shape_cue" else 0.8
    expected = p * 0.40 / (p * 0.40 + (1 - p) * 0.25)
    near = []
    for clip in _clips(task, n=40, min_frames=64, max_frames=96):
        fixation = clip.gaze_type == 1
        offset = (clip.gaze - clip.target.track) * [clip.width, clip.height]
        near.append(np.hypot(*offset.T)[fixation] < 1.5 * clip.target.radius * clip.width)
    assert np.concatenate(near).mean() == pytest.approx(expected, abs=0.04)


@pytest.mark.parametrize("task", KEPT_ASIDE_TASKS)
def test_clips_are_determined_by_settings_and_index(task):
    a, b = _clips(task, n=3), _clips(task, n=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.gaze, y.gaze)
        np.testing.assert_array_equal(x.frame(7), y.frame(7))
    alone = _clips(task, n=30)[2]  # clip i does not depend on how many clips the settings hold
    np.testing.assert_array_equal(alone.gaze, a[2].gaze)
    np.testing.assert_array_equal(alone.frame(7), a[2].frame(7))
    assert not np.array_equal(a[0].gaze, _clips(task, n=3, seed=1)[0].gaze)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(task="colour_cue"), ValueError, "task must be one of"),
        (dict(task="wide_occluded_shape_cue"), ValueError, r"width >= 2 \* height"),
        (dict(task="wide_occluded_shape_cue", width=150, height=80), ValueError, "got 150 x 80"),
        (dict(num_clips=0), ValueError, "num_clips"),
    ],
)
def test_bad_settings_name_themselves(kwargs, error, message):
    with pytest.raises(error, match=message):
        KeptAsideSettings(**kwargs)


def test_clip_generation_guards():
    with pytest.raises(TypeError, match="settings must be KeptAsideSettings"):
        generate_kept_aside_clip(GroundingTaskSettings(num_clips=3), 0)
    with pytest.raises(ValueError, match="index must be in"):
        generate_kept_aside_clip(KeptAsideSettings(num_clips=3), 3)
    assert KeptAsideSettings(task="wide_occluded_shape_cue", width=160, height=80).width == 160


@pytest.mark.parametrize("task", KEPT_ASIDE_TASKS)
def test_egtea_layout_reads_back_through_the_builder(tmp_path, task):
    width, height = SIZES.get(task, (64, 48))
    settings = KeptAsideSettings(
        task=task, num_clips=5, min_frames=20, max_frames=30, width=width, height=height, test_fraction=0.4
    )
    clips = write_task_egtea_layout(tmp_path / "raw", settings)
    built = load_gaze_dataset(
        "egtea", data_dir=tmp_path / "raw", cache_dir=tmp_path / "cache", windows="first", window_frames=64
    )
    assert sorted(built) == ["test", "train"]
    for split in ("train", "test"):
        assert len(built[split]) == sum(clip_split(settings, i) == split for i in range(5))
        for example in built[split]:
            matches = [
                c
                for c in clips
                if c.num_frames == example["num_frames"] and np.allclose(np.asarray(example["gaze"]), c.gaze, atol=1e-3)
            ]
            assert len(matches) == 1, example["clip_id"]
            assert list(example["gaze_type"]) == matches[0].gaze_type.tolist()
            assert example["action"] == matches[0].label and (example["width"], example["height"]) == (width, height)
    names = (tmp_path / "raw" / "action_idx.txt").read_text().splitlines()
    assert len(names) == len(settings.label_names()) and names[0].startswith("look at ")
