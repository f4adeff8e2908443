"""The Ego-Exo4D gaze builder on generated raw-format fixtures (the layout of the egoexo download CLI)."""

import numpy as np
import pytest

from transformers_gazeflow.data import gaze_types as codes
from transformers_gazeflow.data.loading import (
    ClipDroppedError,
    gaze_builder,
    gaze_example_features,
    load_builder_class,
    load_gaze_dataset,
)
from transformers_gazeflow.models.gazeflow.windows import window_starts

from .egoexo4d_fixtures import FixtureTake, gaze_2d_lines, make_egoexo4d_root, mps_lines, online_calibration_lines

PERSONAL_X = [100.0 + 10 * n for n in range(32)]
PERSONAL_X[5] = None  # an empty row: frames 14, 15, 16 untracked
CONFIG = {"clip_seconds": 1.0, "window_frames": 16, "window_stride": 8}
# a take's RGB camera on Aria Gen1's 2880x2880 sensor, raw orientation (made-up numbers of the right size)
SENSOR = [1220.0, 1460.0, 1450.0, 0.41, -0.46, 0.04, 1.3, -1.77, 0.65, -8e-5, 4e-5, -6e-4, 5.6e-4, 5e-4, 2.4e-4]
# the nominal camera: the first line of projectaria_tools' MPS sample (data/gen1/mps_sample/trajectory/...jsonl)
NOMINAL = [
    1220.01943882295, 1461.091249679011, 1447.087207987354,
    0.411035882200732, -0.456468282322496, 0.038303075146701, 1.298336637403988, -1.770471163632234, 0.654993502244781,
    -7.9203062637e-05, 4.4207001233e-05, -0.000587384169463, 0.00056439365081, 0.000515794638327, 0.000235027249453,
]  # fmt: skip


def served_camera(sensor: list[float], size: int) -> list[float]:
    """FISHEYE624 parameters of a sensor calibration for the upright video served at ``size`` pixels, by the documented
    rules: 32 px crop then half size (2880 -> 1408), a quarter turn clockwise, then the resize to ``size``."""
    f, cx, cy = sensor[0] / 2, 0.5 * (sensor[1] - 32 + 0.5) - 0.5, 0.5 * (sensor[2] - 32 + 0.5) - 0.5
    p0, p1, s0, s1, s2, s3 = sensor[9:]
    f, cx, cy = f, 1407 - cy, cx
    scale = size / 1408
    return [f * scale, scale * (cx + 0.5) - 0.5, scale * (cy + 0.5) - 0.5, *sensor[3:9], -p1, p0, -s2, -s3, s0, s1]


def fixture_takes():
    personal_y = [None if x is None else 700.0 for x in PERSONAL_X]
    return [
        FixtureTake(
            "uid-a",
            "unc_cooking_1",
            "TRAIN",
            frames=96,
            downscaled_frames=96,
            gaze_2d={
                "personalized_eye_gaze_2d.csv": gaze_2d_lines(PERSONAL_X, personal_y),
                "general_eye_gaze_2d.csv": gaze_2d_lines([1000.0] * 32, [700.0] * 32),
            },
            calibration=online_calibration_lines([SENSOR, [p * 1.01 for p in SENSOR]]),  # the first line is read
        ),
        FixtureTake(
            "uid-b",
            "iiith_bike_2",
            "Val",
            frames=60,
            gaze_2d={
                "General_Eye_Gaze_2D.csv": gaze_2d_lines([500.0] * 20, [600.0] * 20, columns=("x", "y", "frame_num"))
            },
        ),
        FixtureTake("uid-c", "nus_dance_3", "TEST", frames=30, has_gaze=False),
        FixtureTake(
            "uid-d",
            "upenn_music_4",
            "TRAIN",
            frames=30,
            gaze_3d={"general_eye_gaze.csv": mps_lines([0.1], [0.0], [1.0])},
        ),
        FixtureTake("uid-e", "sfu_covid_5", "TEST", gaze_2d={"general_eye_gaze_2d.csv": gaze_2d_lines([1.0], [1.0])}),
        FixtureTake("uid-f", "fair_bike_6", "TRAIN", downloaded=False),
        FixtureTake("uid-g", "cmu_soccer_7", "VAL", in_takes_json=False, downloaded=False),
        FixtureTake(
            "uid-h",
            "georgiatech_cooking_8",
            "TEST",
            frames=45,
            gaze_2d={"personalized_eye_gaze_2d.csv": gaze_2d_lines([1500.0] * 3 + [700.0] * 7, [700.0] * 10)},
            calibration=["not a calibration"],
        ),
        FixtureTake("uid-i", "minnesota_rock_9", "challenge", frames=30),
        FixtureTake("uid-j", "indiana_bike_10", None, frames=30),  # in takes.json, in no split
    ]


@pytest.fixture(scope="module")
def egoexo_root(tmp_path_factory):
    return make_egoexo4d_root(tmp_path_factory.mktemp("egoexo4d"), fixture_takes())


def build(root, cache, **config):
    builder = gaze_builder("egoexo4d", root, cache_dir=cache, **{**CONFIG, **config})
    builder.download_and_prepare()
    return builder, builder.as_dataset()


@pytest.fixture(scope="module")
def built(egoexo_root, tmp_path_factory):
    return build(egoexo_root, tmp_path_factory.mktemp("cache"))


def rows(ds, clip_id):
    return [ex for ex in ds.with_format("numpy") if ex["clip_id"] == clip_id]


def camera_of(ds, clip_id):
    """The camera fields of a clip's first example, as stored (float64; the numpy format would give float32)."""
    example = next(ex for ex in ds if ex["clip_id"] == clip_id)
    return example["camera_model"], example["camera_params"], example["width"]


def unit(px):
    return (np.asarray(px, dtype=np.float64) + 0.5) / 1408


def test_splits_follow_splits_json_in_any_case(built):
    _, ds = built
    assert sorted(ds) == ["test", "train", "validation"]
    assert {ex["clip_id"].rsplit("_t", 2)[0] for ex in ds["train"]} == {"unc_cooking_1"}
    assert {ex["clip_id"].rsplit("_t", 2)[0] for ex in ds["validation"]} == {"iiith_bike_2"}
    assert {ex["clip_id"].rsplit("_t", 2)[0] for ex in ds["test"]} == {"georgiatech_cooking_8"}


def test_takes_without_gaze_or_video_are_dropped_counted_and_named(built):
    builder, _ = built
    log = builder.build_log
    assert dict(log.drop_counts) == {"no eye gaze": 1, "3D eye gaze only": 1, "video missing": 1}
    assert "has_trimmed_eye_gaze false" in log.dropped_in("test")["nus_dance_3 (every clip)"]
    assert "general_eye_gaze.csv" in log.dropped_in("train")["upenn_music_4 (every clip)"]
    assert "sfu_covid_5" in log.dropped_in("test")["sfu_covid_5 (every clip)"]
    # downloads need not hold every take of splits.json: counted, not dropped
    assert dict(builder.skipped_takes) == {"not downloaded": 1, "not in takes.json": 1}


def test_the_448_copy_and_personalized_gaze_are_preferred(built, egoexo_root):
    _, ds = built
    first = rows(ds["train"], "unc_cooking_1_t0_t1")[0]
    folder = egoexo_root / "takes" / "unc_cooking_1" / "frame_aligned_videos"
    assert first["video_path"] == str(folder / "downscaled" / "448" / "aria01_214-1.mp4")
    assert (first["width"], first["height"], first["fps"]) == (16, 16, 30.0)
    assert first["gaze"][0, 0] == pytest.approx(unit(100.0))  # personalized (100 + 10 n), not general (1000)
    (val,) = rows(ds["validation"], "iiith_bike_2_t0_t1")
    assert val["video_path"] == str(
        egoexo_root / "takes" / "iiith_bike_2" / "frame_aligned_videos" / "aria01_214-1.mp4"
    )
    assert val["width"] == 32 and np.allclose(val["gaze"], unit([500.0, 600.0]))  # only general gaze there


def test_options_choose_general_gaze_and_the_full_video(egoexo_root, tmp_path):
    _, ds = build(egoexo_root, tmp_path, gaze="general", video="full")
    first = rows(ds["train"], "unc_cooking_1_t0_t1")[0]
    assert first["width"] == 32 and first["video_path"].endswith("frame_aligned_videos/aria01_214-1.mp4")
    assert np.allclose(first["gaze"][:, 0], unit(1000.0))
    assert camera_of(ds["train"], "unc_cooking_1_t0_t1")[1] == pytest.approx(served_camera(SENSOR, 32), rel=1e-12)


def test_each_example_carries_its_takes_camera_at_the_served_size(built):
    builder, ds = built
    for split, clip, sensor, size in (
        ("train", "unc_cooking_1_t0_t1", SENSOR, 16),  # its online_calibration.jsonl, on the 448 copy (16 px here)
        ("validation", "iiith_bike_2_t0_t1", NOMINAL, 32),  # no calibration: the nominal one, on the full video
        ("test", "georgiatech_cooking_8_t0_t1", NOMINAL, 32),  # an unreadable calibration: the nominal one
    ):
        model, params, width = camera_of(ds[split], clip)
        assert model == "FISHEYE624" and width == size
        assert params == pytest.approx(served_camera(sensor, size), rel=1e-12)
    assert dict(builder.camera_sources) == {
        "the take's online_calibration.jsonl": 1,
        "nominal (no trajectory/online_calibration.jsonl)": 1,
        "nominal (online_calibration.jsonl unreadable)": 1,
    }


def test_gaze_on_the_frames_by_the_time_rule(built):
    _, ds = built
    clip = rows(ds["train"], "unc_cooking_1_t0_t1")
    assert [ex["window_start"] for ex in clip] == window_starts(30, 16, 8)  # train: every window of a 1 s clip
    frames = {
        ex["window_start"] + i: (ex["gaze"][i], ex["gaze_type"][i], ex["valid"][i]) for ex in clip for i in range(16)
    }
    for frame in range(30):
        row = round(frame / 3)  # row n at n / 10 s; frame i at i / 30 s: the nearest row, 33 ms at most away
        gaze, gaze_type, valid = frames[frame]
        if row == 5:  # the empty row: untracked, not valid, holding the last point
            assert gaze_type == codes.UNTRACKED and not valid and gaze[0] == pytest.approx(unit(140.0))
        else:
            assert gaze_type == codes.FIXATION and valid and gaze[0] == pytest.approx(unit(100.0 + 10 * row))
    second = rows(ds["train"], "unc_cooking_1_t1_t2")
    assert [ex["window_start"] for ex in second] == [30 + s for s in window_starts(30, 16, 8)]


def test_test_clips_take_the_first_window_off_frame_gaze_is_clamped(built):
    _, ds = built
    (clip,) = rows(ds["test"], "georgiatech_cooking_8_t0_t1")  # 45 frames: one whole 1 s clip
    assert clip["window_start"] == 0 and clip["num_frames"] == 16
    assert clip["gaze_type"][:8].tolist() == [codes.OFF_FRAME] * 8  # rows 0-2 at x = 1500 px: frames 0-7
    assert clip["gaze"][0, 0] == 1.0 and clip["valid"][:8].all()
    assert clip["gaze_type"][8:].tolist() == [codes.FIXATION] * 8


def test_the_schema_is_the_other_builders(built, tmp_path):
    builder, ds = built
    assert builder.info.features == gaze_example_features()
    for other in ("egtea", "ego4d"):
        assert load_builder_class(other)(cache_dir=str(tmp_path / other)).info.features == builder.info.features
    example = ds["train"][0]
    assert example["action"] == example["verb"] == example["noun"] == -1


def test_load_gaze_dataset_returns_one_split(egoexo_root, tmp_path):
    ds = load_gaze_dataset("egoexo4d", data_dir=egoexo_root, split="validation", cache_dir=tmp_path, **CONFIG)
    assert set(ds["clip_id"]) == {"iiith_bike_2_t0_t1", "iiith_bike_2_t1_t2"}


def test_clip_seconds_none_makes_a_take_one_clip(egoexo_root, tmp_path):
    _, ds = build(egoexo_root, tmp_path, clip_seconds=None)
    assert set(ds["validation"]["clip_id"]) == {"iiith_bike_2_t0_t2"}


def test_strict_raises_with_the_reason(tmp_path):
    takes = [
        FixtureTake("uid-e", "sfu_covid_5", "TEST", gaze_2d={"general_eye_gaze_2d.csv": gaze_2d_lines([1.0], [1.0])})
    ]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    with pytest.raises(FileNotFoundError, match=r"RGB video of take sfu_covid_5 not found: .*aria01_214-1\.mp4"):
        build(root, tmp_path / "cache", strict=True)
    takes = [FixtureTake("uid-c", "nus_dance_3", "TEST", frames=30, has_gaze=False)]
    root = make_egoexo4d_root(tmp_path / "root2", takes)
    with pytest.raises(ClipDroppedError, match=r"test clip nus_dance_3 \(every clip\): no eye-gaze file"):
        build(root, tmp_path / "cache2", strict=True)
    gaze = {"general_eye_gaze_2d.csv": gaze_2d_lines([700.0] * 10, [700.0] * 10)}
    takes = [FixtureTake("uid-k", "utokyo_cpr_11", "TEST", frames=30, gaze_2d=gaze, calibration=["{"])]
    root = make_egoexo4d_root(tmp_path / "root3", takes)
    with pytest.raises(ValueError, match=r"utokyo_cpr_11.*online_calibration\.jsonl: line 1 is not JSON"):
        build(root, tmp_path / "cache3", strict=True)


def test_layout_and_option_errors_are_one_line(egoexo_root, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"takes\.json not found"):
        build(tmp_path, tmp_path / "cache")
    with pytest.raises(ValueError, match=r"gaze must be one of \('personalized', 'general'\)"):
        build(egoexo_root, tmp_path / "cache", gaze="eyes")
    with pytest.raises(ValueError, match="clip_seconds must be a positive number"):
        build(egoexo_root, tmp_path / "cache", clip_seconds=0)
