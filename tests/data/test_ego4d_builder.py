"""The Ego4D gaze builder on generated raw-format fixtures (the layout of Ego4D's gaze download)."""

import numpy as np
import pytest

from transformers_gazeflow.data import gaze_types as schema
from transformers_gazeflow.data.loading import ClipDroppedError, gaze_builder, load_gaze_dataset

from .raw_fixtures import glc_clip, make_ego4d_root, write_clip, write_cut_clip

A, B = "video-a", "video-b"
OFF_SAMPLES = slice(200, 210)  # t in [2.00, 2.09]: x = 1.3, off the frame


def gaze_a():
    t = np.round(np.arange(0, 1100) * 0.01, 2)  # 100 Hz for 11 s; the video lasts 12 s
    x = t / 20
    x[OFF_SAMPLES] = 1.3
    return t, x, np.full_like(t, 0.25)  # bottom-up y: 0.75 from the top


def gaze_b():
    t = np.round(np.arange(0, 400) * 0.01, 2)  # 4 s of gaze on an 11 s video
    return t, np.full_like(t, 0.3), np.full_like(t, 0.6)


@pytest.fixture(scope="module")
def ego4d_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ego4d")
    make_ego4d_root(
        root,
        videos={A: 12, B: 11},
        gaze={A: gaze_a(), B: gaze_b()},
        train=[glc_clip(A, 0), glc_clip(A, 5), glc_clip(A, 10), "not a clip line"],
        test=[glc_clip(B, 0), glc_clip(B, 5)],
        untracked=[f"{A},00:00:10,00:00:11,0", f"{A},00:00:10,00:00:11,0", f"{B},00:00:09,00:00:03,1"],
    )
    write_clip(root / "gaze" / "junk.mp4", 3, fps=30)  # a real video among the gaze files: skipped by content
    with open(root / "gaze" / f"{A}.mp4", "a") as handle:
        handle.write("1,2,3\n5,abc,0,0,0,0.5,0.5,0,0\n")
    return root


def build(root, cache, **config):
    builder = gaze_builder("ego4d", root, cache_dir=cache, **config)
    builder.download_and_prepare()
    return builder, builder.as_dataset()


@pytest.fixture(scope="module")
def fixed(ego4d_root, tmp_path_factory):
    return build(ego4d_root, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def glc(ego4d_root, tmp_path_factory):
    return build(ego4d_root, tmp_path_factory.mktemp("cache"), parity="glc")


def windows_of(ds, clip_id):
    return [ex for ex in ds.with_format("numpy") if ex["clip_id"] == clip_id]


def nearest_x(frames):
    t = np.round(np.asarray(frames) / 30 * 100) / 100  # samples every 0.01 s; frame times never tie here
    return t / 20


def test_windows_cover_each_5s_clip_and_test_takes_the_first(fixed, ego4d_root):
    train, test = fixed[1]["train"], fixed[1]["test"]
    assert [(ex["window_start"], ex["num_frames"]) for ex in windows_of(train, f"{A}_t5_t10")] == [
        (150, 64),
        (182, 64),
        (214, 64),
        (236, 64),
    ]
    assert [ex["window_start"] for ex in windows_of(train, f"{A}_t0_t5")] == [0, 32, 64, 86]
    assert [ex["window_start"] for ex in windows_of(test, f"{B}_t0_t5")] == [0]
    ex = windows_of(train, f"{A}_t0_t5")[0]
    assert ex["video_path"] == str(ego4d_root / "full_scale.gaze" / f"{A}.mp4")  # read straight from the full video
    assert (ex["fps"], ex["width"], ex["height"]) == (30.0, 32, 34)
    assert (ex["action"], ex["verb"], ex["noun"]) == (-1, -1, -1)


def test_nearest_timestamp_and_y_flip(fixed):
    ex = windows_of(fixed[1]["train"], f"{A}_t5_t10")[1]  # frames 182..245
    np.testing.assert_allclose(ex["gaze"][:, 0], nearest_x(182 + np.arange(64)), atol=1e-6)
    np.testing.assert_allclose(ex["gaze"][:, 1], 0.75, atol=1e-6)
    assert (ex["gaze_type"] == schema.FIXATION).all() and ex["valid"].all()


def test_off_frame_points_are_clamped_and_coded_4(fixed):
    ex = windows_of(fixed[1]["train"], f"{A}_t0_t5")[1]  # frames 32..95
    k = np.arange(60, 63) - 32  # frames at 2.000, 2.033, 2.067 s take the x = 1.3 samples
    assert (ex["gaze_type"][k] == schema.OFF_FRAME).all() and (ex["gaze"][k, 0] == 1.0).all() and ex["valid"][k].all()
    assert ex["gaze_type"][63 - 32] == schema.SACCADE  # back from the border: a jump of ~970 px at 1088 px wide


def test_glc_off_by_one_only_under_parity(fixed, glc):
    f_ex = windows_of(fixed[1]["train"], f"{A}_t5_t10")[0]
    g_ex = windows_of(glc[1]["train"], f"{A}_t5_t10")[0]
    np.testing.assert_allclose(f_ex["gaze"][:, 0], nearest_x(150 + np.arange(64)), atol=1e-6)
    np.testing.assert_allclose(g_ex["gaze"][:, 0], nearest_x(149 + np.arange(64)), atol=1e-6)
    assert f_ex["window_start"] == g_ex["window_start"] == 150  # the frames are the same; only labels shift
    # at t = 0 GLC reads frame -1: the full video's last frame, untracked at (0, 0) as GLC writes it
    g0 = windows_of(glc[1]["train"], f"{A}_t0_t5")[0]
    assert g0["gaze_type"][0] == schema.UNTRACKED and (g0["gaze"][0] == 0).all() and not g0["valid"][0]
    np.testing.assert_allclose(g0["gaze"][1:60, 0], nearest_x(np.arange(59)), atol=1e-6)  # then off-frame
    assert (g0["gaze_type"][61:64] == schema.OFF_FRAME).all()  # frames 60..62 one step later: code 4 kept on Ego4D


def test_frames_after_the_gaze_ends_are_untracked(ego4d_root, tmp_path):
    _, ds = build(ego4d_root, tmp_path, windows="all")
    (last,) = [ex for ex in windows_of(ds["test"], f"{B}_t0_t5") if ex["window_start"] == 86]
    frames = 86 + np.arange(64)  # the gaze ends at 3.99 s (frame 119.7)
    assert (last["gaze_type"][frames <= 120] == schema.FIXATION).all()
    assert (last["gaze_type"][frames >= 121] == schema.UNTRACKED).all() and not last["valid"][frames >= 121].any()
    # by default they hold the last valid point (gaze_common.fill_untracked), never a made-up one
    np.testing.assert_allclose(last["gaze"][frames >= 121], np.broadcast_to(last["gaze"][frames == 120], (29, 2)))
    assert not np.allclose(last["gaze"][frames == 120], 0.5)


def test_clip_without_gaze_or_past_the_video_is_dropped_with_reasons(fixed, glc):
    dropped = fixed[0].build_log.dropped
    assert ("test", f"{B}_t5_t10") in {(s, c) for s, c, _ in dropped}
    assert "no gaze sample" in fixed[0].build_log.dropped_in("test")[f"{B}_t5_t10"]
    assert "has 360 frames" in fixed[0].build_log.dropped_in("train")[f"{A}_t10_t15"]
    assert f"{B}_t5_t10" in set(glc[1]["test"]["clip_id"])  # GLC keeps a clip with no gaze
    assert set(fixed[1]["train"]["clip_id"]) == {f"{A}_t0_t5", f"{A}_t5_t10"}


def test_strict_mode_raises(ego4d_root, tmp_path):
    with pytest.raises(ClipDroppedError, match=f"{A}_t10_t15"):
        load_gaze_dataset("ego4d", ego4d_root, cache_dir=tmp_path, strict=True)


def test_reports_count_malformed_rows_and_gaze_files_are_found_by_content(fixed, ego4d_root):
    log = fixed[0].build_log
    report = log.reports[str(ego4d_root / "gaze" / f"{A}.mp4")]
    assert report.rows_read == 1102 and report.rows_kept == 1100
    assert report.skipped == {"field count is not 9": 1, "non-numeric or non-finite time/position": 1}
    lists = log.reports[str(ego4d_root / "train_ego4d_gaze.csv")]
    assert (lists.rows_read, lists.rows_kept, lists.rows_skipped) == (4, 3, 1)
    assert str(ego4d_root / "gaze" / "junk.mp4") not in log.reports


def test_derived_clips_follow_glcs_untracked_rule(ego4d_root, tmp_path):
    builder, ds = build(ego4d_root, tmp_path, clip_source="derive")
    # video-a (12 s): [0,5] kept, [5,10] touches the untracked [10,11], [10,15] passes the duration
    assert sorted(set(ds["train"]["clip_id"])) == [f"{A}_t0_t5"]
    # video-b: its reversed interval skips nothing; [5,10] has no gaze and is dropped as before
    assert sorted(set(ds["test"]["clip_id"])) == [f"{B}_t0_t5"]
    assert builder.build_log.reports[str(ego4d_root / "ego4d_gaze_untracked.csv")].rows_kept == 3


def test_missing_layout_pieces(ego4d_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="full_scale.gaze(.|\n)*Expected layout"):
        load_gaze_dataset("ego4d", tmp_path, cache_dir=tmp_path / "c")
    root = make_ego4d_root(tmp_path / "r", videos={A: 6}, gaze={}, train=[glc_clip(A, 0)], test=[glc_clip(A, 0)])
    with pytest.raises(FileNotFoundError, match=f"gaze CSV of {A}"):
        load_gaze_dataset("ego4d", root, cache_dir=tmp_path / "c")
    (root / "ego4d_gaze_untracked.csv").unlink(missing_ok=True)
    with pytest.raises(FileNotFoundError, match="ego4d_gaze_untracked.csv"):
        load_gaze_dataset("ego4d", root, cache_dir=tmp_path / "c", clip_source="derive")
    with pytest.raises(ValueError, match="clip_source"):
        load_gaze_dataset("ego4d", root, cache_dir=tmp_path / "c", clip_source="cut")


def test_missing_or_undecodable_full_video(tmp_path):
    from transformers_gazeflow.data.video import VideoDecodeError

    t, x, y = gaze_b()
    root = make_ego4d_root(
        tmp_path / "r", videos={A: 6}, gaze={A: (t, x, y), B: (t, x, y)}, train=[glc_clip(A, 0)], test=[glc_clip(B, 0)]
    )
    with pytest.raises(FileNotFoundError, match=f"full_scale.gaze/{B}.mp4(.|\n)*Expected layout"):
        load_gaze_dataset("ego4d", root, cache_dir=tmp_path / "c", strict=True)  # strict: a missing video raises
    (root / "full_scale.gaze" / f"{B}.mp4").write_bytes(b"\x00" * 64)
    with pytest.raises(VideoDecodeError, match=f"{B}.mp4"):
        load_gaze_dataset("ego4d", root, cache_dir=tmp_path / "c", strict=True)  # strict: a bad video raises


@pytest.mark.parametrize("clip_source", ["lists", "derive"])
def test_missing_empty_or_truncated_full_videos_drop_their_clips_counted_and_named(tmp_path, clip_source):
    """A bad full video drops its clips with a logged reason naming it; the build goes on."""
    t, x, y = gaze_b()
    uids = {"missing": "video-m", "empty": "video-e", "cut": "video-c"}
    root = make_ego4d_root(
        tmp_path / "r",
        videos={A: 6},
        gaze={u: (t, x, y) for u in (A, *uids.values())},
        train=[glc_clip(A, 0), glc_clip(uids["missing"], 0), glc_clip(uids["cut"], 0)],
        test=[glc_clip(uids["empty"], 0), glc_clip(A, 0)],
        untracked=[f"{A},00:00:09,00:00:09,0"],
    )
    videos = root / "full_scale.gaze"
    (videos / f"{uids['empty']}.mp4").write_bytes(b"")
    write_cut_clip(videos / f"{uids['cut']}.mp4", 300, keep=0.5, fps=30)
    builder, ds = build(root, tmp_path / "c", clip_source=clip_source)
    assert set(ds["train"]["clip_id"]) == set(ds["test"]["clip_id"]) == {f"{A}_t0_t5"}
    log = builder.build_log
    assert log.drop_counts == {"video missing": 1, "video unreadable": 2}
    dropped = {**log.dropped_in("train"), **log.dropped_in("test")}
    for kind, uid in uids.items():
        (reason,) = [r for clip, r in dropped.items() if clip.startswith(uid)]
        assert (
            str(videos / f"{uid}.mp4") in reason
            and ("missing" if kind == "missing" else "empty" if kind == "empty" else "truncated") in reason
        )
