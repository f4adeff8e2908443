"""The GPU-hours table of ``benchmarks/bench_train.py`` (``train_sweep``): 80 epochs of each dataset's training clips at
a rate, with the datasets whose count depends on the download (``--train-clips NAME=N``) beside EGTEA Gaze+, Ego4D."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import train_sweep  # noqa: E402


def test_gpu_hours_by_hand():
    hours = train_sweep.gpu_hours(8.0, {"Ego-Exo4D": 3600})
    assert hours == pytest.approx(
        {"EGTEA Gaze+": 8299 * 80 / 8 / 3600, "Ego4D": 15310 * 80 / 8 / 3600, "Ego-Exo4D": 10.0}
    )


def test_the_table_gains_a_column_per_named_dataset():
    plain = train_sweep.hours_table({}, None)
    assert (
        plain[0]
        == "| 80 epochs on one GPU at | clips / s | EGTEA Gaze+ (8,299 clips) GPU-h | Ego4D (15,310 clips) GPU-h |"
    )
    assert plain[2] == "| 60e8cbe probe, B4, model only (H100) | 7.50 | 24.6 | 45.4 |"
    table = train_sweep.hours_table({}, None, {"Ego-Exo4D": 27000})
    assert table[0].endswith("| Ego-Exo4D (27,000 clips) GPU-h |") and table[1].count("---:") == 4
    assert table[2] == "| 60e8cbe probe, B4, model only (H100) | 7.50 | 24.6 | 45.4 | 80.0 |"  # 27000 * 80 / 7.5 / 3600
    assert table[-1].endswith("| - | 288 | 480 | - |")  # the paper gives no Ego-Exo4D figure


@pytest.mark.parametrize("text", ["Ego-Exo4D", "Ego-Exo4D=", "=12", "Ego-Exo4D=0", "Ego-Exo4D=1.5", "Ego-Exo4D=-3"])
def test_train_clips_must_be_name_equals_a_positive_count(text):
    with pytest.raises(ValueError, match=r"--train-clips: expected NAME=N"):
        train_sweep.parse_train_clips(text)


def test_train_clips_parsed():
    assert train_sweep.parse_train_clips(" Ego-Exo4D = 1200") == ("Ego-Exo4D", 1200)
