"""The synthetic generators give, for the same seeds, exactly the data recorded before the grounding-task families were
made to reuse ``data/synthetic``'s scene and gaze code (tests/fixtures/synthetic_families.npz, written by
tests/fixtures/record_synthetic_families.py on 7087f05): the figures of docs/results.md and any held-out family rest
on these clips, so they must not move by one bit."""

from pathlib import Path

import numpy as np
import pytest

from tests.script_loading import load_script

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def recomputed() -> dict[str, np.ndarray]:
    return load_script(FIXTURES / "record_synthetic_families.py", "record_synthetic_families").record()


@pytest.fixture(scope="module")
def recorded() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "synthetic_families.npz") as archive:
        return {key: archive[key] for key in archive.files}


def test_every_recorded_array_is_recomputed_bit_for_bit(recomputed, recorded):
    assert sorted(recomputed) == sorted(recorded)
    changed = [
        key
        for key, expected in recorded.items()
        if recomputed[key].dtype != expected.dtype or not np.array_equal(recomputed[key], expected)
    ]
    assert not changed, f"the synthetic generators changed: {changed}"


def test_the_fixture_covers_every_family_and_both_generators(recorded):
    from transformers_gazeflow.data.synthetic_tasks import TASK_NAMES

    families = {key.split("/")[0] for key in recorded}
    assert set(TASK_NAMES) <= families and {"fixation_saccade", "synthetic_gaze"} <= families
    assert set(np.unique(recorded["colour_cue_occluded/default/gaze_type"])) == {1, 2, 3}  # saccades and blinks
