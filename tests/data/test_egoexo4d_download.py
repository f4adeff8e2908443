"""What a real Ego-Exo4D download holds, on generated raw-format fixtures: the layout readers (takes.json, splits.json,
which video and gaze file of a take), and the builder on partial downloads (takes not downloaded, only the 448 part,
missing, unreadable or malformed files), each problem a count in the log or a one-line error naming the file."""

import json

import pytest

from transformers_gazeflow.data.egoexo4d_format import Take, read_splits, read_takes, take_gaze_files, take_video
from transformers_gazeflow.data.loading import gaze_builder, load_gaze_dataset

from .egoexo4d_fixtures import FixtureTake, gaze_2d_lines, make_egoexo4d_root, mps_lines, take_entry, write_lines

CONFIG = {"clip_seconds": 1.0, "window_frames": 16, "window_stride": 8}
GAZE = {"general_eye_gaze_2d.csv": gaze_2d_lines([700.0] * 10, [700.0] * 10)}


def write_json(path, document):
    return write_lines(path, [json.dumps(document)])


# --- splits.json and takes.json ---------------------------------------------------------------------------------


def test_splits_by_take_uid_in_any_case_unknown_names_counted(tmp_path):
    table = {"u1": "train", "u2": "VAL", "u3": "Validation", "u4": "test", "u5": "challenge", "u6": "challenge"}
    splits, unknown = read_splits(write_json(tmp_path / "splits.json", {"take_uid_to_split": table}))
    assert splits == {"u1": "train", "u2": "validation", "u3": "validation", "u4": "test"}
    assert unknown == {"challenge": 2}


def test_splits_as_lists_of_take_uids(tmp_path):
    document = {"split_to_take_uids": {"train": ["u1", "u2"], "val": ["u3"], "test": []}}
    splits, unknown = read_splits(write_json(tmp_path / "splits.json", document))
    assert splits == {"u1": "train", "u2": "train", "u3": "validation"} and unknown == {}


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"take_uid_to_split": {"u1": "train"', r"splits\.json is not valid JSON \(.* at line 2\)"),
        ('{"take_uid_to_benchmark": {}}', r"splits\.json: expected take_uid_to_split"),
        ('["u1"]', r"splits\.json: expected take_uid_to_split"),
    ],
)
def test_a_malformed_splits_json_is_one_line_naming_it(tmp_path, text, message):
    path = write_lines(tmp_path / "splits.json", [text])
    with pytest.raises(ValueError, match=message) as caught:
        read_splits(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_takes_json_reads_the_aria_rgb_stream_and_the_gaze_flag(tmp_path):
    entry = take_entry(FixtureTake("u1", "cmu_bike01_5", "train", aria="aria02", has_gaze=False))
    bare = {"take_uid": "u2", "take_name": "nus_cpr_27_3", "frame_aligned_videos": {"aria01": {"rgb": {}}}}
    takes = read_takes(write_json(tmp_path / "takes.json", [entry, bare]))
    assert takes["u1"] == Take(
        "u1", "cmu_bike01_5", "takes/cmu_bike01_5", "frame_aligned_videos/aria02_214-1.mp4", False
    )
    assert takes["u2"] == Take("u2", "nus_cpr_27_3", "takes/nus_cpr_27_3", None, None)


def test_a_take_without_uid_or_name_is_one_line_naming_the_file(tmp_path):
    path = write_json(tmp_path / "takes.json", [{"take_uid": "u1", "take_name": "a"}, {"take_uid": "u2"}])
    with pytest.raises(ValueError, match=r"takes\.json: take 1 has no take_uid or take_name"):
        read_takes(path)
    with pytest.raises(ValueError, match=r"other\.json: expected a list of takes"):
        read_takes(write_json(tmp_path / "other.json", "takes"))


# --- which files of a take ---------------------------------------------------------------------------------------


def video_files(take_dir, *names):
    for name in names:
        path = take_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")  # take_video looks at names only


def test_take_video_prefers_the_448_copy_and_matches_names_in_any_case(tmp_path):
    take = Take("u1", "t", "takes/t", "frame_aligned_videos/aria01_214-1.mp4", True)
    video_files(tmp_path, "frame_aligned_videos/ARIA01_214-1.MP4", "frame_aligned_videos/cam01.mp4")
    assert take_video(tmp_path, take).path.name == "ARIA01_214-1.MP4"
    assert take_video(tmp_path, take, "downscaled") is None
    video_files(tmp_path, "frame_aligned_videos/downscaled/448/aria01_214-1.mp4")
    assert take_video(tmp_path, take).downscaled and take_video(tmp_path, take, "auto").path.parent.name == "448"
    assert not take_video(tmp_path, take, "full").downscaled


def test_without_relative_path_the_folders_one_aria_video_is_read_even_only_the_448_copy(tmp_path):
    take = Take("u1", "t", "takes/t", None, True)
    video_files(tmp_path, "frame_aligned_videos/downscaled/448/aria03_214-1.mp4", "frame_aligned_videos/gp01.mp4")
    found = take_video(tmp_path, take)
    assert found.downscaled and found.path.name == "aria03_214-1.mp4"
    assert take_video(tmp_path, take, "full") is None
    video_files(tmp_path, "frame_aligned_videos/downscaled/448/aria04_214-1.mp4")  # two: which one is unknown
    assert take_video(tmp_path, take, "downscaled") is None


def test_a_video_named_otherwise_than_takes_json_says_is_the_folders_one_aria_video(tmp_path):
    take = Take("u1", "t", "takes/t", "frame_aligned_videos/aria01_214-1.mp4", True)
    video_files(tmp_path, "frame_aligned_videos/aria02_214-1.mp4", "frame_aligned_videos/cam01.mp4")
    assert take_video(tmp_path, take).path.name == "aria02_214-1.mp4"


def test_gaze_files_personalized_first_general_else_and_3d_only_reported(tmp_path):
    folder = tmp_path / "eye_gaze"
    assert take_gaze_files(tmp_path) == ([], None)
    write_lines(folder / "general_eye_gaze.csv", mps_lines([0.0], [0.0], [1.0]))
    assert take_gaze_files(tmp_path) == ([], folder / "general_eye_gaze.csv")
    write_lines(folder / "General_Eye_Gaze_2D.csv", gaze_2d_lines([1.0], [1.0]))
    assert take_gaze_files(tmp_path) == ([(folder / "General_Eye_Gaze_2D.csv", "general")], None)
    write_lines(folder / "personalized_eye_gaze_2d.csv", gaze_2d_lines([1.0], [1.0]))
    assert take_gaze_files(tmp_path)[0] == [
        (folder / "personalized_eye_gaze_2d.csv", "personalized"),
        (folder / "General_Eye_Gaze_2D.csv", "general"),
    ]
    assert take_gaze_files(tmp_path, "general")[0] == [(folder / "General_Eye_Gaze_2D.csv", "general")]


# --- the builder on partial downloads -----------------------------------------------------------------------------


def build(root, cache, **config):
    builder = gaze_builder("egoexo4d", root, cache_dir=cache, **{**CONFIG, **config})
    builder.download_and_prepare()
    return builder, builder.as_dataset()


def test_nothing_downloaded_is_one_error_naming_splits_json_and_the_counts(tmp_path):
    takes = [FixtureTake("u1", "a_1", "train", downloaded=False), FixtureTake("u2", "b_2", "val", downloaded=False)]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    with pytest.raises(FileNotFoundError) as caught:
        build(root, tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message and str(root / "annotations" / "splits.json") in message
    assert "'not downloaded': 2" in message and str(root / "takes") in message


def test_every_take_dropped_is_one_error_with_the_reasons(tmp_path):
    takes = [FixtureTake("u1", "a_1", "train", frames=30, has_gaze=False)]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    with pytest.raises(FileNotFoundError, match=r"no take of .*splits\.json gave a clip .*1 no eye gaze"):
        build(root, tmp_path / "cache")


def test_a_split_without_a_clip_is_a_one_line_error_when_asked_for(tmp_path):
    root = make_egoexo4d_root(tmp_path / "root", [FixtureTake("u1", "a_1", "train", frames=30, gaze_2d=GAZE)])
    train = load_gaze_dataset("egoexo4d", data_dir=root, split="train", cache_dir=tmp_path / "c", **CONFIG)
    assert set(train["clip_id"]) == {"a_1_t0_t1"}
    with pytest.raises(ValueError) as caught:
        load_gaze_dataset("egoexo4d", data_dir=root, split="test", cache_dir=tmp_path / "c", **CONFIG)
    message = str(caught.value)
    assert "\n" not in message and "no split 'test' was built" in message and "['train']" in message


def test_only_the_448_part_and_no_relative_path(tmp_path):
    take = FixtureTake("u1", "a_1", "train", downscaled_frames=30, gaze_2d=GAZE)
    root = make_egoexo4d_root(tmp_path / "root", [take])
    entries = json.loads((root / "takes.json").read_text())
    entries[0]["frame_aligned_videos"]["aria01"]["rgb"]["relative_path"] = None
    write_json(root / "takes.json", entries)
    _, ds = build(root, tmp_path / "cache")
    assert {ex["video_path"] for ex in ds["train"]} == {
        str(root / "takes" / "a_1" / "frame_aligned_videos" / "downscaled" / "448" / "aria01_214-1.mp4")
    }


def test_a_root_dir_relative_to_the_takes_folder_is_found(tmp_path):
    root = make_egoexo4d_root(tmp_path / "root", [FixtureTake("u1", "a_1", "train", frames=30, gaze_2d=GAZE)])
    entries = json.loads((root / "takes.json").read_text())
    entries[0]["root_dir"] = "a_1"  # the form of early releases: relative to takes/
    write_json(root / "takes.json", entries)
    builder, ds = build(root, tmp_path / "cache")
    assert set(ds["train"]["clip_id"]) == {"a_1_t0_t1"} and not builder.skipped_takes


def test_unreadable_video_and_malformed_gaze_drop_their_take_naming_the_file(tmp_path):
    takes = [
        FixtureTake("u1", "good_1", "train", frames=30, gaze_2d=GAZE),
        FixtureTake("u2", "broken_video_2", "train", gaze_2d=GAZE),
        FixtureTake(
            "u3", "bad_gaze_3", "train", frames=30, gaze_2d={"general_eye_gaze_2d.csv": ["frame_num,u,v", "0,1,2"]}
        ),
        FixtureTake("u4", "empty_gaze_4", "train", frames=30, gaze_2d={"general_eye_gaze_2d.csv": []}),
    ]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    broken = root / "takes" / "broken_video_2" / "frame_aligned_videos" / "aria01_214-1.mp4"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"not an mp4 at all")
    (root / "takes" / "empty_gaze_4" / "eye_gaze" / "general_eye_gaze_2d.csv").write_text("")
    builder, ds = build(root, tmp_path / "cache")
    assert {ex["clip_id"] for ex in ds["train"]} == {"good_1_t0_t1"}
    log = builder.build_log
    assert dict(log.drop_counts) == {"video unreadable": 1, "gaze unreadable": 2}
    dropped = log.dropped_in("train")
    assert str(broken) in dropped["broken_video_2 (every clip)"]
    assert (
        "bad_gaze_3" in dropped["bad_gaze_3 (every clip)"] and "no column x or y" in dropped["bad_gaze_3 (every clip)"]
    )
    assert (
        "general_eye_gaze_2d.csv" in dropped["empty_gaze_4 (every clip)"]
        and "empty" in dropped["empty_gaze_4 (every clip)"]
    )


def test_a_gaze_file_of_only_empty_rows_drops_its_clips(tmp_path):
    gaze = {"general_eye_gaze_2d.csv": gaze_2d_lines([None] * 10, [None] * 10)}
    takes = [
        FixtureTake("u1", "good_1", "train", frames=30, gaze_2d=GAZE),
        FixtureTake("u2", "blank_2", "train", frames=30, gaze_2d=gaze),
    ]
    builder, ds = build(make_egoexo4d_root(tmp_path / "root", takes), tmp_path / "cache")
    assert {ex["clip_id"] for ex in ds["train"]} == {"good_1_t0_t1"}
    assert dict(builder.build_log.drop_counts) == {"no gaze on its frames": 1}
    assert "general_eye_gaze_2d.csv" in builder.build_log.dropped_in("train")["blank_2_t0_t1"]


def test_a_missing_layout_part_is_an_error_naming_it(tmp_path):
    root = make_egoexo4d_root(tmp_path / "root", [FixtureTake("u1", "a_1", "train", frames=30, gaze_2d=GAZE)])
    (root / "annotations" / "splits.json").unlink()
    with pytest.raises(FileNotFoundError) as caught:
        build(root, tmp_path / "cache")
    first_line = str(caught.value).splitlines()[0]
    assert first_line == f"Ego-Exo4D gaze: splits.json not found: {root / 'annotations' / 'splits.json'}"
    write_lines(root / "annotations" / "splits.json", ["{not json"])
    with pytest.raises(ValueError, match=r"splits\.json is not valid JSON"):
        build(root, tmp_path / "cache2")


def test_an_unusable_personalized_file_falls_back_to_the_general_one(tmp_path):
    general = gaze_2d_lines([300.0] * 10, [700.0] * 10)
    takes = [
        FixtureTake(
            "u1",
            "blank_personal_1",
            "train",
            frames=30,
            gaze_2d={
                "personalized_eye_gaze_2d.csv": gaze_2d_lines([None] * 10, [None] * 10),
                "general_eye_gaze_2d.csv": general,
            },
        ),
        FixtureTake(
            "u2",
            "broken_personal_2",
            "train",
            frames=30,
            gaze_2d={"personalized_eye_gaze_2d.csv": ["frame_num,u,v", "0,1,2"], "general_eye_gaze_2d.csv": general},
        ),
        FixtureTake(
            "u3",
            "both_broken_3",
            "train",
            frames=30,
            gaze_2d={"personalized_eye_gaze_2d.csv": ["frame_num,u"], "general_eye_gaze_2d.csv": ["frame_num,v"]},
        ),
    ]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    builder, ds = build(root, tmp_path / "cache")
    for take in ("blank_personal_1", "broken_personal_2"):
        example = next(ex for ex in ds["train"].with_format("numpy") if ex["clip_id"] == f"{take}_t0_t1")
        assert example["gaze"][0] == pytest.approx([300.5 / 1408, 700.5 / 1408])  # the general file's
        report = builder.build_log.reports[str(root / "takes" / take / "eye_gaze" / "general_eye_gaze_2d.csv")]
        assert any("passed over personalized_eye_gaze_2d.csv" in note for note in report.notes)
        assert "general gaze on the full video" in report.notes
    dropped = builder.build_log.dropped_in("train")
    assert list(dropped) == ["both_broken_3 (every clip)"]
    assert (
        "personalized_eye_gaze_2d.csv: the 2D eye-gaze CSV has no column x or y"
        in dropped["both_broken_3 (every clip)"]
    )


def test_a_damaged_448_copy_gives_way_to_the_full_video(tmp_path):
    takes = [
        FixtureTake("u1", "cut_copy_1", "train", frames=30, downscaled_frames=30, gaze_2d=GAZE),
        FixtureTake("u2", "cut_copy_only_2", "train", downscaled_frames=30, gaze_2d=GAZE),
        FixtureTake("u3", "good_3", "train", frames=30, gaze_2d=GAZE),
    ]
    root = make_egoexo4d_root(tmp_path / "root", takes)
    for name in ("cut_copy_1", "cut_copy_only_2"):
        copy = root / "takes" / name / "frame_aligned_videos" / "downscaled" / "448" / "aria01_214-1.mp4"
        copy.write_bytes(copy.read_bytes()[:200])  # an interrupted download
    builder, ds = build(root, tmp_path / "cache")
    paths = {ex["clip_id"]: ex["video_path"] for ex in ds["train"]}
    full = root / "takes" / "cut_copy_1" / "frame_aligned_videos" / "aria01_214-1.mp4"
    assert paths["cut_copy_1_t0_t1"] == str(full) and "cut_copy_only_2_t0_t1" not in paths
    assert dict(builder.build_log.drop_counts) == {"video unreadable": 1}
    assert "cut_copy_only_2" in builder.build_log.dropped_in("train")["cut_copy_only_2 (every clip)"]
    with pytest.raises(FileNotFoundError, match=r"2 video unreadable"):  # asked for the copy only: no fallback
        build(root, tmp_path / "cache2", video="downscaled")
