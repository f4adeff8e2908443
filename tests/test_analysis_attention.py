"""Self-attention head roles (analysis.attention) on hand-made attention matrices."""

import json

import numpy as np
import pytest

from transformers_gazeflow.analysis.attention import (
    HeadRoles,
    RoleRule,
    SelfAttentionPatterns,
    classify_role,
    curve_summary,
    offset_curve,
    offsets,
    real_frames_pattern,
    relative_pattern,
    role_rule_from_mapping,
    roles_from_clip_weights,
)

G = 12


def look_back(n=G):
    """Each query spreads its attention evenly over strictly earlier frames (frame 0, which has none, on itself)."""
    a = np.zeros((n, n))
    a[0, 0] = 1
    for i in range(1, n):
        a[i, :i] = 1 / i
    return a


def look_ahead(n=G):
    return look_back(n)[::-1, ::-1].copy()  # reversing time swaps past and future


def split(n=G, gap=3):
    a = np.zeros((n, n))
    for i in range(n):
        sides = [j for j in (i - gap, i + gap) if 0 <= j < n]
        a[i, sides] = 1 / len(sides)
    return a


def previous_frame(n=G):
    a = np.zeros((n, n))
    a[0, 0] = 1
    a[np.arange(1, n), np.arange(n - 1)] = 1
    return a


@pytest.mark.parametrize(
    "pattern, role",
    [
        (look_back(), "look-back"),
        (look_ahead(), "look-ahead"),
        (split(), "split"),
        (np.eye(G), "local"),
        (np.full((G, G), 1 / G), "diffuse"),
        (previous_frame(), "look-back"),
        (previous_frame()[::-1, ::-1], "look-ahead"),  # the next frame
    ],
)
def test_hand_made_heads_get_their_role(pattern, role):
    assert classify_role(offset_curve(pattern)) == role


def test_offset_curve_is_the_mean_along_each_diagonal():
    a = np.arange(9.0).reshape(3, 3)  # [[0,1,2],[3,4,5],[6,7,8]]
    assert offsets(3).tolist() == [-2, -1, 0, 1, 2]
    # offset -2: a[2,0]=6; -1: a[1,0], a[2,1] = 3, 7; 0: 0, 4, 8; +1: 1, 5; +2: 2
    assert offset_curve(a).tolist() == [6.0, 5.0, 4.0, 3.0, 2.0]
    summary = curve_summary(offset_curve(look_back()))
    assert summary["future"] == 0.0 and summary["past"] > 0.9 and summary["peak_offset"] < 0


def test_split_needs_a_valley_at_the_current_frame():
    # mass on both sides but the current frame is the largest: no inverted M
    a = 0.3 * split() + 0.7 * np.eye(G)
    assert classify_role(offset_curve(a)) == "local"
    assert classify_role(offset_curve(0.9 * split() + 0.1 * np.eye(G))) == "split"


def test_resizing_to_the_common_grid():
    assert np.allclose(relative_pattern(np.eye(24), 12), np.eye(12))  # 2x2 blocks of the diagonal
    upsampled = relative_pattern(look_back(6), 12)
    assert np.allclose(upsampled.sum(axis=1), 1.0)
    assert classify_role(offset_curve(upsampled)) == "look-back"
    assert np.array_equal(relative_pattern(look_back(), G), look_back())


def test_padded_frames_are_dropped_and_rows_renormalised():
    weights = np.full((8, 8), 1 / 8)
    real = real_frames_pattern(weights, 5)
    assert real.shape == (5, 5) and np.allclose(real, 0.2)
    with pytest.raises(ValueError, match=r"num_frames must be in \[1, 8\]"):
        real_frames_pattern(weights, 9)


def test_patterns_average_over_clips_and_samples():
    clip_a = np.stack([np.stack([look_back(), np.eye(G)])])[None]  # [L=1, K=1, H=2, G, G]
    clip_b = np.stack([np.stack([look_back(), look_ahead()])])[None]
    patterns = SelfAttentionPatterns(G)
    patterns.add(clip_a[:, 0], G)
    patterns.add(np.repeat(clip_b, 3, axis=1), G)  # three samples: averaged first
    mean = patterns.mean()
    assert patterns.num_clips == 2
    assert np.allclose(mean[0, 0], look_back()) and np.allclose(mean[0, 1], 0.5 * (np.eye(G) + look_ahead()))
    with pytest.raises(ValueError, match="same layers and heads"):
        patterns.add(np.zeros((2, 2, G, G)) + 1 / G, G)


def test_roles_table_and_json():
    weights = np.stack([np.stack([look_back(), look_ahead(), split(), np.eye(G)])])  # one layer, four heads
    roles = roles_from_clip_weights([(weights, G)], grid=G)
    assert roles.roles == [["look-back", "look-ahead", "split", "local"]]
    assert roles.counts() == {"look-back": 1, "look-ahead": 1, "split": 1, "local": 1, "diffuse": 0}
    data = json.loads(json.dumps(roles.to_json()))
    assert data["heads"][2]["role"] == "split" and len(data["heads"][0]["offset_curve"]) == 2 * G - 1
    markdown = roles.markdown()
    assert "| 0 | look-back | look-ahead | split | local |" in markdown
    assert "Roles: look-back 1, look-ahead 1, split 1, local 1, diffuse 0 (of 4 heads, 1 clips)." in markdown


def test_rule_settings_are_checked():
    assert role_rule_from_mapping({"local_radius": 2.0}).local_radius == 2
    with pytest.raises(ValueError, match="unknown role-rule settings"):
        role_rule_from_mapping({"radius": 2})
    with pytest.raises(ValueError, match="dominance must be >= 1"):
        RoleRule(dominance=0.5)
    with pytest.raises(ValueError, match="positive sum"):
        classify_role(np.zeros(2 * G - 1))
    with pytest.raises(ValueError, match=r"patterns must be \[layers, heads, G, G\]"):
        HeadRoles.from_patterns(np.eye(G))
