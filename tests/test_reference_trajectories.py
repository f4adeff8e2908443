"""Behaviour is preserved across refactors: the bundled model's trajectories from ``generate`` and the pipeline
equal the ones recorded before the model/engine refactor (tests/fixtures/reference_trajectories.npz, recorded by
tests/fixtures/record_reference_trajectories.py on e69f2d4) to 1e-6, for the same seeds, with window_mode="blend".
``pipeline_range`` was re-recorded once, when frame ranges started to use the whole video's window grid."""

from pathlib import Path

import numpy as np
import pytest

from tests.script_loading import load_script

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _recorder():
    return load_script(FIXTURES / "record_reference_trajectories.py", "record_reference_trajectories")


@pytest.fixture(scope="module")
def recomputed() -> dict[str, np.ndarray]:
    return _recorder().record()


@pytest.mark.parametrize(
    "key", ["generate_euler", "generate_heun", "generate_midpoint", "generate_short", "pipeline_full", "pipeline_range"]
)
def test_trajectories_equal_the_recorded_ones(recomputed, key):
    reference = np.load(FIXTURES / "reference_trajectories.npz")[key]
    assert recomputed[key].shape == reference.shape
    np.testing.assert_allclose(recomputed[key], reference, rtol=0, atol=1e-6)
