"""The raw gaze readers and their conversion rules: ``data/egtea_format.py``, ``data/ego4d_format.py`` and
``data/gaze_common.py``."""

import numpy as np
import pytest

from transformers_gazeflow.data import ego4d_format as ego4d
from transformers_gazeflow.data import egtea_format as egtea
from transformers_gazeflow.data import gaze_common as common
from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, OFF_FRAME, SACCADE, UNTRACKED

from .raw_fixtures import begaze_row, write_begaze, write_clip, write_ego4d_gaze_csv

SAMPLES = [  # (px, py, frame, event) in the 1280x960 space
    (640.0, 480.0, 0, "Fixation"),
    (100.0, 200.0, 1, "Saccade"),
    (1279.5, 959.5, 3, "Blink"),
    (0.0, 0.0, 4, "-"),
]


@pytest.mark.parametrize("fmt", [1, 2])
def test_begaze_formats_parse_to_the_same_frames(tmp_path, fmt):
    track = egtea.parse_begaze(write_begaze(tmp_path / f"f{fmt}.txt", SAMPLES, fmt=fmt))
    assert track.report.kind.startswith(f"begaze format {fmt} (header line {9 + fmt})")
    assert (track.report.rows_read, track.report.rows_kept, track.report.rows_skipped) == (4, 4, 0)
    assert len(track) == 5 and track.gaze.dtype == np.float32 and track.gaze_type.dtype == np.int8
    np.testing.assert_allclose(track.gaze[0], [0.5, 0.5])
    np.testing.assert_allclose(track.gaze[1], [100 / 1280, 200 / 960])
    np.testing.assert_allclose(track.gaze[3], [1279 / 1280, 959 / 960])  # clip(px, 0, 1279) / 1280
    assert list(track.gaze_type) == [FIXATION, SACCADE, UNTRACKED, BLINK_OR_OTHER, BLINK_OR_OTHER]
    assert list(track.valid) == [True, True, False, False, False]


def test_format2_timecode_is_read_at_24_fps():
    frames, ok = egtea.begaze_timecode_to_frame(["00:00:00:00", "01:02:03:04", "00:00:01:23", "1:2:3", "00:00:aa:01"])
    assert list(ok) == [True, True, True, False, False]
    assert list(frames[:3]) == [0, (3600 + 120 + 3) * 24 + 4, 47]


def test_malformed_rows_are_skipped_and_counted_by_reason(tmp_path):
    bad = [
        "12\tSMP\t1\t640.0\t480.0\t7",  # 6 tokens
        "13\tSMP\t1\tnan-ish\t480.0\t8\tFixation",  # non-numeric x
        "14\tSMP\t1\t640.0\t480.0\t8.5\tFixation",  # fractional frame
        "15\tSMP\t1\t640.0\t480.0\t-3\tFixation",  # negative frame
        "",
        begaze_row(2, 10.0, 10.0, 9, "Fixation"),  # a format-2 row inside a format-1 file
    ]
    track = egtea.parse_begaze(write_begaze(tmp_path / "bad.txt", SAMPLES, fmt=1, extra_lines=bad))
    report = track.report
    assert report.rows_read == 10 and report.rows_kept == 4 and report.rows_skipped == 6
    assert report.skipped == {
        "token count is not 7": 2,
        "non-numeric or non-finite x/y": 1,
        "bad frame number or timecode": 2,
        "blank line": 1,
    }
    assert len(track) == 5  # no malformed row became a frame
    assert "6 skipped as malformed" in report.summary()


def test_header_count_is_not_trusted(tmp_path):
    track = egtea.parse_begaze(write_begaze(tmp_path / "g.txt", SAMPLES, claimed_samples=1))
    assert track.report.rows_kept == 4 and len(track) == 5


def test_not_a_begaze_file_and_missing_file(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello world\n")
    with pytest.raises(ValueError, match="junk.txt.*not a BeGaze export"):
        egtea.parse_begaze(junk)
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        egtea.parse_begaze(tmp_path / "nope.txt")


def test_several_samples_on_a_frame_true_mean_vs_glc_pairwise_average(tmp_path):
    samples = [
        (100.0, 90.0, 2, "Saccade"),
        (200.0, 30.0, 2, "Fixation"),
        (400.0, 60.0, 2, "Fixation"),
        (10.0, 10.0, 0, "Fixation"),
    ]
    path = write_begaze(tmp_path / "multi.txt", samples)
    fixed, glc = egtea.parse_begaze(path), egtea.parse_begaze(path, parity="glc")
    np.testing.assert_allclose(fixed.gaze[2], [(100 + 200 + 400) / 3 / 1280, (90 + 30 + 60) / 3 / 960], rtol=1e-6)
    np.testing.assert_allclose(
        glc.gaze[2], [((100 + 200) / 2 + 400) / 2 / 1280, ((90 + 30) / 2 + 60) / 2 / 960], rtol=1e-6
    )
    assert fixed.gaze_type[2] == glc.gaze_type[2] == FIXATION  # the last sample's type
    with pytest.raises(ValueError, match="parity"):
        egtea.parse_begaze(path, parity="GLC")


def test_off_frame_and_untracked_under_both_parities(tmp_path):
    samples = [
        (1500.0, 480.0, 0, "Fixation"),
        (-20.0, 100.0, 1, "Saccade"),
        (2000.0, 2000.0, 2, "Blink"),
        (5.0, 5.0, 4, "Fixation"),
    ]
    path = write_begaze(tmp_path / "off.txt", samples)
    fixed, glc = egtea.parse_begaze(path), egtea.parse_begaze(path, parity="glc")
    np.testing.assert_allclose(fixed.gaze[:2], [[1279 / 1280, 0.5], [0.0, 100 / 960]], rtol=1e-6)
    np.testing.assert_allclose(glc.gaze[:2], fixed.gaze[:2])
    assert list(fixed.gaze_type) == [OFF_FRAME, OFF_FRAME, BLINK_OR_OTHER, UNTRACKED, FIXATION]
    assert list(glc.gaze_type) == [FIXATION, SACCADE, BLINK_OR_OTHER, UNTRACKED, FIXATION]
    assert list(fixed.valid) == [True, True, False, False, True]
    np.testing.assert_allclose(glc.gaze[3], [0.5, 0.5])  # GLC's loader puts untracked frames at the centre
    np.testing.assert_allclose(fixed.gaze[3], fixed.gaze[1])  # by default: the last valid point (not the blink's)


def test_untracked_frames_hold_the_last_valid_point():
    gaze = np.array([[0.9, 0.9], [0.1, 0.2], [7, 7], [0.3, 0.4], [7, 7], [0.0, 1.0], [7, 7], [7, 7]], np.float32)
    codes = np.array(
        [UNTRACKED, FIXATION, UNTRACKED, SACCADE, BLINK_OR_OTHER, OFF_FRAME, UNTRACKED, UNTRACKED], np.int8
    )
    filled = common.fill_untracked(gaze, codes)
    np.testing.assert_array_equal(filled, gaze[[1, 1, 1, 3, 4, 5, 5, 5]])  # leading: the first valid; blinks kept
    assert filled.dtype == np.float32 and gaze[0, 0] == np.float32(0.9)  # a new array
    np.testing.assert_array_equal(common.fill_untracked(gaze[:1], codes[:1]), [common.UNTRACKED_FILL])  # nothing valid
    np.testing.assert_array_equal(common.fill_untracked(gaze[[4]], [BLINK_OR_OTHER]), [[7, 7]])
    with pytest.raises(ValueError, match="gaze_type must have shape"):
        common.fill_untracked(gaze, codes[:3])


def test_egtea_clip_name_and_alignment_rule():
    clip = egtea.parse_egtea_clip_name("OP01-R01-PastaSalad/OP01-R01-PastaSalad-1002316-1004005-F024051-F024101.mp4")
    assert (clip.video, clip.start_frame, clip.end_frame) == ("OP01-R01-PastaSalad", 24051, 24101)
    assert clip.name == "OP01-R01-PastaSalad-1002316-1004005-F024051-F024101"
    assert list(egtea.egtea_gaze_rows(24051, 3)) == [24050, 24051, 24052]  # F_start - 1 + k
    with pytest.raises(ValueError, match="not an EGTEA clip name"):
        egtea.parse_egtea_clip_name("OP01-R01-PastaSalad-no-frames")
    assert egtea.format_egtea_clip_name("OP01-R01-PastaSalad", 1002316, 1004005, 24051, 24101) == clip.name
    with pytest.raises(ValueError, match="three '-'-separated tokens"):
        egtea.format_egtea_clip_name("OP01-PastaSalad", 1, 2, 3, 4)


def test_a_written_clip_name_and_sample_time_follow_the_24_fps_axis():
    """The writers' clip name from F numbers: a = (start - 1) / 24 s, b = end / 24 s, in ms (5 / 24 s = 208.3 ms,
    53 / 24 s = 2208.3 ms); a sample on frame 53 at 53 / 24 s = 2208333.3 us."""
    assert egtea.egtea_clip_name_at("OP01-R01-Synthetic", 6, 53) == "OP01-R01-Synthetic-208-2208-F000006-F000053"
    assert egtea.begaze_time_us(53) == 2208333 and egtea.begaze_time_us(0) == 0


def test_the_event_written_for_each_code_reads_back_as_that_code():
    assert egtea.BEGAZE_EVENTS == {FIXATION: "Fixation", SACCADE: "Saccade", BLINK_OR_OTHER: "Blink"}
    codes = [FIXATION, SACCADE, BLINK_OR_OTHER, SACCADE]
    assert egtea._begaze_event_codes([egtea.BEGAZE_EVENTS[code] for code in codes]).tolist() == codes


def test_begaze_parses_100k_rows(tmp_path):
    """A full-size file parses completely (its speed is measured by benchmarks/bench_data.py, not here)."""
    rng = np.random.default_rng(0)
    n = 100_000
    samples = [
        (float(x), float(y), int(f), e)
        for x, y, f, e in zip(
            rng.uniform(-50, 1330, n),
            rng.uniform(-50, 1010, n),
            np.arange(n) * 24 // 30,
            rng.choice(["Fixation", "Saccade", "Blink"], n),
        )
    ]
    path = write_begaze(tmp_path / "big.txt", samples)
    track = egtea.parse_begaze(path)
    assert track.report.rows_kept == n and len(track) == (n - 1) * 24 // 30 + 1


# A row cut inside its event token, and the encodings an export may come in


@pytest.mark.parametrize("fmt", [1, 2])
@pytest.mark.parametrize("cut", ["F", "Fixat", "Saccad", "Bli"])
def test_a_row_cut_inside_its_event_is_counted_not_read_as_blink(tmp_path, fmt, cut):
    """The last row of an interrupted write ends inside its event token: skipped and counted by reason."""
    path = write_begaze(tmp_path / "cut.txt", SAMPLES, fmt=fmt)
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write(begaze_row(fmt, 500.0, 400.0, 9, "Fixation").rsplit("\t", 1)[0] + "\t" + cut)  # no newline
    track = egtea.parse_begaze(path)
    assert track.report.skipped == {"event cut short (a prefix of Fixation, Saccade or Blink)": 1}
    assert track.report.rows_kept == len(SAMPLES) and len(track) == 5  # frame 9 never became a blink frame
    whole = egtea.parse_begaze(write_begaze(tmp_path / "whole.txt", SAMPLES + [(500.0, 400.0, 9, "Blink")], fmt=fmt))
    assert whole.report.rows_skipped == 0 and whole.gaze_type[9] == BLINK_OR_OTHER  # a whole "Blink" is kept


ENCODINGS = {  # codec, bytes before the text, the note the report carries
    "utf-8-bom": ("utf-8", b"\xef\xbb\xbf", "read as UTF-8 (byte-order mark)"),
    "utf-16-le-bom": ("utf-16-le", b"\xff\xfe", "read as UTF-16 LE (byte-order mark)"),
    "utf-16-be-bom": ("utf-16-be", b"\xfe\xff", "read as UTF-16 BE (byte-order mark)"),
    "utf-16-le": ("utf-16-le", b"", "read as UTF-16 LE (no byte-order mark; recognised by its NUL bytes)"),
    "utf-32-le-bom": ("utf-32-le", b"\xff\xfe\x00\x00", "read as UTF-32 LE (byte-order mark)"),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("crlf", [False, True])
def test_begaze_exports_in_utf16_utf32_or_with_a_bom_read_like_utf8(tmp_path, encoding, crlf):
    codec, mark, note = ENCODINGS[encoding]
    plain = write_begaze(tmp_path / "plain.txt", SAMPLES, fmt=2, crlf=crlf)
    other = tmp_path / f"{encoding}.txt"
    other.write_bytes(mark + plain.read_bytes().decode("utf-8").encode(codec))
    expected, track = egtea.parse_begaze(plain), egtea.parse_begaze(other)
    np.testing.assert_array_equal(track.gaze, expected.gaze)
    np.testing.assert_array_equal(track.gaze_type, expected.gaze_type)
    assert (track.report.rows_read, track.report.rows_kept, track.report.rows_skipped) == (4, 4, 0)
    assert track.report.kind == expected.report.kind and track.report.notes == [note]
    assert note in track.report.summary()


def test_a_utf16_file_cut_mid_character_counts_its_last_row(tmp_path):
    text = (
        write_begaze(tmp_path / "plain.txt", SAMPLES, fmt=1).read_text(encoding="utf-8").rstrip("\n")
        + "\n"
        + begaze_row(1, 500.0, 400.0, 9, "Fixation")
    )
    path = tmp_path / "cut16.txt"
    path.write_bytes(text.encode("utf-16")[:-1])  # half of the last character ("n") is missing
    report = egtea.parse_begaze(path).report
    assert report.rows_kept == len(SAMPLES) and report.skipped == {
        "event cut short (a prefix of Fixation, Saccade or Blink)": 1
    }
    assert report.notes == ["read as UTF-16 LE (byte-order mark); the file ends inside a character (1 byte(s) dropped)"]


def test_a_binary_file_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "gaze.txt"
    path.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ValueError, match="gaze.txt: not a BeGaze export"):
        egtea.parse_begaze(path)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_ego4d_gaze_csvs_in_utf16_utf32_or_with_a_bom_are_found_and_read(tmp_path, encoding):
    codec, mark, note = ENCODINGS[encoding]
    plain = write_ego4d_gaze_csv(
        tmp_path / "plain.mp4", np.array([0.0, 0.01]), np.array([0.25, 0.5]), np.array([0.75, 0.5])
    )
    other = tmp_path / f"{encoding}.mp4"
    other.write_bytes(mark + plain.read_bytes().decode("utf-8").encode(codec))
    assert ego4d.is_ego4d_gaze_csv(other)
    samples = ego4d.read_ego4d_gaze_csv(other)
    np.testing.assert_allclose(samples.x, [0.25, 0.5])
    np.testing.assert_allclose(samples.y, [0.25, 0.5])
    assert samples.report.rows_skipped == 0 and samples.report.notes == [note]


# --------------------------------------------------------------------------------------------------- Ego4D


def test_ego4d_gaze_csv_is_found_by_content_not_extension(tmp_path):
    gaze = write_ego4d_gaze_csv(tmp_path / "abc.mp4", np.array([0.0]), np.array([0.5]), np.array([0.5]))
    video = write_clip(tmp_path / "real.mp4", 2)
    manifest = tmp_path / "manifest.csv"
    manifest.write_text("component_idx,component_timestamp_s,\n")
    assert ego4d.is_ego4d_gaze_csv(gaze)
    assert not ego4d.is_ego4d_gaze_csv(video) and not ego4d.is_ego4d_gaze_csv(manifest)
    with pytest.raises(ValueError, match="real.mp4 is not an Ego4D gaze CSV"):
        ego4d.read_ego4d_gaze_csv(video)


def test_ego4d_y_flip_and_nearest_timestamp(tmp_path):
    # 30 fps frame times: 0, 0.0333, 0.0667; frame 1 is nearer the later of its two neighbours
    t = np.array([0.0, 0.02, 1 / 30 - 0.011, 1 / 30 + 0.009, 0.066, 0.2])
    x = np.array([0.50, 0.51, 0.52, 0.53, 0.54, 0.55])
    y = np.array([0.25, 0.25, 0.25, 0.25, 0.25, 0.25])
    path = write_ego4d_gaze_csv(tmp_path / "u.mp4", t, x, y, extra_lines=["1,2,3", "9,abc,0,0,0,0.1,0.1,0,0"])
    samples = ego4d.read_ego4d_gaze_csv(path)
    assert samples.report.skipped == {"field count is not 9": 1, "non-numeric or non-finite time/position": 1}
    np.testing.assert_allclose(samples.y, 0.75)  # y = 1 - norm_pos_y
    track = ego4d.ego4d_frame_labels(samples, num_frames=3, fps=30)
    np.testing.assert_allclose(track.gaze[:, 0], [0.50, 0.53, 0.54], atol=1e-6)
    np.testing.assert_allclose(track.gaze[:, 1], 0.75, atol=1e-6)


@pytest.mark.parametrize("parity", ["fixed", "glc"])
def test_ego4d_exact_tie_goes_to_the_later_row(parity):
    # at 32 fps every time below is exact in binary: frame 1 (0.03125 s) is 0.015625 s from both neighbours
    t = np.array([0.0, 0.015625, 0.046875, 0.0625, 0.09375, 0.125, 0.15625])
    samples = ego4d.Ego4dGazeSamples(t, np.linspace(0.1, 0.7, 7), np.full(7, 0.5), common.ParseReport("m", "t"))
    track = ego4d.ego4d_frame_labels(samples, num_frames=2, fps=32, parity=parity)
    np.testing.assert_allclose(track.gaze[:, 0], [0.1, 0.3], atol=1e-7)  # rows 0 and 2 (not 1)


def test_ego4d_fixation_threshold_is_40px_at_1088x1080_and_off_frame_is_clamped():
    # frame-to-frame steps: 39 px (fixation), 41 px (saccade), then off-frame, then back in
    xs = np.cumsum([0.3, 39 / 1088, 41 / 1088, 0.0])
    xs = np.r_[xs, 1.2, 0.99]
    samples = ego4d.Ego4dGazeSamples(np.arange(6) / 30, xs, np.full(6, 0.5), common.ParseReport("mem", "test"))
    track = ego4d.ego4d_frame_labels(samples, num_frames=6, fps=30)
    assert list(track.gaze_type) == [FIXATION, FIXATION, SACCADE, FIXATION, OFF_FRAME, FIXATION]
    assert track.gaze[4, 0] == 1.0  # clamped
    # frame 5 moves (0.99 - 1.0) * 1088 = 10.9 px from frame 4's *clamped* point: a fixation


def test_ego4d_frames_after_the_gaze_ends_are_untracked_fixed_and_glc():
    n = 40  # samples every 1/30 s for 40 frames; the video has 50 frames
    samples = ego4d.Ego4dGazeSamples(np.arange(n) / 30, np.full(n, 0.4), np.full(n, 0.6), common.ParseReport("m", "t"))
    fixed = ego4d.ego4d_frame_labels(samples, 50, 30)
    glc = ego4d.ego4d_frame_labels(samples, 50, 30, parity="glc")
    assert (fixed.gaze_type[:40] == FIXATION).all() and (fixed.gaze_type[40:] == UNTRACKED).all()
    # GLC stops once its search pointer reaches the last two samples: frames 0..38 only
    assert (glc.gaze_type[:39] == FIXATION).all() and (glc.gaze_type[39:] == UNTRACKED).all()
    np.testing.assert_allclose(glc.gaze[45], [0.0, 0.0])
    np.testing.assert_allclose(fixed.gaze[45], [0.4, 0.6])  # by default: the last valid point held (fill_untracked)
    assert not fixed.valid[45] and fixed.valid[10]


def test_ego4d_gap_in_the_gaze_is_untracked_only_when_fixed():
    t = np.r_[np.arange(10) / 30, 1.0 + np.arange(10) / 30]
    samples = ego4d.Ego4dGazeSamples(t, np.full(20, 0.5), np.full(20, 0.5), common.ParseReport("m", "t"))
    fixed = ego4d.ego4d_frame_labels(samples, 40, 30)
    assert (fixed.gaze_type[12:28] == UNTRACKED).all() and fixed.gaze_type[30] == FIXATION
    assert (ego4d.ego4d_frame_labels(samples, 35, 30, parity="glc").gaze_type[:28] == FIXATION).all()


def test_ego4d_label_rows_glc_off_by_one_wraps_at_t0():
    assert list(ego4d.ego4d_label_rows(0, 3, 300)) == [0, 1, 2]
    assert list(ego4d.ego4d_label_rows(0, 3, 300, parity="glc")) == [299, 0, 1]
    assert list(ego4d.ego4d_label_rows(150, 2, 300, parity="glc")) == [149, 150]


def test_untracked_intervals_and_clip_starts(tmp_path):
    path = tmp_path / "untracked.csv"
    path.write_bytes(
        b"vid,00:00:12,00:00:13,1\r\nvid,00:00:12,00:00:13,2\r\nvid,00:00:40,00:00:30,0\r\n"
        b"bad row\r\nother,00:01:00,00:01:02,0\r\n"
    )
    intervals, report = ego4d.read_untracked_intervals(path)
    assert report.rows_read == 5 and report.rows_kept == 4 and report.rows_skipped == 1
    assert intervals["vid"] == [(12, 13), (12, 13), (40, 30)] and intervals["other"] == [(60, 62)]
    # [10, 15] meets [12, 13]; [15, 20] does not; a reversed interval skips nothing; stop once end > duration
    assert ego4d.ego4d_clip_starts(47.9, intervals["vid"]) == [0, 5, 15, 20, 25, 30, 35, 40]
    # touching counts: [55, 60] touches [60, 62] and [60, 65] overlaps; [65, 70] is after it
    assert ego4d.ego4d_clip_starts(70, intervals["other"]) == [0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 65]
    assert ego4d.ego4d_clip_starts(4.9) == []


def test_glc_clip_path():
    assert ego4d.parse_glc_clip_path("abc-1/abc-1_t15_t20.mp4\r") == ("abc-1", 15, 20)
    with pytest.raises(ValueError, match="GLC Ego4D clip path"):
        ego4d.parse_glc_clip_path("abc-1/abc.mp4")


def test_crlf_files_parse_like_lf(tmp_path):
    lf = egtea.parse_begaze(write_begaze(tmp_path / "lf.txt", SAMPLES, fmt=2))
    crlf = egtea.parse_begaze(write_begaze(tmp_path / "crlf.txt", SAMPLES, fmt=2, crlf=True))
    np.testing.assert_array_equal(lf.gaze, crlf.gaze)
    np.testing.assert_array_equal(lf.gaze_type, crlf.gaze_type)
    path = tmp_path / "crlf.mp4"
    path.write_bytes(
        b"component_idx,component_timestamp_s,canonical_timestamp_s,norm_pos_x,norm_pos_y\r\n"
        b"0,0.0,0,0.25,0.75\r\n1,0.004,0,0.5,0.5\r\n"
    )
    samples = ego4d.read_ego4d_gaze_csv(path)
    np.testing.assert_allclose(samples.x, [0.25, 0.5])
    np.testing.assert_allclose(samples.y, [0.25, 0.5])
    assert samples.report.rows_skipped == 0


def test_class_index_file(tmp_path):
    path = tmp_path / "action_idx.txt"
    path.write_bytes(b"Close fridge 2\r\nInspect/Read recipe 1\r\n\r\n")
    assert egtea.read_egtea_index(path) == ["Inspect/Read recipe", "Close fridge"]
    path.write_text("Close fridge 1\nOpen fridge 3\n")
    with pytest.raises(ValueError, match="ids are not 1..2"):
        egtea.read_egtea_index(path)
    path.write_text("Close fridge\n")
    with pytest.raises(ValueError, match="line 1"):
        egtea.read_egtea_index(path)


# --------------------------------------- the vectorised rules against plain loops written from docs/specs/data.md


def loop_begaze_glc(samples):
    """docs/specs/data.md's description of the reference, one sample at a time: a float32 table, pairwise running
    average, the last sample's type, clamp + normalise, off-frame code overwritten, untracked at the centre."""
    num_frames = max(f for _, _, f, _ in samples) + 1
    table = np.zeros((num_frames, 3), np.float32)
    codes = {"Fixation": 1, "Saccade": 2}
    for px, py, frame, event in samples:
        if table[frame, 2] > 0:
            table[frame, 0] = (table[frame, 0] + px) / 2.0
            table[frame, 1] = (table[frame, 1] + py) / 2.0
        else:
            table[frame, 0], table[frame, 1] = px, py
        table[frame, 2] = codes.get(event, 3)
    gaze = np.stack(
        [np.clip(table[:, 0], 0, 1279) / np.float32(1280), np.clip(table[:, 1], 0, 959) / np.float32(960)], 1
    )
    gaze[table[:, 2] == 0] = 0.5
    return gaze, table[:, 2].astype(np.int8)


def test_begaze_glc_parity_matches_a_sample_by_sample_loop(tmp_path):
    rng = np.random.default_rng(7)
    n = 3000
    frames = np.sort(rng.integers(0, 1500, n))  # many frames with 2-4 samples, many with none
    samples = [
        (round(float(x), 2), round(float(y), 2), int(f), str(e))
        for x, y, f, e in zip(
            rng.uniform(-100, 1400, n),
            rng.uniform(-100, 1060, n),
            rng.permutation(frames),
            rng.choice(["Fixation", "Saccade", "Blink", "-"], n),
        )
    ]
    track = egtea.parse_begaze(write_begaze(tmp_path / "g.txt", samples, fmt=2), parity="glc")
    gaze, types = loop_begaze_glc(samples)
    np.testing.assert_array_equal(track.gaze_type, types)
    np.testing.assert_allclose(track.gaze, gaze, rtol=0, atol=2e-7)


def loop_ego4d(t, x, y, num_frames, fps, parity):
    """docs/specs/data.md's Ego4D rule, one frame at a time (pointer search as the reference walks it)."""
    n, j = len(t), 0
    out_gaze, out_type = [], []
    previous = None
    for i in range(num_frames):
        ts = i / fps
        if parity == "glc":
            if j >= n - 2:
                break
            while j < n and t[j] < ts:
                j += 1
            if j >= n:
                break
            k = j - 1 if j > 0 and abs(t[j - 1] - ts) < abs(t[j] - ts) else j
        else:
            distance = np.abs(t - ts)
            k = int(np.flatnonzero(distance == distance.min())[-1])  # nearest; ties to the later row
            if abs(t[k] - ts) > 0.5 / fps:
                out_gaze.append((0.5, 0.5))
                out_type.append(0)
                previous = None
                continue
        px, py = x[k], y[k]
        if previous is None:
            code = 1
        else:
            moved = np.hypot((px - previous[0]) * 1088, (py - previous[1]) * 1080)
            code = 1 if moved <= 40 else 2
        if not (0 <= px <= 1 and 0 <= py <= 1):
            code = 4
            px, py = min(max(px, 0), 1), min(max(py, 0), 1)
        out_gaze.append((px, py))
        out_type.append(code)
        previous = (px, py)
    fill = (0.0, 0.0) if parity == "glc" else (0.5, 0.5)
    while len(out_type) < num_frames:
        out_gaze.append(fill)
        out_type.append(0)
    if parity != "glc":  # untracked frames hold the last valid point (the first valid one before any)
        held = next((g for g, c in zip(out_gaze, out_type) if c not in (0, 3)), (0.5, 0.5))
        for i, code in enumerate(out_type):
            if code == 0:
                out_gaze[i] = held
            elif code != 3:
                held = out_gaze[i]
    return np.array(out_gaze, np.float32), np.array(out_type, np.int8)


@pytest.mark.parametrize("parity", ["fixed", "glc"])
def test_ego4d_labels_match_a_frame_by_frame_loop(parity):
    rng = np.random.default_rng(3)
    t = np.cumsum(rng.choice([0.004, 0.004, 0.004, 0.05, 0.2], 1500))  # 250 Hz with gaps
    x = np.clip(np.cumsum(rng.normal(0, 0.02, t.size)) + 0.5, -0.2, 1.2)
    y = np.clip(np.cumsum(rng.normal(0, 0.02, t.size)) + 0.5, -0.2, 1.2)
    num_frames = int(t[-1] * 30) + 40  # the video outlasts the gaze
    samples = ego4d.Ego4dGazeSamples(t, x, y, common.ParseReport("mem", "test"))
    track = ego4d.ego4d_frame_labels(samples, num_frames, 30.0, parity=parity)
    gaze, types = loop_ego4d(t, x, y, num_frames, 30.0, parity)
    np.testing.assert_array_equal(track.gaze_type, types)
    np.testing.assert_allclose(track.gaze, gaze, atol=1e-7)
    assert (types == 2).any() and (types == 4).any() and (types == 0).any()


def test_text_files_that_are_not_text_and_reversed_clip_ranges_are_named(tmp_path):
    path = tmp_path / "action_idx.txt"
    path.write_bytes("Caf\u00e9 order 1\n".encode("latin-1"))  # not UTF-8
    with pytest.raises(
        ValueError,
        match=r"action_idx.txt: a class-index file must be text in UTF-8, UTF-16 or UTF-32; "
        r"byte 3 \(b'\\xe9'\) is not UTF-8",
    ):
        egtea.read_egtea_index(path)
    path.write_bytes("Caf\u00e9 order 1\r\n".encode("utf-16"))  # with a byte-order mark
    assert egtea.read_egtea_index(path) == ["Caf\u00e9 order"]
    with pytest.raises(ValueError, match="F<end> is before its F<start>"):
        egtea.parse_egtea_clip_name("OP01-R01-PastaSalad-1-2-F000200-F000100")
