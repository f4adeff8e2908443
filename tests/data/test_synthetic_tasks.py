"""The grounding-task generators (data/synthetic_tasks.py): each task's rule holds in the clips, the gaze serves the
target, and the EGTEA-layout writer's files are read back exactly by the EGTEA builder."""

import dataclasses

import numpy as np
import pytest

from transformers_gazeflow.data.loading import load_gaze_dataset
from transformers_gazeflow.data.synthetic_tasks import (
    OBJECT_COLORS,
    OCCLUDED_TASKS,
    SHAPES,
    TASK_NAMES,
    GroundingTaskSettings,
    clip_split,
    generate_task_clip,
    write_task_egtea_layout,
)


def _clips(task, n=12, **kwargs):
    settings = GroundingTaskSettings(
        task=task, num_clips=n, min_frames=24, max_frames=40, width=64, height=48, **kwargs
    )
    return [generate_task_clip(settings, i) for i in range(n)]


def _moves(track):
    return float(np.linalg.norm(np.diff(track, axis=0), axis=-1).sum())


@pytest.mark.parametrize("task", TASK_NAMES)
def test_gaze_serves_the_target_and_is_well_formed(task):
    clips = _clips(task)
    on_target, on_other, target_distance = [], [], []
    for clip in clips:
        assert clip.gaze.shape == (clip.num_frames, 2) and clip.gaze.dtype == np.float32
        assert (clip.gaze >= 0).all() and (clip.gaze <= 1).all()
        assert set(np.unique(clip.gaze_type)) <= {1, 2, 3}
        fixating = clip.fixated >= 0
        distance = np.linalg.norm(clip.gaze - clip.target.track, axis=-1)
        on_target.append((clip.fixated == 0).mean())
        target_distance.append(distance[clip.fixated == 0])
        on_other.append((fixating & (clip.fixated != 0)).mean())
    assert np.mean(on_target) > 0.55 and np.mean(on_target) > 2 * np.mean(on_other)
    # a fixation on the target stays within an object radius or so of its centre
    assert np.median(np.concatenate(target_distance)) < 0.05


def test_each_task_rule_holds():
    for clip in _clips("moving_object"):
        assert _moves(clip.target.track) > 0.05
        assert all(_moves(o.track) == 0 for o in clip.objects[1:])
        assert len({(o.shape, o.color) for o in clip.objects}) == 1  # only motion tells the target apart
    for clip in _clips("fixed_colour"):
        assert clip.target.color == OBJECT_COLORS[0] and all(o.color != OBJECT_COLORS[0] for o in clip.objects[1:])
    for task in ("colour_cue", "colour_cue_occluded"):
        labels = set()
        for clip in _clips(task):
            colours = [o.color for o in clip.objects]
            assert len(set(colours)) == len(colours) and clip.cue == ("square", OBJECT_COLORS[clip.label])
            assert clip.target.color == OBJECT_COLORS[clip.label]
            labels.add(clip.label)
            assert bool(clip.occluders) == (task == "colour_cue_occluded")
        assert len(labels) >= 3  # the cue changes from clip to clip
    for clip in _clips("shape_cue"):
        shapes = [o.shape for o in clip.objects]
        assert len(set(shapes)) == len(shapes) and len({o.color for o in clip.objects}) == 1
        assert clip.cue[0] == clip.target.shape == SHAPES[clip.label]
    shapes_seen = set()
    for clip in _clips("corner_colour_cue"):
        colours = [o.color for o in clip.objects]
        assert len(set(colours)) == len(colours) and clip.cue == ("disc", OBJECT_COLORS[clip.label])
        assert clip.target.color == OBJECT_COLORS[clip.label]
        shapes_seen.update(o.shape for o in clip.objects)
    assert len(shapes_seen) >= 3  # shapes vary: only the colour names the target
    for clip in _clips("occluded_corner_cue"):
        colours = [o.color for o in clip.objects]
        assert len(set(colours)) == len(colours) and clip.cue == ("diamond", OBJECT_COLORS[clip.label])
        assert clip.target.color == OBJECT_COLORS[clip.label] and clip.occluders
    shapes_seen, counts = set(), set()
    for clip in _clips("stripe_cue", n=30):
        colours = [o.color for o in clip.objects]
        assert len(set(colours)) == len(colours) and clip.cue == ("stripe", OBJECT_COLORS[clip.label])
        assert clip.target.color == OBJECT_COLORS[clip.label] and clip.occluders
        shapes_seen.update(o.shape for o in clip.objects)
        counts.add(len(clip.objects))
    assert len(shapes_seen) >= 3 and counts == {3, 4, 5}  # one object more than the other tasks' 3-4
    assert "stripe_cue" in OCCLUDED_TASKS


@pytest.mark.parametrize("size", [(64, 48), (128, 96)])
def test_the_stripe_cue_is_a_bar_in_the_bottom_left_corner_in_the_target_colour(size):
    width, height = size
    settings = GroundingTaskSettings(
        task="stripe_cue", num_clips=4, min_frames=24, max_frames=40, width=width, height=height
    )
    boxes = set()
    for index in range(4):
        clip = generate_task_clip(settings, index)
        bare = dataclasses.replace(clip, cue=None)
        for t in (0, clip.num_frames // 2, clip.num_frames - 1):
            frame, without = clip.frame(t).astype(int), bare.frame(t).astype(int)
            changed = (frame != without).any(axis=-1)
            ys, xs = np.nonzero(changed)
            # everything the cue draws lies in the bottom-left corner
            assert xs.max() < 0.2 * width and ys.min() >= 0.8 * height
            coloured = (frame == np.asarray(clip.target.color)).all(axis=-1) & changed
            cy, cx = np.nonzero(coloured)
            box = (cy.min(), cy.max(), cx.min(), cx.max())
            bar_h, bar_w = box[1] - box[0] + 1, box[3] - box[2] + 1
            assert coloured[box[0] : box[1] + 1, box[2] : box[3] + 1].all()  # a solid bar
            assert bar_w >= 3 * bar_h and bar_h >= 2  # horizontal, about 3 times as long as tall
            # the rest of what the cue draws is its dark frame, around the bar
            assert (frame[changed & ~coloured] == 25).all()
            assert (
                frame[max(box[0] - 2, 0) : box[1] + 3, max(box[2] - 2, 0) : box[3] + 3][
                    ~coloured[max(box[0] - 2, 0) : box[1] + 3, max(box[2] - 2, 0) : box[3] + 3]
                ]
                == 25
            ).all()
            boxes.add(box)
    assert len(boxes) == 1  # the same place in every frame of every clip


def test_the_cue_is_drawn_in_the_corner_and_occluders_hide_objects():
    clip = _clips("colour_cue", n=1)[0]
    frame = clip.frame(0).astype(int)
    corner = frame[:8, :8].reshape(-1, 3)
    assert (np.abs(corner - np.asarray(OBJECT_COLORS[clip.label])).sum(axis=1) < 10).sum() >= 4
    clip = _clips("corner_colour_cue", n=1)[0]
    frame = clip.frame(0).astype(int)
    for region, expected in ((frame[-8:, -8:], True), (frame[:8, :8], False)):
        matches = (np.abs(region.reshape(-1, 3) - np.asarray(OBJECT_COLORS[clip.label])).sum(axis=1) < 10).sum()
        assert (matches >= 4) == expected
    clip = _clips("occluded_corner_cue", n=1)[0]
    frame = clip.frame(0).astype(int)
    for region, expected in ((frame[:8, -8:], True), (frame[:8, :8], False), (frame[-8:, -8:], False)):
        matches = (np.abs(region.reshape(-1, 3) - np.asarray(OBJECT_COLORS[clip.label])).sum(axis=1) < 10).sum()
        assert (matches >= 4) == expected
    hidden = 0
    for clip in _clips("colour_cue_occluded", n=6):
        for t in range(clip.num_frames):
            x0, _, x1, _ = clip.occluders[0][t]
            centre = clip.target.track[t]
            if x0 + 0.01 < centre[0] < x1 - 0.01 and centre[1] > 0.2:
                pixel = clip.frame(t)[int(centre[1] * clip.height), int(centre[0] * clip.width)]
                assert tuple(pixel) == (128, 128, 128)
                hidden += 1
    assert hidden > 0


@pytest.mark.parametrize("task", ["colour_cue", "stripe_cue"])
def test_clips_are_determined_by_settings_and_index(task):
    a, b = _clips(task, n=3), _clips(task, n=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.gaze, y.gaze)
        np.testing.assert_array_equal(x.frame(5), y.frame(5))
    # clip i does not depend on how many clips the settings hold
    alone = generate_task_clip(
        GroundingTaskSettings(task=task, num_clips=40, min_frames=24, max_frames=40, width=64, height=48), 2
    )
    np.testing.assert_array_equal(alone.gaze, a[2].gaze)
    np.testing.assert_array_equal(alone.frame(5), a[2].frame(5))
    other = _clips(task, n=3, seed=1)
    assert not np.array_equal(a[0].gaze, other[0].gaze)


# clip 1 of each task at the test size (64 x 48, 24-40 frames, seed 0), as main wrote it before ``stripe_cue`` was
# added: task, frames, label, objects, sum of fixated, sum of gaze_type, sum of gaze, sum of frame 5's pixels
EXISTING_CLIPS = [
    ("moving_object", 39, 0, 3, 2, 46, 46.34882, 1228814),
    ("fixed_colour", 35, 0, 4, -2, 43, 29.43397, 1244268),
    ("colour_cue", 40, 0, 4, -3, 46, 54.68471, 1290299),
    ("colour_cue_occluded", 39, 1, 3, 36, 43, 45.10372, 1247006),
    ("shape_cue", 35, 2, 4, -2, 37, 25.34593, 1297661),
    ("corner_colour_cue", 33, 1, 3, -7, 36, 34.94067, 1348753),
    ("occluded_corner_cue", 40, 2, 4, -3, 43, 35.17072, 1328758),
]


@pytest.mark.parametrize("task, frames, label, objects, fixated, gaze_type, gaze, pixels", EXISTING_CLIPS)
def test_earlier_tasks_clips_are_unchanged(task, frames, label, objects, fixated, gaze_type, gaze, pixels):
    clip = _clips(task, n=2)[1]
    assert (clip.num_frames, clip.label, len(clip.objects)) == (frames, label, objects)
    assert int(clip.fixated.astype(np.int64).sum()) == fixated
    assert int(clip.gaze_type.astype(np.int64).sum()) == gaze_type
    assert float(clip.gaze.astype(np.float64).sum()) == pytest.approx(gaze, abs=2e-5)
    assert int(clip.frame(5).astype(np.int64).sum()) == pytest.approx(pixels, abs=20)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(task="look_around"), "task must be one of"),
        (dict(task="stripe_cues"), "task must be one of"),
        (dict(task="stripe_cue", max_objects=5), "max_objects"),
        (dict(task="stripe_cue", min_objects=1), "min_objects"),
        (dict(num_clips=0), "num_clips"),
        (dict(min_frames=30, max_frames=20), "max_frames"),
        (dict(max_objects=5), "max_objects"),
        (dict(test_fraction=1.0), "test_fraction"),
    ],
)
def test_bad_settings_name_themselves(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GroundingTaskSettings(**kwargs)
    with pytest.raises(ValueError, match="index must be in"):
        generate_task_clip(GroundingTaskSettings(task="stripe_cue", num_clips=3), 3)


@pytest.mark.parametrize("task", ["colour_cue", "stripe_cue"])
def test_egtea_layout_reads_back_through_the_builder(tmp_path, task):
    settings = GroundingTaskSettings(
        task=task, num_clips=6, min_frames=20, max_frames=34, width=64, height=48, test_fraction=0.34
    )
    clips = write_task_egtea_layout(tmp_path / "raw", settings)
    built = load_gaze_dataset(
        "egtea", data_dir=tmp_path / "raw", cache_dir=tmp_path / "cache", windows="first", window_frames=64
    )
    by_id = {clip.clip_id: clip for clip in clips}
    assert sorted(built) == ["test", "train"]
    for split in ("train", "test"):
        examples = built[split]
        assert len(examples) == sum(clip_split(settings, i) == split for i in range(6))
        for example in examples:
            matches = [
                c
                for c in clips
                if c.num_frames == example["num_frames"] and np.allclose(np.asarray(example["gaze"]), c.gaze, atol=1e-3)
            ]
            assert len(matches) == 1, example["clip_id"]
            clip = matches[0]
            assert list(example["gaze_type"]) == clip.gaze_type.tolist()
            assert example["action"] == clip.label and (example["width"], example["height"]) == (64, 48)
            assert by_id[clip.clip_id] is clip
    with pytest.raises(FileExistsError, match="already holds an EGTEA layout"):
        write_task_egtea_layout(tmp_path / "raw", settings)
    with pytest.raises(ValueError, match="fps must be 24"):
        write_task_egtea_layout(tmp_path / "other", GroundingTaskSettings(fps=30.0))


def _cue_pixels(clip, t):
    """Where frame t differs from the same clip drawn without its cue."""
    frame = clip.frame(t).astype(int)
    return (frame != dataclasses.replace(clip, cue=None).frame(t).astype(int)).any(axis=-1), frame


def test_the_blinking_cue_shows_its_colour_in_some_frames_only():
    shown_fraction, phases = [], set()
    for clip in _clips("blinking_cue", n=8):
        colours = [o.color for o in clip.objects]
        assert len(set(colours)) == len(colours) and clip.cue == ("square", OBJECT_COLORS[clip.label])
        assert clip.target.color == OBJECT_COLORS[clip.label] and clip.occluders
        visible = clip.cue_visible
        assert visible.shape == (clip.num_frames,) and visible.dtype == bool
        runs = np.diff(np.flatnonzero(np.diff(visible.astype(int)) != 0))
        assert len(runs) and runs.min() >= 4 and runs.max() <= 12  # whole phases of 4-12 frames
        phases.add(bool(visible[0]))
        shown_fraction.append(visible.mean())
        for t in range(0, clip.num_frames, 3):
            changed, frame = _cue_pixels(clip, t)
            ys, xs = np.nonzero(changed)
            assert 0.35 * clip.width < xs.min() and xs.max() < 0.65 * clip.width and ys.max() < 0.2 * clip.height
            coloured = (frame == np.asarray(clip.target.color)).all(axis=-1) & changed
            assert coloured.any() == visible[t]  # the colour shows exactly in the visible frames
            assert (frame[changed & ~coloured] == 25).all()  # the rest is the dark frame, shown in every frame
    assert 0.3 < np.mean(shown_fraction) < 0.7 and phases == {True, False}
    assert "blinking_cue" in OCCLUDED_TASKS


def test_the_ring_cue_lies_on_the_surface_at_a_place_that_changes_from_clip_to_clip():
    places = set()
    settings = GroundingTaskSettings(task="ring_cue", num_clips=12, min_frames=24, max_frames=40)  # 128 x 96
    for clip in (generate_task_clip(settings, i) for i in range(12)):
        colours = [o.color for o in clip.objects]
        assert len(set(colours)) == len(colours) and clip.cue == ("ring", OBJECT_COLORS[clip.label])
        assert clip.target.color == OBJECT_COLORS[clip.label] and not clip.occluders
        assert clip.cue_visible is None and 0.1 <= clip.cue_centre[0] <= 0.9 and clip.cue_centre[1] in (0.07, 0.93)
        places.add(clip.cue_centre)
        for t in (0, clip.num_frames - 1):  # still: the same pixels in the first and last frames
            changed, frame = _cue_pixels(clip, t)
            ys, xs = np.nonzero(changed)
            cx, cy = clip.cue_centre[0] * clip.width, clip.cue_centre[1] * clip.height
            assert np.hypot(xs + 0.5 - cx, ys + 0.5 - cy).max() < 0.075 * clip.width
            coloured = (np.abs(frame - np.asarray(clip.target.color)).sum(-1) < 3) & changed
            assert coloured.sum() >= 20
            # a ring: the surface shows through its middle
            assert not changed[int(cy), int(cx)]
    assert len(places) == 12 and {y for _, y in places} == {0.07, 0.93}
