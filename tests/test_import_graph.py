"""The whole package's import graph, read with ``ast`` (docs/specs/architecture.md, "Rules of the house").

Every import counts: module level, inside functions (lazy) and under ``TYPE_CHECKING``. A package ``__init__``'s own
re-exports are set aside (an ``__init__`` only re-exports and registers), and an import *through* a package
(``from .data import decode_frames``, ``from transformers_gazeflow import GazeFlowModel``) is followed to the module
that defines the name, so the graph's edges are "this module uses that module". The tests fail on an import cycle,
on a module importing a layer it must not (nothing below the model imports it, metrics never import the model, the
scheduler imports neither objectives nor samplers, ...), and on a module past 600 lines.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE_NAME = "transformers_gazeflow"
PACKAGE = Path(__file__).resolve().parents[1] / "src" / PACKAGE_NAME
MAX_LINES = 600


@dataclass
class ImportGraph:
    """Modules (dotted names relative to the package; a package is its ``__init__``) and what each imports."""

    modules: dict[str, Path]
    packages: set[str]
    edges: dict[str, set[str]] = field(default_factory=dict)


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _reexports(init: Path, package: str, modules: dict[str, Path]) -> dict[str, str]:
    """``name -> defining module`` for a package ``__init__``: its ``from .x import name`` lines, and a lazy
    ``_EXPORTS = {"name": "module"}`` table (the top-level package imports on first attribute access)."""
    found: dict[str, str] = {}
    tree = ast.parse(init.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            target = f"{package}.{node.module}" if package else node.module
            for alias in node.names:
                found[alias.asname or alias.name] = target
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in targets) and node.value is not None:
                for name, module in ast.literal_eval(node.value).items():
                    found[name] = f"{package}.{module}" if package else module
    return {name: target for name, target in found.items() if target in modules}


def build_graph(root: Path = PACKAGE) -> ImportGraph:
    modules = {_module_name(path, root): path for path in sorted(root.rglob("*.py")) if "__pycache__" not in path.parts}
    packages = {_module_name(path, root) for path in root.rglob("__init__.py")}
    graph = ImportGraph(modules=modules, packages=packages)
    reexports = {package: _reexports(modules[package], package, modules) for package in packages}

    def resolve(base: str, names: list[str]) -> set[str]:
        """Modules reached by ``from <base> import names`` (``base`` relative to the package, '' = the package)."""
        targets = set()
        for name in names:
            submodule = f"{base}.{name}" if base else name
            if submodule in modules:
                targets.add(submodule)
            elif base in packages and name in reexports[base]:
                targets.add(reexports[base][name])
            elif base in modules:
                targets.add(base)
        return targets

    for module, path in modules.items():
        if module in packages:
            graph.edges[module] = set()  # an __init__'s re-exports are set aside
            continue
        package_parts = module.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
                if node.level:
                    anchor = package_parts[: len(package_parts) - (node.level - 1)]
                    base = ".".join(anchor + (node.module.split(".") if node.module else []))
                    targets |= resolve(base, names)
                elif node.module == PACKAGE_NAME:
                    targets |= resolve("", names)
                elif node.module and node.module.startswith(PACKAGE_NAME + "."):
                    targets |= resolve(node.module[len(PACKAGE_NAME) + 1 :], names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE_NAME + "."):
                        dotted = alias.name[len(PACKAGE_NAME) + 1 :]
                        if dotted in modules:
                            targets.add(dotted)
        targets.discard(module)
        graph.edges[module] = {t for t in targets if t}  # '' = a name the top package defines itself
    return graph


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = finished
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(edges.get(module, ())):
            if state.get(imported) == 1:
                return path[path.index(imported) :] + [imported]
            if imported not in state:
                cycle = visit(imported)
                if cycle:
                    return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


# The layers of docs/specs/architecture.md, lowest first, as the package's folders; a module may import its own layer
# and the layers listed for it. The conventions are the lowest floor: coordinate frames and the window grid live in the
# model folder (which must be self-contained, so the model can read them), gaze-type codes and the valid rule in the
# data layer (the unified schema), how a file is written whole (atomic_files: every layer that writes a file uses
# it) and the schemas of the files a user hands us (interface_files: every layer that reads one checks it there);
# none of them imports anything of ours.
CONVENTIONS = (
    "models.gazeflow.geometry",
    "models.gazeflow.windows",
    "data.gaze_types",
    "data.atomic_files",
    "data.interface_files",
)
LAYERS: dict[str, tuple[str, ...]] = {
    "conventions": CONVENTIONS,
    "model": ("models",),
    "data": ("data",),
    "gaze": ("gaze",),
    "metrics": ("metrics",),
    "generation": ("generation",),
    "hub": ("hub",),
    "pipelines": ("pipelines",),
    "outputs": ("outputs",),
    "recipes": ("training",),
    "commands": ("commands", "cli", "__main__"),
    "analysis": ("analysis",),
    "registration": ("registration",),
}
BELOW_THE_MODEL = {"conventions", "data", "gaze", "metrics"}
MAY_IMPORT: dict[str, set[str]] = {
    "conventions": set(),
    "model": {"conventions"},
    "data": {"conventions"},
    # what K samples tell (uncertainty, events, a wearer's correction): maths on trajectories, like the metrics
    "gaze": {"conventions"},
    "metrics": {"conventions", "gaze"},
    "generation": {"conventions", "model"},
    "hub": {"conventions", "model", "data"},
    "pipelines": {"conventions", "model", "data", "gaze", "metrics", "generation", "hub"},
    "outputs": {"conventions", "model", "data", "gaze", "metrics"},
    "recipes": {"conventions", "model", "data", "gaze", "metrics", "generation", "hub"},
    "commands": {"conventions", "model", "data", "gaze", "metrics", "generation", "hub", "pipelines", "outputs"},
    # analysis figures are drawn with the overlay's marks, and the analyses run the recipes' evaluation loop
    "analysis": {
        "conventions",
        "model",
        "data",
        "gaze",
        "metrics",
        "generation",
        "hub",
        "pipelines",
        "outputs",
        "recipes",
    },
    "registration": {"model", "hub", "pipelines"},
}
MODEL_FOLDER = "models.gazeflow"


def layer_of(module: str) -> str:
    """The layer a module belongs to: the longest listed prefix (``data.synthetic.scene`` -> data)."""
    matches = [
        (len(prefix), layer)
        for layer, prefixes in LAYERS.items()
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    if not matches:
        raise AssertionError(f"module {module!r} has no layer in LAYERS: add it where it belongs")
    return max(matches)[1]


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return build_graph()


def test_the_package_has_no_import_cycle(graph):
    cycle = find_cycle(graph.edges)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer(graph):
    for module in graph.modules:
        if module and module not in graph.packages:
            layer_of(module)


def test_every_import_follows_the_layers(graph):
    wrong = []
    for module, imported in graph.edges.items():
        if not module or module in graph.packages:
            continue
        layer = layer_of(module)
        for target in sorted(imported):
            if target in graph.packages and target not in graph.modules:
                continue
            target_layer = layer_of(target) if target else "registration"
            if target_layer != layer and target_layer not in MAY_IMPORT[layer]:
                wrong.append(f"{module} ({layer}) imports {target} ({target_layer})")
    assert not wrong, "layer violations:\n" + "\n".join(wrong)


def test_at_most_four_modules_sit_in_the_package_root(graph):
    root = sorted(m for m in graph.modules if m and "." not in m and m not in graph.packages)
    assert len(root) + 1 <= 4, root  # + the package's __init__


def test_the_model_folder_imports_nothing_of_the_package_outside_it(graph):
    outside = {
        f"{module} -> {target}"
        for module, imported in graph.edges.items()
        if module.startswith(MODEL_FOLDER + ".")
        for target in imported
        if not target.startswith(MODEL_FOLDER + ".")
    }
    assert not outside, sorted(outside)


def test_the_conventions_import_nothing_of_ours(graph):
    for module in CONVENTIONS:
        assert not graph.edges[module], (module, graph.edges[module])


def test_nothing_below_the_model_imports_its_network(graph):
    network = {m for m in graph.modules if m.startswith(MODEL_FOLDER + ".") and m not in CONVENTIONS}
    below = {
        f"{m} -> {sorted(graph.edges[m] & network)}"
        for m in graph.edges
        if m and m not in graph.packages and layer_of(m) in BELOW_THE_MODEL and graph.edges[m] & network
    }
    assert not below, sorted(below)


def test_the_scheduler_imports_neither_objectives_nor_samplers(graph):
    assert not graph.edges[f"{MODEL_FOLDER}.scheduling_gazeflow"] & {
        f"{MODEL_FOLDER}.modeling_gazeflow",
        f"{MODEL_FOLDER}.modeling_gazeflow_objectives",
        f"{MODEL_FOLDER}.generation_gazeflow",
        "generation.online",
        "generation.windowed",
    }


# Modules that `ruff format` took past the cap, each at its formatted length: they may not grow, and each leaves
# this list when it is split (the list must end empty).
OVER_THE_CAP_AFTER_FORMATTING = {
    "commands.cli": 729,
    "data.synthetic_tasks": 652,
    "hub.model_folders": 618,
    "metrics.protocol": 627,
    "models.gazeflow.modeling_gazeflow": 648,
    "models.gazeflow.modeling_gazeflow_encoder": 612,
    "models.gazeflow.modeling_gazeflow_layers": 648,
    "pipelines.egocentric_gaze": 661,
    "training.checkpointing": 607,
}


def test_no_module_is_past_600_lines(graph):
    long = {
        m: n
        for m, path in graph.modules.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > OVER_THE_CAP_AFTER_FORMATTING.get(m, MAX_LINES)
    }
    assert not long, long


# --- the walker itself ------------------------------------------------------------------------------------------


def _write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / PACKAGE_NAME / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / PACKAGE_NAME


def test_the_walker_counts_lazy_type_checking_and_absolute_imports(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "__init__.py": '_EXPORTS = {"Model": "model"}\n',
            "model.py": "class Model: ...\n",
            "geometry.py": "",
            "engine.py": "",
            "data/__init__.py": "from .video import decode\n",
            "data/video.py": "def decode(): ...\n",
            "data/sub/__init__.py": "",
            "data/sub/scene.py": "from ..video import decode\nfrom ... import geometry\n",
            "probe.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .model import Model\n"
                "def f():\n    from .engine import run\n    from .data import decode\n"
                "    import transformers_gazeflow.geometry\n    from transformers_gazeflow import Model\n"
            ),
        },
    )
    graph = build_graph(root)
    assert graph.edges["probe"] == {"model", "engine", "data.video", "geometry"}
    assert graph.edges["data.sub.scene"] == {"data.video", "geometry"}
    assert graph.edges["data"] == set()  # an __init__'s re-exports are set aside


def test_find_cycle_sees_a_cycle_through_a_lazy_import(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from .b import x\n",
            "b.py": "def g():\n    from .c import y\n",
            "c.py": "from . import a\n",
        },
    )
    cycle = find_cycle(build_graph(root).edges)
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# --- docs/architecture.md ---------------------------------------------------------------------------------------
ARCHITECTURE_DOC = PACKAGE.parents[1] / "docs" / "architecture.md"


def equation_table_names(text: str) -> list[str]:
    """The dotted names in the last column of the doc's equation table."""
    section = text.split("## Paper equations", 1)[1]
    names = []
    for line in section.splitlines():
        if line.startswith("| ") and not line.startswith(("| Paper", "| ---")):
            last_cell = line.rstrip(" |").rsplit("|", 1)[1]
            names += [name for name in last_cell.split("`") if name.startswith(PACKAGE_NAME + ".")]
    return names


def resolve(dotted: str):
    """Import the longest module prefix of ``dotted`` and walk the rest as attributes."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(dotted)


def test_every_function_in_the_architecture_docs_equation_table_exists():
    names = equation_table_names(ARCHITECTURE_DOC.read_text(encoding="utf-8"))
    assert len(names) >= 15
    missing = []
    for name in names:
        try:
            assert callable(resolve(name))
        except (AttributeError, ModuleNotFoundError, AssertionError):
            missing.append(name)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_architecture_doc_names_every_layer_and_a_missing_name_is_caught():
    text = ARCHITECTURE_DOC.read_text(encoding="utf-8")
    for layer in LAYERS:
        assert layer in text, layer
    with pytest.raises(AttributeError):
        resolve(f"{PACKAGE_NAME}.windows.no_such_function")
    broken = (
        "## Paper equations\n| Paper | What | Implemented by |\n| --- | --- | --- |\n"
        f"| Eq. x | y | `{PACKAGE_NAME}.geometry.clamp_unit` and `{PACKAGE_NAME}.schema.valid_mask` |\n"
    )
    assert equation_table_names(broken) == [f"{PACKAGE_NAME}.geometry.clamp_unit", f"{PACKAGE_NAME}.schema.valid_mask"]
