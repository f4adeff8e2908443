"""The task-token probe (analysis.probing): logistic regression, weight-decay selection, the table's rows."""

import json

import numpy as np
import pytest

from transformers_gazeflow.analysis.probing import (
    TaskBankSet,
    fit_linear_probe,
    most_frequent_classes,
    probe_head,
    probe_table,
    probe_table_markdown,
    select_weight_decay,
    topk_correct,
)


def bank(rng, labels, dim=6, queries=2, separable_in=("p", "q"), noise=0.3):
    """Clips whose p (and/or q) is the label's class centre plus noise: linearly separable where asked."""
    labels = np.asarray(labels)
    centres = rng.normal(size=(labels.max() + 1, dim)) * 3
    p = rng.normal(size=(len(labels), dim)) * noise + (centres[labels] if "p" in separable_in else 0)
    q = rng.normal(size=(len(labels), queries, dim)) * noise
    if "q" in separable_in:
        q[:, 0] += centres[labels]
    return p, q


def make_set(rng, labels, **kwargs):
    p, q = bank(rng, labels, **kwargs)
    return TaskBankSet(
        [f"clip{i}" for i in range(len(labels))], p, q, {"action": np.asarray(labels), "verb": np.full(len(labels), -1)}
    )


def split_sets(seed=0, classes=6, per_class=(30, 10, 40), **kwargs):
    rng = np.random.default_rng(seed)
    centre_rng_state = rng.integers(1 << 30)
    sets = []
    for n in per_class:
        labels = np.repeat(np.arange(classes), n)
        sets.append(make_set(np.random.default_rng([centre_rng_state, n]), labels, **kwargs))
    return sets


def test_separable_labels_reach_100_percent_and_shuffled_labels_stay_at_chance():
    # one set of class centres for all splits (same seed for the centres), noise per split
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(6, 8)) * 3

    def clips(n_per_class, seed):
        r = np.random.default_rng(seed)
        labels = np.repeat(np.arange(6), n_per_class)
        return centres[labels] + 0.3 * r.normal(size=(len(labels), 8)), labels

    (xtr, ytr), (xva, yva), (xte, yte) = clips(30, 1), clips(10, 2), clips(100, 4)
    probe, tried = select_weight_decay(xtr, ytr, xva, yva, 6)
    assert topk_correct(probe.scores(xte), yte, 1).mean() == 1.0
    assert set(tried) == {1e-4, 1e-3, 1e-2, 1e-1, 1.0}

    shuffled = np.random.default_rng(5).permutation(ytr)
    probe, _ = select_weight_decay(xtr, shuffled, xva, np.random.default_rng(6).permutation(yva), 6)
    accuracy = topk_correct(probe.scores(xte), yte, 1).mean()
    assert abs(accuracy - 1 / 6) < 0.1, accuracy  # 600 test clips: chance is 1/6 +- 0.015 (1 sd)


def test_fit_is_deterministic_and_weight_decay_shrinks_the_weights():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 5)), np.arange(40) % 3
    a, b = fit_linear_probe(x, y, 3, 1e-2), fit_linear_probe(x, y, 3, 1e-2)
    assert np.array_equal(a.scores(x), b.scores(x))
    strong = fit_linear_probe(x, y, 3, 10.0)
    assert strong.weight.norm() < 0.1 * a.weight.norm()


def test_topk_correct_by_hand():
    scores = np.array([[0.1, 0.9, 0.0], [0.5, 0.2, 0.3], [0.2, 0.2, 0.6]])
    labels = np.array([1, 2, 0])
    assert topk_correct(scores, labels, 1).tolist() == [True, False, False]
    assert topk_correct(scores, labels, 2).tolist() == [True, True, True]  # row 3: tie 0.2/0.2 -> class 0 first


def test_chance_ranking_is_by_training_frequency():
    assert most_frequent_classes(np.array([2, 2, 0, 1, 1, 2]), 4).tolist() == [2, 1, 0, 3]


def test_union_row_counts_a_clip_when_either_probe_is_right():
    # p carries the label for classes 0-2 only, q for classes 3-5 only: each alone is right on half the clips,
    # the union on nearly all
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 8)) * 4

    def clips(n, seed):
        r = np.random.default_rng(seed)
        labels = np.repeat(np.arange(6), n)
        p = r.normal(size=(len(labels), 8)) * 0.3
        q = r.normal(size=(len(labels), 1, 8)) * 0.3
        low = labels < 3
        p[low] += centres[labels[low]]
        q[~low, 0] += centres[labels[~low]]
        return TaskBankSet([str(i) for i in range(len(labels))], p, q, {"action": labels})

    result = probe_head(clips(30, 1), clips(10, 2), clips(50, 3), "action")
    rows = result["rows"]
    assert 0.4 < rows["p"]["top1"] < 0.75 and 0.4 < rows["q"]["top1"] < 0.75
    assert rows["union"]["top1"] > 0.95
    assert rows["union"]["top1"] >= max(rows["p"]["top1"], rows["q"]["top1"])
    assert rows["pq"]["top1"] > 0.95  # one probe on both sees everything
    assert rows["chance"]["top1"] == pytest.approx(1 / 6)
    assert result["num_classes"] == 6 and result["clips"] == {"train": 180, "validation": 60, "test": 300}


def test_absent_labels_are_skipped_per_head_and_small_heads_have_no_top5():
    train, val, test = split_sets(classes=4)
    for s in (train, val, test):
        s.labels["noun"] = s.labels["action"].copy()
        s.labels["noun"][::2] = -1  # half the clips have no noun: they are left out of the noun head only
    table = probe_table(train, val, test)
    assert table["heads"]["verb"] is None
    assert table["heads"]["noun"]["clips"]["test"] == len(test.clip_ids) // 2
    assert table["heads"]["action"]["clips"]["test"] == len(test.clip_ids)
    assert table["heads"]["action"]["rows"]["p"]["top5"] is None  # 4 classes: top-5 is always right
    markdown = probe_table_markdown(table)
    assert "| Probe input | Action (4) T1 | Action (4) T5 | Verb (no labels) T1" in markdown
    assert "| p ∪ q_1..M |" in markdown and "| chance (most frequent train classes) |" in markdown
    json.dumps(table)  # the table is JSON as it is


def test_a_model_without_queries_has_only_the_p_row():
    train, val, test = (
        TaskBankSet(s.clip_ids, s.global_tokens, s.query_tokens[:, :0], s.labels) for s in split_sets(classes=3)
    )
    rows = probe_head(train, val, test, "action")["rows"]
    assert set(rows) == {"p", "chance"}


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"global_tokens must be \[clips=2, d\]"):
        TaskBankSet(["a", "b"], np.zeros((3, 4)), np.zeros((2, 1, 4)))
    with pytest.raises(ValueError, match="labels must be class ids in"):
        fit_linear_probe(np.zeros((3, 2)), np.array([0, 1, 5]), 3, 0.0)
    with pytest.raises(ValueError, match="non-finite"):
        fit_linear_probe(np.array([[np.nan, 0.0]]), np.array([0]), 1, 0.0)
    with pytest.raises(ValueError, match="heads must be among"):
        probe_table(*split_sets(classes=2), heads=("task",))
