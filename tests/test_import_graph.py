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
# it), the named choices of every option (choices: the config checks them, the command line offers them) and the
# schemas of the files a user hands us (interface_files: every layer that reads one checks it there); none of them
# imports anything of ours.
CONVENTIONS = (
    "models.gazeflow.geometry",
    "models.gazeflow.windows",
    "models.gazeflow.choices",
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
    # the stream's steppers and the ONNX export open model folders (hub) and prepare raw frames (data)
    "generation": {"conventions", "model", "data", "hub"},
    # a model folder's region_calibration.json is read into the gaze layer's RegionCalibration
    "hub": {"conventions", "model", "data", "gaze"},
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


def test_the_choices_import_nothing_at_all(graph):
    """The command line builds its parser from them before anything heavy is imported: no import statement."""
    tree = ast.parse(graph.modules["models.gazeflow.choices"].read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


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


def test_no_module_is_past_600_lines(graph):
    long = {
        m: n
        for m, path in graph.modules.items()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def defined_names(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, also under ``if``/``try``)."""
    names: set[str] = set()
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        for node in [statement, *(ast.walk(statement) if isinstance(statement, (ast.If, ast.Try)) else ())]:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
    return names


def listed_elsewhere(graph: ImportGraph) -> dict[str, list[str]]:
    """Per module (package ``__init__`` files aside: they only re-export), the names its ``__all__`` lists that it
    does not define: a second home for a name (a compatibility re-export, "it used to live here")."""
    found = {}
    for module, path in graph.modules.items():
        if module in graph.packages:
            continue
        for statement in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(statement, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in statement.targets
            ):
                missing = [name for name in ast.literal_eval(statement.value) if name not in defined_names(path)]
                if missing:
                    found[module] = missing
    return found


def test_a_modules_all_lists_only_what_it_defines(graph):
    """One home per name: a module exports what it defines, and an import of a name names that module."""
    assert listed_elsewhere(graph) == {}


# --- the walker itself ------------------------------------------------------------------------------------------


def test_a_re_export_in_a_modules_all_is_found(tmp_path):
    root = _write_package(
        tmp_path,
        {
            "__init__.py": "from .a import x\n__all__ = ['x']\n",
            "a.py": "x = 1\nif True:\n    def y(): ...\n__all__ = ['x', 'y']\n",
            "b.py": "from .a import x\nz = 2\n__all__ = ['z', 'x']\n",
        },
    )
    assert listed_elsewhere(build_graph(root)) == {"b": ["x"]}


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


# --- examples/ and benchmarks/ ----------------------------------------------------------------------------------
REPO = PACKAGE.parents[1]
SCRIPT_FOLDERS = ("examples", "benchmarks")
RUN_THE_COMMAND = {
    "benchmarks/bench_pipeline.py": "times `gazeflow predict` itself: GazePredictor's overlay, CSVs and summary.json",
    "benchmarks/pipeline_paths.py": "bench_pipeline's serial and overlapped runs of `gazeflow predict`'s own path",
}
"""Scripts whose job is to run a command's own work, and may import ``commands`` for it (each with why)."""


def script_imports(path: Path) -> set[str]:
    """Every module a script imports by absolute name, lazily or not (``from a import b`` counts ``a`` and
    ``a.b``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return found


def outside_the_layers(module: str) -> bool:
    """The command layer or the test suite: what examples and benchmarks do not build on."""
    return any(module == top or module.startswith(top + ".") for top in (f"{PACKAGE_NAME}.commands", "tests"))


def scripts_importing_commands_or_tests(root: Path) -> dict[str, list[str]]:
    found = {}
    for folder in SCRIPT_FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            wrong = sorted(module for module in script_imports(path) if outside_the_layers(module))
            if wrong:
                found[path.relative_to(root).as_posix()] = wrong
    return found


def test_examples_and_benchmarks_import_the_layers_not_the_commands_or_the_tests():
    found = scripts_importing_commands_or_tests(REPO)
    assert not set(found) - set(RUN_THE_COMMAND), {name: found[name] for name in set(found) - set(RUN_THE_COMMAND)}
    assert set(RUN_THE_COMMAND) <= set(found), "an exception no script needs any more: remove it"
    assert all(not module.startswith("tests") for modules in found.values() for module in modules), found


def test_the_script_check_sees_lazy_package_and_test_imports(tmp_path):
    (tmp_path / "examples").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "examples" / "clean.py").write_text(
        f"from {PACKAGE_NAME}.pipelines.egocentric_gaze import GazeFlowPipeline\nimport engine_hooks\n"
    )
    (tmp_path / "benchmarks" / "lazy.py").write_text(
        f"def main():\n    from {PACKAGE_NAME}.commands.predict import GazePredictor\n"
    )
    (tmp_path / "benchmarks" / "tests_.py").write_text(
        f"import tests.conftest\nfrom tests import streaming_reference\nfrom {PACKAGE_NAME} import commands\n"
    )
    assert scripts_importing_commands_or_tests(tmp_path) == {
        "benchmarks/lazy.py": [f"{PACKAGE_NAME}.commands.predict", f"{PACKAGE_NAME}.commands.predict.GazePredictor"],
        "benchmarks/tests_.py": [
            "tests",
            "tests.conftest",
            "tests.streaming_reference",
            f"{PACKAGE_NAME}.commands",
        ],
    }
