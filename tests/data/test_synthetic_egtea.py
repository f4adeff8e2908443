"""The EGTEA-layout writer, checked by parsing its own output minimally (the EGTEA builder is tested on it at merge)."""

import re
from collections import defaultdict

import numpy as np
import pytest

from transformers_gazeflow.data.synthetic import SyntheticGazeSettings, write_egtea_layout
from transformers_gazeflow.data.video import probe_video

SETTINGS = SyntheticGazeSettings(
    num_clips=5, min_frames=16, max_frames=40, width=64, height=48, seed=7, validation_fraction=0.2, test_fraction=0.2
)
EVENTS = {"Fixation": 1, "Saccade": 2}


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    root = tmp_path_factory.mktemp("egtea")
    return root, write_egtea_layout(root, SETTINGS, clips_per_session=3, session_kinds=("OP", "P"))


def _parse_begaze_format1(path):
    """Frame -> list of (px, py, event), checking the header and the 7-token rows positionally."""
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert all(line.startswith("##") for line in lines[:34]) and not lines[34].startswith("##")
    assert lines[9].startswith("## Number of Samples:")
    num_samples = int(lines[9].split()[4])
    samples = defaultdict(list)
    for line in lines[34:]:
        tokens = line.split()
        assert len(tokens) == 7, line
        samples[int(tokens[5])].append((float(tokens[3]), float(tokens[4]), tokens[6]))
    assert num_samples == len(lines) - 34
    assert max(samples) < 2 * num_samples  # the reference parser allocates 2 * N rows
    return samples


def test_files_and_names(layout):
    root, clips = layout
    assert len(clips) == 5 and sorted({c.session for c in clips}) == ["OP01-R01-Synthetic", "P02-R02-Synthetic"]
    for clip in clips:
        match = re.fullmatch(r"(\w+-\w+-\w+)-(\d+)-(\d+)-F(\d{6})-F(\d{6})", clip.name)
        assert match and match.group(1) == clip.session
        assert (int(match.group(4)), int(match.group(5))) == (clip.f_start, clip.f_end)
        assert clip.video_path == root / "cropped_clips" / clip.session / f"{clip.name}.mp4"
        info = probe_video(clip.video_path)
        assert info.num_frames == clip.f_end - clip.f_start + 1 == clip.clip.num_frames
        assert info.fps == 24.0 and (info.width, info.height) == (64, 48)
    assert sorted(p.name for p in (root / "gaze_data").iterdir()) == [
        "OP01-R01-Synthetic.txt",
        "P02-R02-Synthetic-GazeData.txt",
    ]


def test_split_and_index_files(layout):
    root, clips = layout
    seen = []
    for split in ("train", "test"):
        raw = (root / f"{split}_split1.txt").read_bytes()
        assert raw.endswith(b"\r\n") and raw.count(b"\r\n") == raw.count(b"\n")
        for line in raw.decode().splitlines():
            name, action, verb, noun = line.split()
            clip = next(c for c in clips if c.name == name)
            assert clip.split == split and int(action) == clip.clip.task + 1 >= 1
            assert (int(verb), int(noun)) == (clip.verb, clip.noun)
            seen.append(name)
    assert sorted(seen) == sorted(c.name for c in clips)
    assert {c.split for c in clips} == {"train", "test"}
    actions = (root / "action_idx.txt").read_text().splitlines()
    assert actions[0] == "take red disc 1" and len(actions) == SETTINGS.num_tasks
    name, ident = actions[2].rsplit(" ", 1)
    assert (name, ident) == ("stir blue triangle", "3")


def test_gaze_rows_read_back_to_the_clip_gaze(layout):
    root, clips = layout
    files = {"OP01-R01-Synthetic": "OP01-R01-Synthetic.txt", "P02-R02-Synthetic": "P02-R02-Synthetic-GazeData.txt"}
    parsed = {session: _parse_begaze_format1(root / "gaze_data" / name) for session, name in files.items()}
    counts = np.zeros(5, int)
    two_samples = 0
    for clip in clips:
        samples = parsed[clip.session]
        for k in range(clip.clip.num_frames):
            frame = clip.f_start - 1 + k  # the clip's local frame k reads session row F_start - 1 + k
            code = int(clip.expected_type[k])
            counts[code] += 1
            if code == 0:
                assert frame not in samples
                continue
            rows = samples[frame]
            two_samples += len(rows) == 2
            px = np.mean([r[0] for r in rows])
            py = np.mean([r[1] for r in rows])
            off = px < 0 or px > 1279 or py < 0 or py > 959
            events = {r[2] for r in rows}
            assert len(events) == 1
            event = events.pop()
            read_code = 3 if event == "Blink" else (4 if off else EVENTS[event])
            assert read_code == code, (clip.name, k)
            assert clip.expected_type_glc[k] == (3 if event == "Blink" else EVENTS[event])  # GLC drops code 4
            unit = np.array([min(max(px, 0), 1279) / 1280, min(max(py, 0), 959) / 960])
            assert np.allclose(unit, clip.expected_gaze[k], atol=1e-6)
            if code != 4:  # on the frame, the text holds the synthetic truth up to EGTEA's clamp to W - 1
                assert np.allclose(unit, clip.clip.gaze.gaze[k], atol=1 / 1280 + 1e-6)
    assert counts[1] > 0 and counts[2] > 0 and two_samples > 10
    assert counts[0] + counts[3] + counts[4] > 0  # some untracked, blink or off-frame frames


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="fps must be 24"):
        write_egtea_layout(tmp_path, SyntheticGazeSettings(num_clips=1, fps=30.0))
    with pytest.raises(ValueError, match="session_kinds"):
        write_egtea_layout(tmp_path, SETTINGS, session_kinds=("XP",))
