"""The array forms of the readouts against straightforward loops of their documented rules, frame by frame and
run by run: the mean-shift modes (``gaze.uncertainty``) and the fixations and saccades of labelled frames fed in
chunks (``gaze.events.EventRecorder``)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformers_gazeflow.data.gaze_types import BLINK_OR_OTHER, FIXATION, SACCADE, UNTRACKED
from transformers_gazeflow.gaze.events import EventRecorder, Fixation, LabelledFrames, Saccade
from transformers_gazeflow.gaze.uncertainty import _pairwise_rows_sum, count_modes, mean_shift, mode_bandwidth
from transformers_gazeflow.models.gazeflow.geometry import PinholeCamera

# --- modes ---------------------------------------------------------------------------------------------------------


def _frame_bandwidth(points: np.ndarray) -> float:
    """The median over the K points ``[K, 2]`` of the distance to their ``ceil(K / 5)``-th nearest neighbour."""
    k = len(points)
    if k == 1:
        return 0.0
    rank = min(k - 1, max(1, math.ceil(0.2 * k)))
    nearest = []
    for i in range(k):
        distances = sorted(math.sqrt(float(((points[i] - points[j]) ** 2).sum())) for j in range(k))
        nearest.append(distances[rank])
    return float(np.median(nearest))


def _frame_mean_shift(points: np.ndarray, h: float) -> np.ndarray:
    """``[K, 2]``: one frame's K points after Gaussian mean-shift over themselves at bandwidth ``h`` (``-0.5 d^2 /
    h^2`` in the exponent), at most 50 steps, stopping after the first step that moves no point by more than
    ``h / 100`` in x or y."""
    k = len(points)
    shifted = points.copy()
    for _ in range(50):
        moved = np.empty_like(shifted)
        for i in range(k):
            weights = np.exp(-0.5 * ((shifted[i] - points) ** 2).sum(-1) / h**2)
            total = weights[0] * points[0]
            for j in range(1, k):  # the weighted points added one after the other
                total = total + weights[j] * points[j]
            moved[i] = total / weights.sum()
        step = np.abs(moved - shifted).max()
        shifted = moved
        if not step > 0.01 * h:  # h / 100
            break
    return shifted


def _frame_modes(points: np.ndarray) -> int:
    """One frame's modes by the rule as written: every point climbs by Gaussian mean-shift over the K points
    (bandwidth :func:`_frame_bandwidth`, :func:`_frame_mean_shift`); points within ``h / 2`` of each other, directly
    or through others, form one mode; a mode counts with at least ``max(1, ceil(K / 10))`` points; at least one
    mode."""
    k = len(points)
    h = max(_frame_bandwidth(points), 1e-9)
    shifted = _frame_mean_shift(points, h)
    mode_of = list(range(k))  # union-find over the points within h / 2
    root = lambda i: i if mode_of[i] == i else root(mode_of[i])  # noqa: E731
    for i in range(k):
        for j in range(i + 1, k):
            if ((shifted[i] - shifted[j]) ** 2).sum() <= (0.5 * h) ** 2:
                mode_of[root(j)] = root(i)
    sizes = np.bincount([root(i) for i in range(k)], minlength=k)
    return max(1, int((sizes >= max(1, math.ceil(0.1 * k))).sum()))


@st.composite
def _sample_clouds(draw):
    """``[K, T, 2]`` pixels: a few clusters per frame at random spreads, with ties (rounded points), frames whose
    samples all coincide, and single samples."""
    k, frames = draw(st.integers(1, 24)), draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    clusters = draw(st.integers(1, 3))
    spread = draw(st.sampled_from([0.0, 1e-3, 1.0, 8.0]))
    apart = draw(st.sampled_from([1.0, 2.0, 3.0, 4.0, 6.0, 50.0]))  # clusters this many spreads apart, about
    centres = rng.uniform(100, 500, (1, frames, 2)) + rng.uniform(-apart, apart, (clusters, frames, 2)) * spread
    points = centres[rng.integers(0, clusters, k)] + rng.normal(0, spread, (k, frames, 2))
    if draw(st.booleans()):
        points = np.round(points)  # ties: equal distances, equal points
    if draw(st.booleans()):
        points[:, 0] = points[0, 0]  # every sample of the first frame on one point
    return points


@settings(max_examples=100, deadline=None)
@given(_sample_clouds())
def test_modes_and_bandwidth_match_the_rule_frame_by_frame(points):
    expected_bandwidth = [_frame_bandwidth(points[:, t]) for t in range(points.shape[1])]
    np.testing.assert_allclose(mode_bandwidth(points), expected_bandwidth, rtol=1e-12, atol=1e-12)
    assert count_modes(points).tolist() == [_frame_modes(points[:, t]) for t in range(points.shape[1])]


@settings(max_examples=60, deadline=None)
@given(_sample_clouds())
def test_mean_shift_ends_where_the_rule_does_bit_for_bit(points):
    bandwidth = np.maximum(mode_bandwidth(points), 1e-9)
    shifted = mean_shift(points, bandwidth)  # [2, T, K]
    for t in range(points.shape[1]):
        np.testing.assert_array_equal(shifted[:, t].T, _frame_mean_shift(points[:, t], bandwidth[t]))


def test_mean_shift_of_more_than_128_samples_matches_the_rule_bit_for_bit():
    rng = np.random.default_rng(3)  # two clouds 6 sigmas apart: the weights' sums split in halves past 128 terms
    points = rng.normal(200.0, 4.0, (131, 2, 2)) + np.array([24.0, 0.0]) * (np.arange(131) % 2)[:, None, None]
    bandwidth = mode_bandwidth(points)
    shifted = mean_shift(points, bandwidth)
    for t in range(2):
        np.testing.assert_array_equal(shifted[:, t].T, _frame_mean_shift(points[:, t], bandwidth[t]))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 300), st.sampled_from([1, 5, 960]), st.integers(0, 2**31 - 1))
def test_row_sums_add_as_a_contiguous_sum_does(terms, columns, seed):
    rows = np.exp(np.random.default_rng(seed).normal(0.0, 4.0, (terms, columns)))  # magnitudes far apart
    np.testing.assert_array_equal(_pairwise_rows_sum(rows), np.ascontiguousarray(rows.T).sum(-1))


def test_modes_reject_frames_without_a_position():
    points = np.zeros((4, 3, 2))
    points[1, 2, 0] = np.nan  # an untracked frame has no samples to cluster
    with pytest.raises(ValueError, match="points_px holds NaN"):
        count_modes(points)


# --- fixations and saccades ----------------------------------------------------------------------------------------

CAMERA = PinholeCamera.from_fov(640, 480, 70.0)


def _runs_by_loop(labels, velocity, points, tracked, breaks, offset):
    """The events of whole series, frame by frame: a run grows while the label stays and no frame breaks it; a
    fixation's centroid is the mean of its points, its dispersions the x range plus the y range (pixels, Fick
    degrees); a saccade goes from the frame before it (when tracked) to its last frame, peak the largest velocity."""
    fixations, saccades = [], []
    for series in range(labels.shape[0]):
        start = 0
        for t in range(1, labels.shape[1] + 1):
            if t < labels.shape[1] and labels[series, t] == labels[series, t - 1] and not breaks[series, t]:
                continue
            code, run = int(labels[series, start]), points[series, start:t]
            first, last = start + offset, t - 1 + offset
            if code == FIXATION:
                centre = run.mean(axis=0)
                angles = CAMERA.angles_deg(run)
                fixations.append(
                    Fixation(
                        series,
                        first,
                        last,
                        (float(centre[0]), float(centre[1])),
                        tuple(float(v) for v in CAMERA.angles_deg(centre)),
                        float(np.ptp(run[:, 0]) + np.ptp(run[:, 1])),
                        float(np.ptp(angles[:, 0]) + np.ptp(angles[:, 1])),
                    )
                )
            elif code == SACCADE:
                launch = points[series, start - 1] if start > 0 and tracked[start - 1] else run[0]
                dx, dy = (float(v) for v in run[-1] - launch)
                saccades.append(
                    Saccade(
                        series,
                        first,
                        last,
                        (float(launch[0]), float(launch[1])),
                        (float(run[-1, 0]), float(run[-1, 1])),
                        math.sqrt(dx * dx + dy * dy),  # not np.linalg.norm: its dot product may fuse, 1 ulp apart
                        float(CAMERA.angle_between_deg(launch, run[-1])),
                        max(0.0, float(velocity[series, start:t].max())),
                    )
                )
            start = t
    return fixations, saccades


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 5),
    st.integers(1, 60),
    st.integers(0, 2**31 - 1),
    st.sampled_from([0.0, 0.1, 0.5]),
    st.lists(st.integers(0, 60), max_size=5),
    st.booleans(),
)
def test_recorded_events_match_a_loop_over_frames(series, frames, seed, untracked_share, cuts, with_breaks):
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random((series, frames)) < 0.6, FIXATION, SACCADE)
    labels[:, rng.integers(0, frames, 3)] = labels[:, :1]  # some runs longer than one frame
    gaps = rng.random(frames) < untracked_share
    labels[:, gaps] = rng.choice([UNTRACKED, BLINK_OR_OTHER], int(gaps.sum()))
    tracked = ~gaps
    points = np.cumsum(rng.normal(0, 6, (series, frames, 2)), axis=1) + 300
    velocity = np.where(tracked, rng.uniform(0, 200, (series, frames)), 0.0)
    breaks = (rng.random((series, frames)) < 0.2) & (labels == FIXATION) if with_breaks else None
    recorder = EventRecorder(series, CAMERA, frame_offset=7)
    edges = sorted({0, frames, *(min(c, frames) for c in cuts)})
    for a, b in zip(edges[:-1], edges[1:]):  # the chunks as a stream hands them over
        part = None if breaks is None else breaks[:, a:b]
        recorder.add(LabelledFrames(a, labels[:, a:b], velocity[:, a:b], points[:, a:b], tracked[a:b], part))
    events = recorder.finish()
    no_breaks = np.zeros(labels.shape, bool) if breaks is None else breaks
    fixations, saccades = _runs_by_loop(labels, velocity, points, tracked, no_breaks, 7)
    assert events.fixations == fixations
    assert events.saccades == saccades
