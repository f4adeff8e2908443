"""The EGTEA Gaze+ builder on generated raw-format fixtures (the layout of the EGTEA Gaze+ download)."""

import logging

import numpy as np
import pytest

from transformers_gazeflow.data import gaze_types as schema
from transformers_gazeflow.data.loading import ClipDroppedError, gaze_builder, load_gaze_dataset
from transformers_gazeflow.data.video import VideoDecodeError

from .raw_fixtures import EgteaFixtureClip, egtea_clip_name, make_egtea_root, write_clip, write_cut_clip

OP = "OP01-R01-PastaSalad"  # format 1, gaze_data/<VIDEO>.txt
P = "P05-R03-Pizza"  # format 2, gaze_data/<VIDEO>-GazeData.txt
GLC_DROPPED = "OP03-R01-PastaSalad-879780-892210-F021084-F021444"

SHORT = EgteaFixtureClip(egtea_clip_name(OP, 11, 26), 16, action=3, verb=2, noun=5)
LONG = EgteaFixtureClip(egtea_clip_name(OP, 30, 129), 100, action=106, verb=19, noun=53)
UNCOVERED = EgteaFixtureClip(egtea_clip_name(OP, 180, 209), 30)  # needs rows 179..208, gaze has 0..199
PIZZA = EgteaFixtureClip(egtea_clip_name(P, 5, 24), 20, action=7, verb=1, noun=1)
TEST_CLIP = EgteaFixtureClip(egtea_clip_name(OP, 101, 180), 80, action=2, verb=2, noun=2)
DROPPED_BY_GLC = EgteaFixtureClip(GLC_DROPPED, 16)

MULTI_FRAME = 40  # three samples on this frame (pairwise average vs mean)
OFF_FRAME = 41  # a fixation outside the 1280x960 frame
UNTRACKED_FRAMES = (42, 43)  # no sample at all
BLINK_FRAME = 44


def op_samples():
    """One sample per frame 0..199 that encodes its frame (px = 3 f, py = 2 f), with a few special frames."""
    samples = []
    for f in range(200):
        if f in UNTRACKED_FRAMES:
            continue
        if f == MULTI_FRAME:
            samples += [(100.0, 90.0, f, "Saccade"), (200.0, 30.0, f, "Fixation"), (400.0, 66.0, f, "Fixation")]
        elif f == OFF_FRAME:
            samples.append((1400.0, 2.0 * f, f, "Fixation"))
        else:
            event = "Blink" if f == BLINK_FRAME else ("Saccade" if f % 5 == 0 else "Fixation")
            samples.append((3.0 * f, 2.0 * f, f, event))
    return samples


@pytest.fixture(scope="module")
def egtea_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("egtea")
    pizza = [(5.0 * f, 4.0 * f, f, "Fixation") for f in range(60)]
    make_egtea_root(
        root,
        train=[SHORT, LONG, UNCOVERED, PIZZA],
        test=[TEST_CLIP, DROPPED_BY_GLC],
        gaze={
            OP: (op_samples(), 1, f"{OP}.txt"),
            P: (pizza, 2, f"{P}-GazeData.txt"),
            "OP03-R01-PastaSalad": ([(1.0, 1.0, f, "Fixation") for f in range(100)], 1, "OP03-R01-PastaSalad.txt"),
        },
    )
    # malformed split lines: counted, never clips
    with open(root / "train_split1.txt", "ab") as handle:
        handle.write(
            f"{SHORT.name} 107 1 1\r\n{SHORT.name} 0 1 1\r\nnot-a-clip 1 2 3\r\n{SHORT.name} x 1 1\r\n".encode()
        )
    # malformed rows in the OP gaze file: counted, never data
    with open(root / "gaze_data" / f"{OP}.txt", "a") as handle:
        handle.write("1\tSMP\t1\t5.0\t5.0\n1\tSMP\t1\tx\t5.0\t3\tFixation\n")
    return root


def build(root, cache, **config):
    builder = gaze_builder("egtea", root, cache_dir=cache, **config)
    builder.download_and_prepare()
    return builder, builder.as_dataset()


@pytest.fixture(scope="module")
def fixed(egtea_root, tmp_path_factory):
    return build(egtea_root, tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def glc(egtea_root, tmp_path_factory):
    return build(egtea_root, tmp_path_factory.mktemp("cache"), parity="glc")


def rows_of(ds, clip):
    return [ex for ex in ds if ex["clip_id"] == clip.name]


def test_split_files_are_crlf_and_clip_names_are_clean(egtea_root, fixed):
    assert b"\r\n" in (egtea_root / "train_split1.txt").read_bytes()
    assert set(fixed[1]["train"]["clip_id"]) == {SHORT.name, LONG.name, PIZZA.name}


def test_alignment_rule_reads_row_F_start_minus_1_plus_k(fixed):
    ds = fixed[1]["train"].with_format("numpy")
    (short,) = rows_of(ds, SHORT)
    rows = 10 + np.arange(16)  # F_start = 11
    np.testing.assert_allclose(short["gaze"], np.stack([3 * rows / 1280, 2 * rows / 960], 1), rtol=1e-6)
    (pizza,) = rows_of(ds, PIZZA)  # format 2 (timecodes), -GazeData.txt name
    rows = 4 + np.arange(20)
    np.testing.assert_allclose(pizza["gaze"], np.stack([5 * rows / 1280, 4 * rows / 960], 1), rtol=1e-6)
    assert list(pizza["gaze_type"]) == [schema.FIXATION] * 20


def test_schema_fields_and_labels(fixed, egtea_root):
    ds = fixed[1]["train"]
    ex = rows_of(ds, SHORT)[0]
    assert ex["video_path"] == str(egtea_root / "cropped_clips" / OP / f"{SHORT.name}.mp4")
    assert (ex["fps"], ex["width"], ex["height"], ex["num_frames"], ex["window_start"]) == (24.0, 32, 24, 16, 0)
    assert (ex["action"], ex["verb"], ex["noun"]) == (2, 1, 4)  # 1-based in the split file, 0-based here
    assert (rows_of(ds, LONG)[0]["action"], rows_of(ds, LONG)[0]["noun"]) == (105, 52)
    assert ds.features["gaze"].dtype == "float32" and ds.features["gaze_type"].feature.dtype == "int8"
    assert ds.features["valid"].feature.dtype == "bool"


def test_short_clips_are_one_window_and_long_clips_are_covered(fixed):
    train, test = fixed[1]["train"], fixed[1]["test"]
    assert [(ex["window_start"], ex["num_frames"]) for ex in rows_of(train, SHORT)] == [(0, 16)]
    assert [(ex["window_start"], ex["num_frames"]) for ex in rows_of(train, LONG)] == [(0, 64), (32, 64), (36, 64)]
    # test split: the protocol's first window only
    assert [(ex["window_start"], ex["num_frames"]) for ex in rows_of(test, TEST_CLIP)] == [(0, 64)]


def test_window_options(egtea_root, tmp_path):
    _, ds = build(egtea_root, tmp_path, window_frames=16, window_stride=8, windows="all")
    assert [ex["window_start"] for ex in rows_of(ds["test"], TEST_CLIP)] == [0, 8, 16, 24, 32, 40, 48, 56, 64]
    assert all(ex["num_frames"] == 16 for ex in ds["test"])
    with pytest.raises(ValueError, match="window_stride"):
        build(egtea_root, tmp_path, window_frames=16, window_stride=32)


def test_uncovered_clip_is_dropped_with_a_reason_and_strict_raises(fixed, egtea_root, tmp_path, caplog):
    builder, _ = fixed
    reasons = builder.build_log.dropped_in("train")
    assert list(reasons) == [UNCOVERED.name] and "rows 179..208" in reasons[UNCOVERED.name]
    assert "covers rows 0..199" in reasons[UNCOVERED.name]
    with pytest.raises(ClipDroppedError, match=UNCOVERED.name):
        build(egtea_root, tmp_path / "strict", strict=True)
    with caplog.at_level(logging.WARNING):
        build(egtea_root, tmp_path / "logged")
    assert any(UNCOVERED.name in record.getMessage() for record in caplog.records)


def test_parse_reports_count_malformed_rows_per_file(fixed, egtea_root):
    report = fixed[0].build_log.reports[str(egtea_root / "gaze_data" / f"{OP}.txt")]
    assert report.rows_skipped == 2
    assert report.skipped == {"token count is not 7": 1, "non-numeric or non-finite x/y": 1}
    assert report.rows_kept == len(op_samples())
    pizza = fixed[0].build_log.reports[str(egtea_root / "gaze_data" / f"{P}-GazeData.txt")]
    assert pizza.kind.startswith("begaze format 2") and pizza.rows_skipped == 0


def test_split_file_lines_are_checked_against_the_class_index(fixed, egtea_root):
    builder = fixed[0]
    report = builder.build_log.reports[str(egtea_root / "train_split1.txt")]
    assert (report.rows_read, report.rows_kept) == (8, 4)
    assert report.skipped == {
        "label id past the class-index file": 1,
        "label id < 1 (ids are 1-based)": 1,
        "not '<clip> <action> <verb> <noun>'": 2,
    }
    assert builder.label_names["action"][0] == "Action number 1" and len(builder.label_names["action"]) == 106


def test_parity_glc_pairwise_average_untracked_centre_and_no_off_frame_code(fixed, glc):
    local = lambda frame: frame - 29  # noqa: E731  LONG starts at F30: local k reads row 29 + k
    f_ex = rows_of(fixed[1]["train"].with_format("numpy"), LONG)[0]
    g_ex = rows_of(glc[1]["train"].with_format("numpy"), LONG)[0]
    k = local(MULTI_FRAME)
    np.testing.assert_allclose(f_ex["gaze"][k], [700 / 3 / 1280, 62 / 960], rtol=1e-6)
    np.testing.assert_allclose(g_ex["gaze"][k], [275 / 1280, 63 / 960], rtol=1e-6)
    k = local(OFF_FRAME)
    assert f_ex["gaze_type"][k] == schema.OFF_FRAME and g_ex["gaze_type"][k] == schema.FIXATION
    np.testing.assert_allclose(f_ex["gaze"][k, 0], 1279 / 1280)
    for frame in UNTRACKED_FRAMES:
        k = local(frame)
        assert f_ex["gaze_type"][k] == g_ex["gaze_type"][k] == schema.UNTRACKED
        np.testing.assert_allclose(g_ex["gaze"][k], [0.5, 0.5])
        assert not f_ex["valid"][k] and not g_ex["valid"][k]
    assert f_ex["gaze_type"][local(BLINK_FRAME)] == schema.BLINK_OR_OTHER and not f_ex["valid"][local(BLINK_FRAME)]
    assert f_ex["valid"][local(45)] and f_ex["gaze_type"][local(45)] == schema.SACCADE


def test_glc_test_clip_drop_happens_only_under_parity_but_coverage_drops_it_anyway(fixed, glc):
    assert "GLC's test set" in glc[0].build_log.dropped_in("test")[GLC_DROPPED]
    assert "covers rows 0..99" in fixed[0].build_log.dropped_in("test")[GLC_DROPPED]
    assert set(glc[1]["test"]["clip_id"]) == set(fixed[1]["test"]["clip_id"]) == {TEST_CLIP.name}


def test_other_split_ids_and_conflicting_config(egtea_root, tmp_path):
    with pytest.raises(FileNotFoundError, match="train_split2.txt"):
        load_gaze_dataset("egtea", egtea_root, split="train", split_id=2, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="conflicts with split_id=3"):
        load_gaze_dataset("egtea", egtea_root, config_name="split1", split_id=3, cache_dir=tmp_path)


def test_missing_layout_pieces_raise_file_not_found_naming_path_and_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match="cropped_clips(.|\n)*Expected layout"):
        load_gaze_dataset("egtea", tmp_path, cache_dir=tmp_path / "c")
    root = make_egtea_root(tmp_path / "r", train=[SHORT], test=[], gaze={})
    with pytest.raises(FileNotFoundError, match=f"gaze_data/{OP}.txt(.|\n)*{OP}-GazeData.txt"):
        load_gaze_dataset("egtea", root, cache_dir=tmp_path / "c")
    (root / "cropped_clips" / OP / f"{SHORT.name}.mp4").unlink()
    with pytest.raises(FileNotFoundError, match=f"{SHORT.name}.mp4(.|\n)*Expected layout"):
        load_gaze_dataset("egtea", root, cache_dir=tmp_path / "c2", strict=True)  # strict: a missing video raises


def test_undecodable_video_raises_naming_the_file(tmp_path):
    root = make_egtea_root(tmp_path / "r", train=[SHORT], test=[], gaze={OP: (op_samples(), 1, f"{OP}.txt")})
    (root / "cropped_clips" / OP / f"{SHORT.name}.mp4").write_bytes(b"not a video at all" * 10)
    with pytest.raises(VideoDecodeError, match=SHORT.name):
        load_gaze_dataset("egtea", root, cache_dir=tmp_path / "c", strict=True)  # strict: a bad video raises


# One missing, empty or truncated video no longer aborts the build
MISSING = EgteaFixtureClip(egtea_clip_name(OP, 131, 146), 16)
EMPTY = EgteaFixtureClip(egtea_clip_name(OP, 147, 162), 16)
CUT = EgteaFixtureClip(egtea_clip_name(OP, 150, 197), 48)  # cut after its mp4 index: still opens
CUT_INDEX = EgteaFixtureClip(egtea_clip_name(OP, 60, 107), 48)  # cut before its mp4 index (written last)
BAD_VIDEOS = {
    MISSING.name: "video missing",
    EMPTY.name: "video unreadable",
    CUT.name: "video unreadable",
    CUT_INDEX.name: "video unreadable",
}


def break_videos(root, clips=(MISSING, EMPTY, CUT, CUT_INDEX)):
    folder = root / "cropped_clips" / OP
    for clip in clips:
        if clip is MISSING:
            (folder / f"{MISSING.name}.mp4").unlink()
        elif clip is EMPTY:
            (folder / f"{EMPTY.name}.mp4").write_bytes(b"")
        else:
            write_cut_clip(
                folder / f"{clip.name}.mp4", clip.num_frames, keep=0.5 if clip is CUT else 0.9, index_first=clip is CUT
            )
    return folder


def test_missing_empty_and_truncated_videos_are_dropped_counted_and_named(tmp_path):
    root = make_egtea_root(
        tmp_path / "r",
        train=[MISSING, SHORT, EMPTY, CUT, CUT_INDEX],
        test=[TEST_CLIP],
        gaze={OP: (op_samples(), 1, f"{OP}.txt")},
    )
    folder = break_videos(root)
    builder, ds = build(root, tmp_path / "c")
    assert set(ds["train"]["clip_id"]) == {SHORT.name} and set(ds["test"]["clip_id"]) == {TEST_CLIP.name}
    reasons = builder.build_log.dropped_in("train")
    assert set(reasons) == set(BAD_VIDEOS)
    for name, reason in reasons.items():  # each reason names the clip's file
        assert str(folder / f"{name}.mp4") in reason, reason
    assert "missing" in reasons[MISSING.name] and "empty" in reasons[EMPTY.name]
    assert "truncated (its container lists 48 frames" in reasons[CUT.name]
    assert builder.build_log.drop_counts == {"video missing": 1, "video unreadable": 3}
    assert builder.build_log.summary().startswith("4 clips dropped (1 video missing, 3 video unreadable)")


@pytest.mark.parametrize(
    "bad, error",
    [(MISSING, FileNotFoundError), (EMPTY, VideoDecodeError), (CUT, VideoDecodeError), (CUT_INDEX, VideoDecodeError)],
)
def test_strict_raises_on_each_kind_of_bad_video_naming_the_file(tmp_path, bad, error):
    root = make_egtea_root(tmp_path / "r", train=[SHORT, bad], test=[], gaze={OP: (op_samples(), 1, f"{OP}.txt")})
    break_videos(root, [bad])
    with pytest.raises(error, match=f"{bad.name}.mp4"):
        build(root, tmp_path / "c", strict=True)


def test_a_video_shorter_than_its_names_frame_range_is_kept_shortened_and_counted(tmp_path):
    """The clip keeps the frames its video has (local frame k still reads F_start - 1 + k), and
    the build log counts it; strict raises naming the file."""
    shorter = EgteaFixtureClip(egtea_clip_name(OP, 11, 40), 16)  # its name lists 30 frames
    root = make_egtea_root(tmp_path / "r", train=[shorter, LONG], test=[], gaze={OP: (op_samples(), 1, f"{OP}.txt")})
    builder, ds = build(root, tmp_path / "c")
    assert list(ds) == ["train"]  # no test clip: the split is left out (datasets cannot hold an empty one)
    (ex,) = rows_of(ds["train"].with_format("numpy"), shorter)
    rows = 10 + np.arange(16)
    assert ex["num_frames"] == 16
    np.testing.assert_allclose(ex["gaze"], np.stack([3 * rows / 1280, 2 * rows / 960], 1), rtol=1e-6)
    reason = builder.build_log.shortened_in("train")[shorter.name]
    assert f"{shorter.name}.mp4 has 16 frames, fewer than the 30 of its name's range F11..F40" in reason
    assert builder.build_log.shorten_counts == {"video shorter than its name's frame range": 1}
    assert not builder.build_log.dropped and LONG.name not in builder.build_log.shortened_in("train")
    with pytest.raises(ClipDroppedError, match=f"{shorter.name}.mp4 has 16 frames"):
        build(root, tmp_path / "strict", strict=True)


def test_clip_at_another_frame_rate_is_dropped(tmp_path):
    root = make_egtea_root(
        tmp_path / "r",
        train=[SHORT, PIZZA],
        test=[],
        gaze={
            OP: (op_samples(), 1, f"{OP}.txt"),
            P: ([(5.0, 4.0, f, "Fixation") for f in range(60)], 2, f"{P}-GazeData.txt"),
        },
    )
    write_clip(root / "cropped_clips" / P / f"{PIZZA.name}.mp4", 20, fps=30)
    builder = gaze_builder("egtea", root, cache_dir=tmp_path / "c")
    builder.download_and_prepare()
    assert "30 fps" in builder.build_log.dropped_in("train")[PIZZA.name]
    assert builder.as_dataset(split="train")["clip_id"] == [SHORT.name]


def test_split_files_with_a_byte_order_mark_keep_their_first_clip_and_non_text_is_named(tmp_path):
    root = make_egtea_root(
        tmp_path / "r",
        train=[SHORT, PIZZA],
        test=[],
        gaze={
            OP: (op_samples(), 1, f"{OP}.txt"),
            P: ([(5.0, 4.0, f, "Fixation") for f in range(60)], 2, f"{P}-GazeData.txt"),
        },
    )
    split = root / "train_split1.txt"
    split.write_bytes(b"\xef\xbb\xbf" + split.read_bytes())  # saved by a Windows editor
    builder, ds = build(root, tmp_path / "c")
    assert set(ds["train"]["clip_id"]) == {SHORT.name, PIZZA.name}
    assert builder.build_log.reports[str(split)].rows_skipped == 0
    split.write_bytes(split.read_bytes() + b"\xff\xfe\xfd junk\r\n")
    with pytest.raises(ValueError, match=r"train_split1.txt: a split file must be text in UTF-8"):
        build(root, tmp_path / "c2")
