"""The twins: computations written twice on purpose (a static streaming form beside the model's, a fused kernel beside
transformers' or torch's module), each pair kept equal by a test. docs/architecture.md's "Twins" table lists every
pair with that test; each half's docstring names the other half and the test (``Twin of ``X``: change both; held
equal by ``tests/...::...``.``). These tests read the table: every named object exists, every test exists, each
half of ours names its other half and the test, and every "Twin of" in a docstring has its row. They also hold the
twins no other test covers (the row-wise Linears and layer norms, the forms of RoPE) equal to their other half."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional

from transformers_gazeflow import GazeFlowConfig
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_attention import GazeFlowAttention
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_embeddings import (
    GazeFlowRotaryEmbedding,
    apply_rotary,
    apply_signed_rotary,
    swap_pairs,
)
from transformers_gazeflow.models.gazeflow.modeling_gazeflow_rows import (
    PairSwapped,
    PreparedRowLayers,
    layer_norm_rows,
    linear_rows,
)

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"
OURS = ("transformers_gazeflow.", "benchmarks.")
SOURCES = (ROOT / "src" / "transformers_gazeflow", ROOT / "benchmarks" / "streaming_reference.py")
TWIN_OF = re.compile(r"Twin of ``([\w.]+)``")


@dataclass(frozen=True)
class Twin:
    """One row of the table: a half of ours, its other half, and the test that holds them equal (``path::name``)."""

    half: str
    other: str
    test: str


def twins_table(text: str) -> list[Twin]:
    """The rows of the "## Twins" section's table (the names in backticks; the third column, why, is not read)."""
    section = ("\n" + text).split("\n## Twins", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| ") or line.startswith(("| twin", "| ---")):
            continue
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        rows.append(Twin(cells[0], cells[1], cells[3]))
    return rows


def locate(dotted: str) -> tuple[object, str]:
    """The object a dotted name names and its short name (the last part of its module, then its attributes:
    ``modeling_gazeflow_layers.GazeFlowDenoiserBlock``, ``nn.Linear``), as a docstring writes it."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target, ".".join(parts[cut - 1 :])
    raise ModuleNotFoundError(dotted)


def defined_tests(path: Path) -> set[str]:
    """The tests a file defines: ``name`` for functions, ``Class::name`` for methods."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names |= {f"{node.name}::{item.name}" for item in node.body if isinstance(item, ast.FunctionDef)}
    return names


def problems(rows: list[Twin]) -> list[str]:
    """What is wrong with the rows: a name that names nothing, a test that does not exist, a half of ours whose
    docstring does not say ``Twin of ``<other half>``: ... held equal by ``<test>``."""
    found = []
    for row in rows:
        path, _, name = row.test.partition("::")
        if not path.startswith("tests/") or not (ROOT / path).is_file() or name not in defined_tests(ROOT / path):
            found.append(f"{row.test}: no such test")
        located = {}
        for dotted in (row.half, row.other):
            try:
                located[dotted] = locate(dotted)
            except (AttributeError, ModuleNotFoundError):
                found.append(f"{dotted}: names nothing")
        if len(located) < 2:
            continue
        for half, other in ((row.half, row.other), (row.other, row.half)):
            if not half.startswith(OURS):
                continue
            doc = " ".join((inspect.getdoc(located[half][0]) or "").split())
            if f"Twin of ``{located[other][1]}``" not in doc or f"``{row.test}``" not in doc:
                found.append(f"{half}: its docstring does not say 'Twin of ``{located[other][1]}``' and ``{row.test}``")
    return found


def declared_twins(path: Path) -> set[tuple[str, str]]:
    """(short name of the documented object, the short name it says it is a twin of) for every docstring of a
    module, class, function or method in ``path`` that says "Twin of"."""
    module = path.stem
    found = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef)):
                name = f"{prefix}.{child.name}"
                for other in TWIN_OF.findall(" ".join((ast.get_docstring(child) or "").split())):
                    found.add((name, other))
                visit(child, name)

    visit(ast.parse(path.read_text(encoding="utf-8")), module)
    return found


# ---------------------------------------------------------------------------------------------------- the table
def test_every_twin_in_the_table_exists_names_its_other_half_and_has_its_test():
    rows = twins_table(ARCHITECTURE_DOC.read_text(encoding="utf-8"))
    assert len(rows) >= 20 and len(set(rows)) == len(rows)
    assert all(row.half.startswith(OURS) for row in rows)
    assert not problems(rows), "\n".join(problems(rows))


def test_every_twin_a_docstring_declares_has_its_row():
    rows = twins_table(ARCHITECTURE_DOC.read_text(encoding="utf-8"))
    listed = set()
    for row in rows:
        (_, half), (_, other) = locate(row.half), locate(row.other)
        listed |= {(half, other), (other, half)}
    paths = [p for source in SOURCES for p in (sorted(source.rglob("*.py")) if source.is_dir() else [source])]
    declared = set().union(*(declared_twins(path) for path in paths))
    assert len(declared) >= len(rows)
    assert declared <= listed, f"twins declared in docstrings but not in docs/architecture.md: {declared - listed}"


def test_the_checks_catch_a_missing_name_a_renamed_test_and_a_silent_docstring():
    this_test = "tests/test_twins.py::test_the_checks_catch_a_missing_name_a_renamed_test_and_a_silent_docstring"
    table = (
        "## Twins\n\n| twin | other half | why two | held equal by |\n| --- | --- | --- | --- |\n"
        "| `transformers_gazeflow.models.gazeflow.modeling_gazeflow_layers.GazeFlowDenoiserBlock` | `torch.nn.Linear` "
        f"| no reason | `{this_test}` |\n\n## Next\n| `not.a.row` | x | y | z |\n"
    )
    rows = twins_table(table)
    assert rows == [
        Twin(
            "transformers_gazeflow.models.gazeflow.modeling_gazeflow_layers.GazeFlowDenoiserBlock",
            "torch.nn.Linear",
            "tests/test_twins.py::test_the_checks_catch_a_missing_name_a_renamed_test_and_a_silent_docstring",
        )
    ]
    assert problems(rows) == [
        "transformers_gazeflow.models.gazeflow.modeling_gazeflow_layers.GazeFlowDenoiserBlock: its docstring does "
        "not say 'Twin of ``nn.Linear``' and "
        "``tests/test_twins.py::test_the_checks_catch_a_missing_name_a_renamed_test_and_a_silent_docstring``"
    ]
    real = twins_table(ARCHITECTURE_DOC.read_text(encoding="utf-8"))[0]
    renamed = Twin(real.half, real.other, real.test + "_renamed")
    missing = Twin(real.half + "_gone", real.other, real.test)
    assert problems([renamed]) == [
        f"{renamed.test}: no such test",
        f"{real.half}: its docstring does not say 'Twin of ``{locate(real.other)[1]}``' and ``{renamed.test}``",
    ]
    assert problems([missing]) == [f"{missing.half}: names nothing"]
    assert locate("torch.nn.functional.linear")[1] == "functional.linear"


# ---------------------------------------------------------------------------------------------------- the twins
def test_row_layers_equal_torch_layers():
    """linear_rows (one Linear, several side by side, a pair-swapped one; with and without autograd, prepared
    weights reused), layer_norm_rows and PreparedRowLayers against torch's own modules and functions."""
    torch.manual_seed(0)
    first, second, norm = nn.Linear(16, 24), nn.Linear(16, 8), nn.LayerNorm(16, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    rows = torch.randn(10, 16)
    owner = nn.Module()
    for grad in (True, False, False):  # autograd: weights joined per call; without: prepared once, then reused
        with torch.set_grad_enabled(grad):
            assert torch.equal(linear_rows(owner, (first,), rows), first(rows))
            # side by side: each column the same dot product, which a BLAS may sum in another order
            torch.testing.assert_close(
                linear_rows(owner, (first, second), rows), torch.cat([first(rows), second(rows)], -1), rtol=0, atol=1e-6
            )
            swapped = linear_rows(owner, (PairSwapped(first),), rows)
            torch.testing.assert_close(swapped, swap_pairs(first(rows)), rtol=0, atol=0)
            assert torch.equal(layer_norm_rows(norm, rows), norm(rows))

    prepared = PreparedRowLayers()
    prepared.layer_norm_eps = 1e-6
    prepared.register_buffer("first_weight", first.weight.detach().t().contiguous())
    prepared.register_buffer("first_bias", first.bias.detach())
    prepared.register_buffer("norm_weight", norm.weight.detach())
    prepared.register_buffer("norm_bias", norm.bias.detach())
    with torch.no_grad():
        for _ in range(2):  # the broadcast bias kept from the first call
            # a contiguous W^T may take another BLAS kernel than F.linear's transposed view (CPU-dependent order)
            torch.testing.assert_close(
                prepared.linear("first", rows), functional.linear(rows, first.weight, first.bias), rtol=0, atol=1e-6
            )
        assert torch.equal(
            prepared.layer_norm("norm", rows), functional.layer_norm(rows, (16,), norm.weight, norm.bias, 1e-6)
        )


@pytest.mark.parametrize("heads", [1, 4])
def test_rope_forms_equal_apply_rotary(heads):
    """apply_signed_rotary (a signed sine and a pair swap) equals apply_rotary bit for bit; the attention's RoPE
    folded into its Q/K/V product (pair-swapped columns) gives the attention weights of queries and keys rotated by
    apply_rotary (Appendix C.2)."""
    config = GazeFlowConfig.tiny(num_attention_heads=heads)
    config._attn_implementation = "eager"
    rope = GazeFlowRotaryEmbedding(config.head_dim, config.rope_theta)
    generator = torch.Generator().manual_seed(0)
    states = torch.randn(3, heads, 7, config.head_dim, generator=generator)
    cos, sin = rope(torch.arange(7))
    assert torch.equal(apply_signed_rotary(states, *rope.signed(torch.arange(7))), apply_rotary(states, cos, sin))

    torch.manual_seed(0)
    attention = GazeFlowAttention(config).eval()
    hidden = torch.randn(3, 7, config.hidden_size, generator=generator)
    with torch.no_grad():
        _, weights = attention.self_attention(hidden, rope.table(7, hidden.device, 2 * heads), output_attentions=True)
        query, key = (attention.split_heads(projection(hidden)) for projection in (attention.q_proj, attention.k_proj))
        logits = apply_rotary(query, cos, sin) @ apply_rotary(key, cos, sin).transpose(-1, -2) * config.head_dim**-0.5
    torch.testing.assert_close(weights, logits.softmax(-1), rtol=0, atol=1e-6)
