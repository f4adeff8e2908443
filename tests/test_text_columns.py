"""Whole-column CSV text (outputs.text_columns) against Python's own formatting and the csv module, and gaze.csv
with its readouts against a hand-written file and against the csv module writing each row's documented formats."""

import csv
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformers_gazeflow.gaze.events import Fixation, GazeEvents, Saccade
from transformers_gazeflow.gaze.regions import RegionCalibration
from transformers_gazeflow.models.gazeflow.geometry import FieldOfView
from transformers_gazeflow.outputs import text_columns as text
from transformers_gazeflow.outputs.readouts import ReadoutFiles
from transformers_gazeflow.outputs.writers import (
    CSV_COLUMNS,
    EVENT_NAMES,
    FIXATION_COLUMNS,
    READOUT_COLUMNS,
    SACCADE_COLUMNS,
    TRUTH_COLUMNS,
    GazeCsvWriter,
    write_events,
)


def python_text(values, decimals):
    return [f"{value:.{decimals}f}" for value in np.asarray(values, np.float64).tolist()]


@pytest.mark.parametrize("decimals", [0, 1, 2, 3, 6])
def test_fixed_point_is_pythons_text_on_ties_and_their_neighbours(decimals):
    rng = np.random.default_rng(decimals)
    halves = (rng.integers(-(10**7), 10**7, 4000) + 0.5) / 10.0**decimals  # the doubles nearest to a tie
    dyadic = np.arange(-3000, 3000) / 1024.0  # exact ties: 0.125 -> "0.12", 0.0078125 -> "0.007812"
    values = np.concatenate(
        [halves, np.nextafter(halves, np.inf), np.nextafter(halves, -np.inf), dyadic, rng.normal(0, 500, 4000)]
    )
    assert text.fixed_point(values, decimals).cells() == python_text(values, decimals)


def test_fixed_point_keeps_the_sign_of_a_negative_that_rounds_to_zero_and_leaves_odd_values_to_python():
    values = [-0.0, -1e-9, 0.0, -0.0004, 0.0005, 0.0015, 1e300, float("nan"), float("-inf")]
    assert text.fixed_point(values, 3).cells() == python_text(values, 3)
    assert text.fixed_point([-0.0, -1e-9], 3).cells() == ["-0.000", "-0.000"]
    with pytest.raises(ValueError, match="decimals"):
        text.fixed_point([1.0], 16)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), min_size=1, max_size=40),
    st.sampled_from([0, 2, 3, 6]),
)
def test_fixed_point_matches_python_on_any_double(values, decimals):
    assert text.fixed_point(values, decimals).cells() == python_text(values, decimals)


@pytest.mark.parametrize("decimals", [0, 2, 3, 6])
def test_an_empty_column_has_no_cells(decimals):
    column = text.fixed_point(np.zeros(0), decimals)
    assert column.cells() == [] and text.csv_lines([column, text.integers(np.zeros(0))]) == b""


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=30))
def test_integers_are_str(values):
    assert text.integers(np.array(values)).cells() == [str(value) for value in values]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.text(max_size=6), min_size=3, max_size=3), min_size=1, max_size=8))
def test_csv_lines_are_what_the_csv_module_writes(rows):
    expected = io.StringIO(newline="")
    csv.writer(expected).writerows(rows)
    columns = [text.from_strings([text.csv_cell(row[i]) for row in rows]) for i in range(3)]
    if any(row == ["", "", ""] for row in rows):  # a row of empty cells is the one the csv module writes otherwise
        return
    assert text.csv_lines(columns).decode("utf-8") == expected.getvalue()


def test_choices_where_and_spread():
    names = text.choices(np.array([[1, 2], [0, 1]]), EVENT_NAMES)
    assert names.cells() == ["fixation", "saccade", "", "fixation"]
    mixed = text.where(np.array([True, False, True, False]), names, text.repeated("x", 4))
    assert mixed.cells() == ["fixation", "x", "", "x"]
    assert text.integers(np.array([7, -12])).spread(3).cells() == ["7", "", "", "-12", "", ""]
    with pytest.raises(ValueError, match="column 1 has 1 cells, expected 2"):
        text.csv_lines([text.blanks(2), text.blanks(1)])


def test_gaze_csv_is_the_hand_written_file(tmp_path):
    """Two samples, two frames from frame 3 at 4 fps on a 200x100 frame, a video name the csv module quotes."""
    samples = np.array([[[0.125, 0.5], [0.0078125, 1.0]], [[0.375, 0.25], [0.5, 0.0]]])
    with GazeCsvWriter(tmp_path / "gaze.csv", 'my "clip", 1', 200, 100, fps=4) as writer:
        writer.write(3, samples)
    assert (tmp_path / "gaze.csv").read_bytes() == (
        b"video_id,frame_idx,t_ms,x_norm,y_norm,x_px,y_px,sample_id\r\n"
        b'"my ""clip"", 1",3,750.000,0.250000,0.375000,50.00,37.50,-1\r\n'
        b'"my ""clip"", 1",3,750.000,0.125000,0.500000,25.00,50.00,0\r\n'
        b'"my ""clip"", 1",3,750.000,0.375000,0.250000,75.00,25.00,1\r\n'
        b'"my ""clip"", 1",4,1000.000,0.253906,0.500000,50.78,50.00,-1\r\n'
        b'"my ""clip"", 1",4,1000.000,0.007812,1.000000,1.56,100.00,0\r\n'
        b'"my ""clip"", 1",4,1000.000,0.500000,0.000000,100.00,0.00,1\r\n'
    )


def expected_rows(readout, video_id, width, height, fps, truth):
    """The rows of one FrameReadout as the documented formats give them, cell by cell (the module docstring)."""
    u, samples = readout.uncertainty, readout.trajectories.astype(np.float64)
    everything = np.concatenate([samples.mean(axis=0)[None], samples])
    for offset in range(readout.num_frames):
        frame = readout.first + offset
        gaze, codes = truth
        known = frame < len(codes)
        position = gaze[frame] if known else np.array([np.nan, np.nan])
        located = np.isfinite(position).all()
        truth_cells = [f"{position[0]:.6f}" if located else "", f"{position[1]:.6f}" if located else ""]
        truth_cells.append(str(int(codes[frame])) if known else "")
        for row in range(everything.shape[0]):
            x, y = everything[row, offset]
            cells = [video_id, frame, f"{frame * 1000.0 / fps:.3f}", f"{x:.6f}", f"{y:.6f}"]
            cells += [f"{x * width:.2f}", f"{y * height:.2f}", row - 1]
            cells += [f"{d:.3f}" for d in readout.degrees[row, offset]]
            cells.append(EVENT_NAMES.get(int(readout.labels[row, offset]), ""))
            if row == 0:
                cells += [f"{readout.p_saccade[offset]:.3f}"]
                cells += [f"{u.spread(q)[offset]:.2f}" for q in (0.5, 0.9)]
                cells += [f"{u.spread(q, 'deg')[offset]:.3f}" for q in (0.5, 0.9)]
                cells += [f"{u.region(0.9)[offset]:.2f}", f"{u.region(0.9, 'deg')[offset]:.3f}", int(u.modes[offset])]
            else:
                cells += [""] * 8
            yield cells + truth_cells


def test_gaze_csv_with_readouts_is_what_the_csv_module_writes_row_by_row(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    k, frames, width, height, fps = 6, 40, 320, 240, 24.0
    walk = np.cumsum(rng.normal(0, 0.02, (frames, 2)), 0) % 1.0
    samples = (walk[None] + rng.normal(0, 0.02, (k, frames, 2))).astype(np.float32)
    samples[:, 9] = 0.5  # the samples on one point: spreads of 0, degrees of -0.0
    truth = (rng.uniform(0, 1, (frames - 5, 2)), rng.integers(0, 5, frames - 5))
    truth[0][4] = np.nan
    files = {key: tmp_path / key for key in ("fixations", "saccades", "scanpaths")}
    calibration = RegionCalibration((0.5, 0.9), (1.25, 1.5), 1.0)
    written = []  # every FrameReadout the writer is given
    original = GazeCsvWriter.write
    monkeypatch.setattr(GazeCsvWriter, "write", lambda self, *a: written.append(a[2]) or original(self, *a))
    camera = FieldOfView().for_frame(width, height)
    with ReadoutFiles(
        tmp_path / "gaze.csv", files, "clip", width, height, fps, k, camera, None, calibration, *truth
    ) as readouts:
        for start in range(0, frames, 7):
            readouts.write(start, samples[:, start : start + 7])
        readouts.close()
    expected = io.StringIO(newline="")
    writer = csv.writer(expected)
    writer.writerow(CSV_COLUMNS + READOUT_COLUMNS + TRUTH_COLUMNS)
    for readout in written:
        writer.writerows(expected_rows(readout, "clip", width, height, fps, truth))
    assert sum(readout.num_frames for readout in written) == frames
    assert (tmp_path / "gaze.csv").read_bytes().decode("utf-8") == expected.getvalue()


def events_by_csv_module(events, video_id, width, height, fps):
    """``fixations.csv`` and ``saccades.csv`` as the csv module writes each event's documented formats."""
    ms, files = 1000.0 / fps, []
    for names, rows in ((FIXATION_COLUMNS, events.fixations), (SACCADE_COLUMNS, events.saccades)):
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(names)
        for e in rows:
            cells = [video_id, e.series - 1, e.start_frame, e.end_frame]
            cells += [f"{e.start_frame * ms:.3f}", f"{(e.end_frame - e.start_frame + 1) * ms:.3f}"]
            if isinstance(e, Fixation):
                (x, y), (dx, dy) = e.centroid_px, e.centroid_deg
                cells += [f"{x / width:.6f}", f"{y / height:.6f}", f"{x:.2f}", f"{y:.2f}", f"{dx:.3f}", f"{dy:.3f}"]
                cells += [f"{e.dispersion_px:.2f}", f"{e.dispersion_deg:.3f}"]
            else:
                cells += [f"{e.amplitude_px:.2f}", f"{e.amplitude_deg:.3f}", f"{e.peak_velocity_deg_s:.2f}"]
                cells += [f"{e.start_px[0] / width:.6f}", f"{e.start_px[1] / height:.6f}"]
                cells += [f"{e.end_px[0] / width:.6f}", f"{e.end_px[1] / height:.6f}"]
            writer.writerow(cells)
        files.append(buffer.getvalue().encode("utf-8"))
    return files


numbers = st.one_of(
    st.floats(-1e6, 1e6, allow_nan=False, width=64), st.sampled_from([0.0, -0.0, 0.125, -0.0005, 2.5, 1e-9])
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10**6), st.integers(0, 99), *[numbers] * 6), max_size=12),
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10**6), st.integers(0, 99), *[numbers] * 7), max_size=12),
    st.sampled_from(["video", "a,b", 'say "hi"', "vidéo"]),
    st.sampled_from([7.0, 24.0, 29.97, 30.0]),
)
def test_events_csvs_are_what_the_csv_module_writes(tmp_path_factory, fixations, saccades, video_id, fps):
    events = GazeEvents(
        [Fixation(s, a, a + n, (x, y), (u, v), abs(d), abs(e)) for s, a, n, x, y, u, v, d, e in fixations],
        [Saccade(s, a, a + n, (x, y), (u, v), abs(p), abs(q), abs(r)) for s, a, n, x, y, u, v, p, q, r in saccades],
    )
    folder = tmp_path_factory.mktemp("events")
    written = write_events(folder, events, video_id, 640, 480, fps)
    expected = events_by_csv_module(events, video_id, 640, 480, fps)
    assert [path.read_bytes() for path in written] == expected
