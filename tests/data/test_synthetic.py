import json
from pathlib import Path

import numpy as np
import pytest

from transformers_gazeflow.data.gaze_common import fill_untracked
from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED
from transformers_gazeflow.data.synthetic import (
    ANNOTATIONS_NAME,
    MANIFEST_NAME,
    SyntheticGazeSettings,
    generate_clip,
    generate_dataset,
    load_dataset_records,
    split_assignment,
    task_names,
)
from transformers_gazeflow.data.synthetic.scene import TASK_COLORS
from transformers_gazeflow.data.video import decode_frames, probe_video

TINY = SyntheticGazeSettings(num_clips=4, min_frames=16, max_frames=24, width=64, height=48, seed=3)
# gaze-only statistics are cheap: no pixels are drawn unless asked for
STATS = SyntheticGazeSettings(num_clips=96, min_frames=48, max_frames=96, seed=11)


@pytest.fixture(scope="module")
def stats_clips():
    return [generate_clip(STATS, index) for index in range(STATS.num_clips)]


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of each run of True."""
    padded = np.concatenate([[False], mask, [False]]).astype(int)
    starts, stops = np.flatnonzero(np.diff(padded) == 1), np.flatnonzero(np.diff(padded) == -1)
    return list(zip(starts.tolist(), (stops - starts).tolist()))


def test_a_clip_is_determined_by_seed_and_index():
    a, b = generate_clip(TINY, 2), generate_clip(TINY, 2)
    assert np.array_equal(a.gaze.gaze, b.gaze.gaze) and np.array_equal(a.gaze.gaze_type, b.gaze.gaze_type)
    assert np.array_equal(a.render(), b.render())
    other_seed = generate_clip(SyntheticGazeSettings(**{**TINY.to_dict(), "seed": 4}), 2)
    assert not np.array_equal(a.frame(0), other_seed.frame(0))
    assert not np.array_equal(a.frame(0), generate_clip(TINY, 1).frame(0))
    # a clip does not depend on how many clips the dataset has
    bigger = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 40})
    assert np.array_equal(generate_clip(bigger, 2).gaze.gaze, a.gaze.gaze)


def test_clip_fields_follow_the_unified_schema(stats_clips):
    for clip in stats_clips[:24]:
        g = clip.gaze
        n = clip.num_frames
        assert STATS.min_frames <= n <= STATS.max_frames
        assert g.gaze.shape == (n, 2) and g.gaze.dtype == np.float32
        assert g.gaze.min() >= 0 and g.gaze.max() <= 1
        assert set(np.unique(g.gaze_type).tolist()) <= {0, 1, 2, 3, 4}
        assert np.array_equal(g.valid, (g.gaze_type != UNTRACKED) & (g.gaze_type != BLINK_OR_OTHER))
        assert np.array_equal(g.gaze, fill_untracked(g.gaze, g.gaze_type))  # the builders' untracked rule
        off = g.gaze_type == OFF_FRAME
        assert (((g.gaze_raw[off] < 0) | (g.gaze_raw[off] > 1)).any(axis=1)).all()
        assert np.allclose(g.gaze[off], np.clip(g.gaze_raw[off], 0, 1))
        assert ((g.gaze[off] == 0) | (g.gaze[off] == 1)).any(axis=1).all()  # clamped onto the border
        assert clip.task == clip.index % STATS.num_tasks
    frames = stats_clips[0].render()
    assert frames.shape == (stats_clips[0].num_frames, STATS.height, STATS.width, 3) and frames.dtype == np.uint8


def test_gaze_dynamics_look_human(stats_clips):
    steps, saccade_lengths, counts = [], [], np.zeros(5, int)
    for clip in stats_clips:
        g = clip.gaze
        both = g.valid[1:] & g.valid[:-1]
        steps.append(np.linalg.norm(np.diff(g.gaze, axis=0), axis=1)[both])
        counts += np.bincount(g.gaze_type, minlength=5)
        for start, length in _runs(g.motion == SACCADE):
            if start + length < clip.num_frames:  # a saccade cut by the clip's end may be shorter
                saccade_lengths.append(length)
    steps = np.concatenate(steps)
    # fixations with drift (small steps) and fast saccades (large ones): a heavy-tailed step distribution
    assert np.median(steps) < 0.5 * steps.mean()
    assert np.quantile(steps, 0.99) > 10 * np.median(steps)
    assert set(saccade_lengths) <= {2, 3, 4} and len(set(saccade_lengths)) >= 2
    share = counts / counts.sum()
    assert share[FIXATION] > 0.6 and 0.05 < share[SACCADE] < 0.25
    for code in (UNTRACKED, BLINK_OR_OTHER, OFF_FRAME):  # every kind of sample occurs, but rarely
        assert 0.002 < share[code] < 0.1, (code, share)


def test_task_label_predicts_gaze(stats_clips):
    """A per-task mean-gaze baseline beats the global mean on held-out clips."""
    train = [c for c in stats_clips if (c.index // STATS.num_tasks) % 2 == 0]
    test = [c for c in stats_clips if (c.index // STATS.num_tasks) % 2 == 1]

    def points(clips):
        return np.concatenate([c.gaze.gaze[c.gaze.valid] for c in clips])

    global_mean = points(train).mean(axis=0)
    task_mean = {k: points([c for c in train if c.task == k]).mean(axis=0) for k in range(STATS.num_tasks)}
    err_global = np.mean([((c.gaze.gaze[c.gaze.valid] - global_mean) ** 2).sum(1).mean() for c in test])
    err_task = np.mean([((c.gaze.gaze[c.gaze.valid] - task_mean[c.task]) ** 2).sum(1).mean() for c in test])
    assert err_task < 0.85 * err_global
    # and the tasks' mean gaze points are far apart (not one centre bias)
    centres = np.stack(list(task_mean.values()))
    assert min(np.linalg.norm(centres[i] - centres[j]) for i in range(4) for j in range(i)) > 0.1


def test_the_served_object_is_visible_under_the_gaze():
    """Learnable from pixels: where the gaze fixates the target, the pixel has the task's colour."""
    hits = total = 0
    for index in range(8):
        clip = generate_clip(STATS, index)
        frames = clip.render()
        on_target = np.flatnonzero((clip.gaze.fixated == 0) & (clip.gaze.gaze_type == FIXATION))
        xy = np.minimum(
            (clip.gaze.gaze[on_target] * [clip.width, clip.height]).astype(int), [clip.width - 1, clip.height - 1]
        )
        colours = frames[on_target, xy[:, 1], xy[:, 0]].astype(float)
        hits += int((np.linalg.norm(colours - np.asarray(TASK_COLORS[clip.task]), axis=1) < 80).sum())
        total += len(on_target)
    assert total > 100 and hits / total > 0.85
    share_on_target = np.mean([(generate_clip(STATS, i).gaze.fixated == 0).mean() for i in range(24)])
    assert 0.55 < share_on_target < 0.85  # mostly, not always


def test_splits_and_tasks():
    splits = split_assignment(STATS)
    assert splits == split_assignment(STATS)
    counts = {name: splits.count(name) for name in ("train", "validation", "test")}
    assert counts == {"train": 76, "validation": 10, "test": 10}
    assert set(split_assignment(TINY)) == {"train", "validation", "test"}
    assert task_names(4) == ["take red disc", "cut green square", "stir blue triangle", "wash yellow diamond"]


@pytest.mark.parametrize(
    "change,match",
    [
        ({"num_tasks": 9}, "num_tasks"),
        ({"num_tasks": 0}, "num_tasks"),
        ({"min_frames": 0}, "min_frames"),
        ({"max_frames": 8}, "max_frames"),
        ({"width": 8}, "width"),
        ({"fps": 0}, "fps"),
        ({"test_fraction": 0.6, "validation_fraction": 0.5}, "leave clips for training"),
    ],
)
def test_bad_settings(change, match):
    with pytest.raises(ValueError, match=match):
        SyntheticGazeSettings(**{**TINY.to_dict(), **change})


def test_generate_dataset_writes_real_mp4_and_annotations(tmp_path):
    out = generate_dataset(tmp_path / "synth", TINY)
    settings, records = load_dataset_records(out)
    assert settings == TINY and len(records) == TINY.num_clips
    for record in records:
        clip = generate_clip(TINY, int(record["clip_id"].rsplit("_", 1)[1]))
        info = probe_video(record["video_path"])
        assert (info.num_frames, info.width, info.height, info.fps) == (clip.num_frames, 64, 48, 24.0)
        assert record["num_frames"] == clip.num_frames and record["task"] == clip.task
        assert np.allclose(record["gaze"], clip.gaze.gaze, atol=1e-6)
        assert record["gaze_type"] == clip.gaze.gaze_type.tolist() and record["valid"] == clip.gaze.valid.tolist()
        assert record["split"] == split_assignment(TINY)[clip.index]
    # the encoded video still shows the scene: decoded frames are close to the rendered ones
    clip = generate_clip(TINY, 0)
    decoded = decode_frames(records[0]["video_path"], 0, clip.num_frames).astype(float)
    assert np.abs(decoded - clip.render().astype(float)).mean() < 8

    # same settings again: nothing is rewritten
    stamp = (out / MANIFEST_NAME).stat().st_mtime_ns
    generate_dataset(out, TINY)
    assert (out / MANIFEST_NAME).stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="other settings"):
        generate_dataset(out, SyntheticGazeSettings(**{**TINY.to_dict(), "seed": 5}))


def test_parallel_generation_gives_the_same_annotations(tmp_path):
    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 3, "max_frames": 16})
    serial = generate_dataset(tmp_path / "a", small)
    parallel = generate_dataset(tmp_path / "b", small, num_workers=2)
    assert (serial / ANNOTATIONS_NAME).read_text() == (parallel / ANNOTATIONS_NAME).read_text()


def test_an_interrupted_run_is_finished_in_its_folder_and_leaves_no_temporary(tmp_path):
    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 1, "max_frames": 16})
    out = tmp_path / "synth"
    (out / "videos").mkdir(parents=True)
    (out / f"partial.1.2.{ANNOTATIONS_NAME}").write_text('{"clip_id": "cut')  # killed while writing the annotations
    generate_dataset(out, small)
    _, records = load_dataset_records(out)
    assert len(records) == 1
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"partial.1.2.{ANNOTATIONS_NAME}", ANNOTATIONS_NAME, MANIFEST_NAME, "videos"]
    )  # this run's temporaries gone


def test_missing_and_foreign_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"{MANIFEST_NAME}.*expected a folder written by generate_dataset"):
        load_dataset_records(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileNotFoundError, match=f"{MANIFEST_NAME} not found, and .* is not empty"):
        generate_dataset(tmp_path, TINY)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # nothing was written
    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 1, "max_frames": 16})
    out = generate_dataset(tmp_path / "one", small)
    _, records = load_dataset_records(out)
    video = out / records[0]["video"]
    video.unlink()
    with pytest.raises(FileNotFoundError, match=f"{video.name}.*videos/<clip_id>.mp4"):
        load_dataset_records(out)
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["format_version"] = 99
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="format_version"):
        load_dataset_records(out)


def test_a_generator_1_folder_loads_with_untracked_frames_by_the_builders_rule(tmp_path):
    """Generator 1 kept a clip's leading untracked frames at the raw point; reading its folder re-derives them with
    fill_untracked (other frames untouched), and an unknown generator version is refused."""
    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 1, "max_frames": 16})
    out = generate_dataset(tmp_path / "old", small)
    record = json.loads((out / ANNOTATIONS_NAME).read_text().splitlines()[0])
    record["gaze_type"][:2] = [UNTRACKED, UNTRACKED]  # as generator 1 could write them: untracked, raw points
    record["gaze"][:2] = [[0.01, 0.02], [0.03, 0.04]]
    (out / ANNOTATIONS_NAME).write_text(json.dumps(record) + "\n")
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    manifest["generator_version"] = 1
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    _, (old,) = load_dataset_records(out)
    types = np.asarray(record["gaze_type"])
    expected = fill_untracked(np.asarray(record["gaze"]), types)
    np.testing.assert_allclose(old["gaze"], expected, atol=1e-7)
    assert not np.allclose(old["gaze"][:2], [[0.01, 0.02], [0.03, 0.04]])
    untouched = types != UNTRACKED
    np.testing.assert_array_equal(np.asarray(old["gaze"])[untouched], np.asarray(record["gaze"])[untouched])
    manifest["generator_version"] = 0
    (out / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="generator_version 0"):
        load_dataset_records(out)


def test_an_annotation_line_without_a_needed_key_is_named(tmp_path):
    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 1, "max_frames": 16})
    out = generate_dataset(tmp_path / "one", small)
    line = json.loads((out / ANNOTATIONS_NAME).read_text())
    del line["gaze_type"]
    (out / ANNOTATIONS_NAME).write_text(json.dumps(line) + "\n")
    message = rf"{ANNOTATIONS_NAME}, line 1: expected a clip record .* lacks \['gaze_type'\]"
    with pytest.raises(ValueError, match=message):
        load_dataset_records(out)


# scenarios: one registry of scene/gaze generators (data/synthetic/scenarios.py)


def test_the_default_scenario_draws_the_clip_exactly_as_before_the_registry():
    """``served_object`` takes the same draws in the same order as generate_clip did before scenarios existed:
    length, distractor count, scene, gaze; so stored datasets and the bundled model's data are unchanged."""
    from transformers_gazeflow.data.synthetic import simulate_gaze, simulate_scene

    for index in range(TINY.num_clips):
        clip = generate_clip(TINY, index)
        rng = np.random.default_rng([TINY.seed, index])
        num_frames = int(rng.integers(TINY.min_frames, TINY.max_frames + 1))
        num_distractors = int(rng.integers(TINY.min_distractors, TINY.max_distractors + 1))
        scene = simulate_scene(
            rng, index % TINY.num_tasks, TINY.num_tasks, num_frames, TINY.fps, TINY.width, TINY.height, num_distractors
        )
        gaze = simulate_gaze(rng, scene, TINY.fps)
        assert clip.num_frames == num_frames and len(clip.scene.objects) == 1 + num_distractors
        np.testing.assert_array_equal(clip.gaze.gaze, gaze.gaze)
        np.testing.assert_array_equal(clip.scene.camera, scene.camera)
    assert TINY.scenario == "served_object"
    # an old manifest (no scenario key) reads as the default scenario
    assert SyntheticGazeSettings.from_dict({k: v for k, v in TINY.to_dict().items() if k != "scenario"}) == TINY


def test_a_new_scenario_is_one_registered_generator(tmp_path, monkeypatch):
    from transformers_gazeflow.data.synthetic import (
        SCENARIOS,
        get_scenario,
        register_scenario,
        served_object,
        simulate_gaze,
    )

    def still_target(rng, settings, task, num_frames):
        """The default scene with the target held still at the centre of the frame."""
        scene, _ = served_object.generate_served_object(rng, settings, task, num_frames)
        target = scene.objects[0]
        still = type(target)(target.shape, target.color, target.radius, np.full_like(target.track, 0.5), target.angle)
        scene = type(scene)(**{**scene.__dict__, "objects": (still, *scene.objects[1:])})
        return scene, simulate_gaze(rng, scene, settings.fps)

    monkeypatch.setitem(SCENARIOS, "still_target", SCENARIOS["served_object"])  # restored after the test
    register_scenario("still_target", still_target, "the target does not move", replace=True)
    settings = SyntheticGazeSettings(**{**TINY.to_dict(), "scenario": "still_target"})
    clip = generate_clip(settings, 0)
    np.testing.assert_array_equal(clip.scene.target.track, 0.5)
    fixated = clip.gaze.fixated == 0
    assert fixated.any() and np.abs(clip.gaze.gaze_raw[fixated] - 0.5).max() < 0.1  # the gaze serves it there
    assert get_scenario("still_target").description == "the target does not move"
    with pytest.raises(ValueError, match="already registered"):
        register_scenario("still_target", still_target, "again")
    with pytest.raises(ValueError, match="must be an identifier"):
        register_scenario("still target", still_target, "a space")


def test_an_unknown_scenario_is_refused_before_anything_is_written(tmp_path):
    bad = SyntheticGazeSettings(**{**TINY.to_dict(), "scenario": "nope"})
    with pytest.raises(ValueError, match=r"unknown synthetic scenario 'nope': expected one of \[.*'served_object'"):
        generate_clip(bad, 0)
    with pytest.raises(ValueError, match="unknown synthetic scenario 'nope'"):
        generate_dataset(tmp_path / "out", bad)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match="scenario must be the name of a synthetic scenario"):
        SyntheticGazeSettings(scenario="not a name")


def test_the_subpackage_keeps_the_old_modules_public_names():
    """``data.synthetic`` was one module before it became a subpackage; callers (the CLI's demo, the web demo's
    clip cache key, the builder, tests) import these names from it."""
    import transformers_gazeflow.data.synthetic as synthetic

    old = [
        "SyntheticGazeSettings",
        "SyntheticClip",
        "generate_clip",
        "generate_dataset",
        "load_dataset_records",
        "split_assignment",
        "task_names",
        "clip_task",
        "clip_record",
        "SPLITS",
        "MANIFEST_NAME",
        "ANNOTATIONS_NAME",
        "VIDEO_DIR",
        "FORMAT_VERSION",
        "GENERATOR_VERSION",
        "READABLE_GENERATOR_VERSIONS",
        "TASK_VERBS",
        "write_egtea_layout",
        "WrittenEgteaClip",
        "SimulatedGaze",
        "simulate_gaze",
        "Scene",
        "simulate_scene",
        "render_frame",
        "render_frames",
        "TASK_COLORS",
        "MAX_TASKS",
    ]
    assert [name for name in old if not hasattr(synthetic, name)] == []
    assert set(synthetic.__all__) <= set(dir(synthetic))


def test_an_interrupted_rendering_resumes_with_the_clips_it_had_finished(tmp_path, monkeypatch):
    """Stopped while writing its third clip, a rendering keeps the first two: the next run renders one clip, writes
    the annotations of an uninterrupted run, and leaves no per-clip record behind."""
    from transformers_gazeflow.data.synthetic import dataset

    small = SyntheticGazeSettings(**{**TINY.to_dict(), "num_clips": 3, "max_frames": 16})
    write = dataset.write_video
    written = []

    def stop_at_third(path, frames, fps):
        if len(written) == 2 and stopping:
            raise KeyboardInterrupt
        written.append(Path(path).name)
        return write(path, frames, fps=fps)

    stopping = True
    monkeypatch.setattr(dataset, "write_video", stop_at_third)
    with pytest.raises(KeyboardInterrupt):
        generate_dataset(tmp_path / "cut", small)
    assert len(written) == 2 and not (tmp_path / "cut" / MANIFEST_NAME).exists()
    stopping, written[:] = False, []
    generate_dataset(tmp_path / "cut", small)
    assert written == ["synth_3_00002.mp4"]
    whole = generate_dataset(tmp_path / "whole", small)
    assert (tmp_path / "cut" / ANNOTATIONS_NAME).read_text() == (whole / ANNOTATIONS_NAME).read_text().replace(
        str(tmp_path / "whole"), str(tmp_path / "cut")
    )
    assert sorted(p.suffix for p in (tmp_path / "cut" / "videos").iterdir()) == [".mp4"] * 3
