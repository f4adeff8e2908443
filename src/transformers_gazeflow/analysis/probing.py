"""Linear probing of the task-token bank c_task = [p; q_1..q_M] (paper Section 4.3, Table probing).

A frozen GazeFlow gives each clip its bank (:func:`~transformers_gazeflow.analysis.capture.clip_task_banks`); here a
linear classifier per label head (``action``, ``verb``, ``noun`` of the unified schema, ``-1`` = absent) is trained
on one probe input and scored on held-out clips:

* probe inputs: ``q`` (the M learnable-query tokens q_1..q_M, concatenated), ``p`` (the global mean-pool token),
  ``pq`` (both, concatenated, one probe);
* the union row ``p ∪ q`` counts a clip correct when the ``p`` probe or the ``q`` probe is (the paper's ∪ row);
* a chance row: the most frequent training classes, whatever the input.

The classifier is multinomial logistic regression in torch (:func:`fit_linear_probe`): standardised features
(train mean/std), zero-initialised weights, full-batch L-BFGS in float64 on the mean cross-entropy plus
``weight_decay * ||W||^2``. The problem is convex and the initialisation fixed, so a fit is deterministic. The
weight decay is chosen on a validation split (:func:`select_weight_decay`: best validation top-1, ties to the larger
decay). Top-k is reported only where k is smaller than the number of classes (top-5 of 4 classes is always 100%).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..data.loading import NO_LABEL

LABEL_HEADS = ("action", "verb", "noun")
PROBE_INPUTS = ("q", "p", "pq")
ROW_LABELS = {
    "q": "q_1..M alone",
    "p": "p alone",
    "pq": "[p; q_1..M] (one probe)",
    "union": "p ∪ q_1..M",
    "encoder": "control: the encoder's tokens, mean-pooled",
    "chance": "chance (most frequent train classes)",
}
#: ``encoder``: an optional control row (a probe on the frozen video encoder's own pooled tokens, added by the caller)
ROW_ORDER = ("q", "p", "pq", "union", "encoder", "chance")
DEFAULT_WEIGHT_DECAYS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
TOP_K = (1, 5)


@dataclass(frozen=True)
class TaskBankSet:
    """The task-token banks of a set of clips: ``global_tokens`` p ``[C, d]``, ``query_tokens`` q ``[C, M, d]``
    (``M = 0`` for a model without learnable queries) and per-head labels ``[C]`` (``-1`` = absent)."""

    clip_ids: list[str]
    global_tokens: np.ndarray
    query_tokens: np.ndarray
    labels: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        count = len(self.clip_ids)
        if self.global_tokens.ndim != 2 or self.global_tokens.shape[0] != count:
            raise ValueError(f"global_tokens must be [clips={count}, d], got {self.global_tokens.shape}")
        if self.query_tokens.ndim != 3 or self.query_tokens.shape[0] != count:
            raise ValueError(f"query_tokens must be [clips={count}, M, d], got {self.query_tokens.shape}")
        for head, labels in self.labels.items():
            if np.shape(labels) != (count,):
                raise ValueError(f"labels[{head!r}] must be [clips={count}], got {np.shape(labels)}")

    @property
    def num_queries(self) -> int:
        return int(self.query_tokens.shape[1])

    def features(self, probe_input: str) -> np.ndarray:
        """``[C, D]`` features of one probe input: ``p`` (d), ``q`` (M * d), ``pq`` ((M + 1) * d)."""
        queries = self.query_tokens.reshape(len(self.clip_ids), -1)
        if probe_input == "p":
            return self.global_tokens
        if probe_input == "q":
            return queries
        if probe_input == "pq":
            return np.concatenate([self.global_tokens, queries], axis=1)
        raise ValueError(f"probe_input must be one of {PROBE_INPUTS}, got {probe_input!r}")

    def subset(self, indices: Sequence[int] | np.ndarray) -> TaskBankSet:
        indices = np.asarray(indices, dtype=np.int64)
        return TaskBankSet(
            [self.clip_ids[i] for i in indices],
            self.global_tokens[indices],
            self.query_tokens[indices],
            {k: v[indices] for k, v in self.labels.items()},
        )


@dataclass
class LinearProbe:
    """A fitted multinomial logistic regression: ``scores(x) = ((x - mean) / std) @ weight + bias``."""

    weight: torch.Tensor
    bias: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    weight_decay: float

    def scores(self, features: np.ndarray) -> np.ndarray:
        x = (torch.as_tensor(np.asarray(features), dtype=torch.float64) - self.mean) / self.std
        return (x @ self.weight + self.bias).numpy()


def _check_xy(features: np.ndarray, labels: np.ndarray, num_classes: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    features, labels = np.asarray(features, np.float64), np.asarray(labels)
    if features.ndim != 2 or features.shape[0] != labels.shape[0] or labels.ndim != 1:
        raise ValueError(f"{name}: features must be [n, D] and labels [n], got {features.shape} and {labels.shape}")
    if features.shape[0] == 0 or features.shape[1] == 0:
        raise ValueError(f"{name}: needs at least one clip and one feature, got features {features.shape}")
    if not np.isfinite(features).all():
        raise ValueError(f"{name}: features hold non-finite values")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise ValueError(f"{name}: labels must be class ids in [0, {num_classes}), got {labels.min()}..{labels.max()}")
    return features, labels.astype(np.int64)


def fit_linear_probe(
    features: np.ndarray, labels: np.ndarray, num_classes: int, weight_decay: float, max_iter: int = 200
) -> LinearProbe:
    """Multinomial logistic regression on ``features [n, D]`` -> ``labels [n]`` (see the module docstring)."""
    if weight_decay < 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
    features, labels = _check_xy(features, labels, num_classes, "fit_linear_probe")
    x = torch.from_numpy(features)
    mean, std = x.mean(dim=0), x.std(dim=0, unbiased=False).clamp_min(1e-6)
    x = (x - mean) / std
    y = torch.from_numpy(labels)
    weight = torch.zeros(x.shape[1], num_classes, dtype=torch.float64, requires_grad=True)
    bias = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS(
        [weight, bias],
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ weight + bias, y) + weight_decay * weight.pow(2).sum()
        loss.backward()
        return loss

    optimizer.step(closure)
    return LinearProbe(weight.detach(), bias.detach(), mean, std, float(weight_decay))


def topk_correct(scores: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """bool ``[n]``: the label is among the ``k`` highest scores (ties broken by class id, lowest first)."""
    scores = np.asarray(scores)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return (order == np.asarray(labels)[:, None]).any(axis=1)


def select_weight_decay(
    train_x: np.ndarray,
    train_y: np.ndarray,
    val_x: np.ndarray,
    val_y: np.ndarray,
    num_classes: int,
    weight_decays: Sequence[float] = DEFAULT_WEIGHT_DECAYS,
    max_iter: int = 200,
) -> tuple[LinearProbe, dict[float, float]]:
    """Fit one probe per weight decay on the training clips; keep the best validation top-1 (ties: the larger
    decay). Returns the kept probe and every decay's validation top-1."""
    if not weight_decays:
        raise ValueError("weight_decays must hold at least one value")
    _check_xy(val_x, val_y, num_classes, "select_weight_decay (validation)")
    best: LinearProbe | None = None
    accuracies: dict[float, float] = {}
    for decay in sorted(float(d) for d in weight_decays):
        probe = fit_linear_probe(train_x, train_y, num_classes, decay, max_iter)
        accuracies[decay] = float(topk_correct(probe.scores(val_x), val_y, 1).mean())
        if best is None or accuracies[decay] >= accuracies[best.weight_decay]:
            best = probe
    assert best is not None
    return best, accuracies


def most_frequent_classes(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Class ids by decreasing training frequency (ties: lower id first) - the chance row's ranking."""
    counts = np.bincount(np.asarray(labels, np.int64), minlength=num_classes)
    return np.argsort(-counts, kind="stable")


def _rates(correct: Mapping[int, np.ndarray], num_classes: int) -> dict[str, float | None]:
    return {f"top{k}": (float(c.mean()) if k < num_classes else None) for k, c in correct.items()}


def probe_head(
    train: TaskBankSet,
    validation: TaskBankSet,
    test: TaskBankSet,
    head: str,
    weight_decays: Sequence[float] = DEFAULT_WEIGHT_DECAYS,
    top_k: Sequence[int] = TOP_K,
    max_iter: int = 200,
) -> dict | None:
    """Every row of one label head, or None when a split has no clip labelled for it.

    Returns ``{"num_classes", "clips": {split: n}, "rows": {row: {"top1", "top5", ...}}}``; the probe rows also
    carry the chosen ``weight_decay`` and the ``validation_top1`` of each decay tried.
    """
    splits = {"train": train, "validation": validation, "test": test}
    kept = {
        name: np.flatnonzero(s.labels.get(head, np.full(len(s.clip_ids), NO_LABEL)) != NO_LABEL)
        for name, s in splits.items()
    }
    if any(len(k) == 0 for k in kept.values()):
        return None
    sets = {name: splits[name].subset(kept[name]) for name in splits}
    num_classes = int(max(s.labels[head].max() for s in sets.values())) + 1
    y = {name: s.labels[head].astype(np.int64) for name, s in sets.items()}
    rows: dict[str, dict] = {}
    correct: dict[str, dict[int, np.ndarray]] = {}
    for probe_input in PROBE_INPUTS:
        if probe_input != "p" and train.num_queries == 0:
            continue  # a model without learnable queries: q (and so [p; q] = p) has no row
        probe, tried = select_weight_decay(
            sets["train"].features(probe_input),
            y["train"],
            sets["validation"].features(probe_input),
            y["validation"],
            num_classes,
            weight_decays,
            max_iter,
        )
        scores = probe.scores(sets["test"].features(probe_input))
        correct[probe_input] = {k: topk_correct(scores, y["test"], k) for k in top_k}
        rows[probe_input] = {
            **_rates(correct[probe_input], num_classes),
            "weight_decay": probe.weight_decay,
            "validation_top1": {str(d): a for d, a in tried.items()},
        }
    if "p" in correct and "q" in correct:
        rows["union"] = _rates({k: correct["p"][k] | correct["q"][k] for k in top_k}, num_classes)
    ranking = most_frequent_classes(y["train"], num_classes)
    rows["chance"] = _rates({k: np.isin(y["test"], ranking[:k]) for k in top_k}, num_classes)
    return {"num_classes": num_classes, "clips": {name: len(k) for name, k in kept.items()}, "rows": rows}


def probe_table(
    train: TaskBankSet,
    validation: TaskBankSet,
    test: TaskBankSet,
    heads: Sequence[str] = LABEL_HEADS,
    weight_decays: Sequence[float] = DEFAULT_WEIGHT_DECAYS,
    top_k: Sequence[int] = TOP_K,
    max_iter: int = 200,
) -> dict:
    """:func:`probe_head` for every head (``None`` for heads without labels): the JSON of the probe table."""
    unknown = [h for h in heads if h not in LABEL_HEADS]
    if unknown:
        raise ValueError(f"heads must be among {LABEL_HEADS}, got {unknown}")
    return {
        "top_k": list(top_k),
        "num_queries": train.num_queries,
        "heads": {head: probe_head(train, validation, test, head, weight_decays, top_k, max_iter) for head in heads},
    }


def probe_table_markdown(table: Mapping) -> str:
    """The paper's layout: one row per probe input, T1/T5 per head (percent), ``-`` where not measurable."""
    heads = table["heads"]
    top_k = table["top_k"]
    header = ["Probe input"]
    for head, result in heads.items():
        classes = f" ({result['num_classes']})" if result else " (no labels)"
        header += [f"{head.capitalize()}{classes} T{k}" for k in top_k]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    present = [row for row in ROW_ORDER if any(r and row in r["rows"] for r in heads.values())]
    for row in present:
        cells = []
        for result in heads.values():
            for k in top_k:
                value = result["rows"].get(row, {}).get(f"top{k}") if result else None
                cells.append("-" if value is None else f"{100 * value:.1f}")
        lines.append(f"| {ROW_LABELS[row]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def probe_table_json(table: Mapping) -> str:
    return json.dumps(table, indent=2)


__all__ = [
    "LABEL_HEADS",
    "PROBE_INPUTS",
    "ROW_LABELS",
    "DEFAULT_WEIGHT_DECAYS",
    "TaskBankSet",
    "LinearProbe",
    "fit_linear_probe",
    "topk_correct",
    "select_weight_decay",
    "most_frequent_classes",
    "probe_head",
    "probe_table",
    "probe_table_markdown",
    "probe_table_json",
]
