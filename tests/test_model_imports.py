"""The model folder's import graph, read with ``ast`` (every import counts: module level, inside functions and under
``TYPE_CHECKING``). The modules below ``modeling_gazeflow`` (config, input checks, attention, initialisation, layers,
embeddings, rows, video encoder, encoder side, velocity network, causal variant, ablation switches, outputs) import
only each other and the conventions (the folder's ``geometry``, ``windows`` and ``choices``), never the model, its
windowed sampling or anything above it, and form no cycle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "transformers_gazeflow" / "models" / "gazeflow"
BELOW_THE_MODEL = (
    "configuration_gazeflow",
    "modeling_gazeflow_checks",
    "modeling_gazeflow_attention",
    "modeling_gazeflow_initialization",
    "modeling_gazeflow_layers",
    "modeling_gazeflow_embeddings",
    "modeling_gazeflow_rows",
    "modeling_gazeflow_video_encoder",
    "modeling_gazeflow_encoder",
    "modeling_gazeflow_velocity",
    "modeling_gazeflow_causal",
    "modeling_gazeflow_variants",
    "modeling_gazeflow_outputs",
)
CONVENTIONS = ("geometry", "windows", "choices")


def package_imports(module: str, package: Path = PACKAGE) -> set[str]:
    """Top-level package modules that ``module`` imports anywhere in its source."""
    tree = ast.parse((package / f"{module}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("transformers_gazeflow."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.split(".")[1] for alias in node.names if alias.name.startswith("transformers_gazeflow.")
            )
    return found


@pytest.mark.parametrize("module", BELOW_THE_MODEL)
def test_modules_below_the_model_import_only_each_other_and_the_conventions(module):
    assert package_imports(module) <= set(BELOW_THE_MODEL + CONVENTIONS), package_imports(module)


def test_the_model_side_has_no_import_cycle():
    graph = {module: package_imports(module) & set(BELOW_THE_MODEL) for module in BELOW_THE_MODEL}
    graph["modeling_gazeflow"] = package_imports("modeling_gazeflow") & set(BELOW_THE_MODEL)
    visiting, done = set(), set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in visiting, f"import cycle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        visiting.add(module)
        for imported in sorted(graph[module]):
            visit(imported, path + (module,))
        visiting.discard(module)
        done.add(module)

    for module in graph:
        visit(module, ())
    assert "modeling_gazeflow" not in set().union(*(graph[m] for m in BELOW_THE_MODEL))


def test_the_walker_sees_lazy_and_type_checking_imports(tmp_path):
    (tmp_path / "probe.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sampling import x\n"
        "def f():\n    from .streaming import y\n    from . import windows\n"
        "    import transformers_gazeflow.hub\n    from .data.video import z\n",
        encoding="utf-8",
    )
    assert package_imports("probe", tmp_path) == {"sampling", "streaming", "windows", "hub", "data"}
