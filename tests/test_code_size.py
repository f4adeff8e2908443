"""The size rules of the house, formatted (``ruff format``): a function at most 80 lines from its ``def`` to its last
line (docstring included), a module at most 600 lines.

Functions are held here in every root of :data:`ROOTS` (the package, the example scripts, the benchmarks), read with
``ast``. Modules are held here in :data:`MODULE_ROOTS`; the package's modules are held by
``tests/test_import_graph.py`` (``test_no_module_is_past_600_lines``, with its own list of the modules formatting
took past the cap). What is over a cap today is listed in :data:`PENDING` at its current size: it may not grow, and
its entry goes when it is split (a listed item back under the cap, or gone, fails until its entry is removed).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("src", "examples", "benchmarks")
"""Where every function is held to :data:`MAX_FUNCTION_LINES`."""
MODULE_ROOTS = ("examples", "benchmarks")
"""Where every module is held to :data:`MAX_MODULE_LINES` (src/'s modules: tests/test_import_graph.py)."""
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 600

# Over a cap today, each at its current size ("<path>" for a module, "<path>::<qualified name>" for a function): may
# not grow; the entry leaves when the item is split (the dict must end empty).
PENDING: dict[str, int] = {}


def function_sizes(path: Path, name: str) -> dict[str, int]:
    """``"<name>::<qualified name>" -> lines`` for every function and method of the module at ``path`` (nested ones
    too, named through their enclosing class or function), counted from the ``def`` line to the last line."""
    sizes: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    sizes[f"{name}::{qualified}"] = child.end_lineno - child.lineno + 1
                visit(child, qualified + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), "")
    return sizes


def module_size(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def python_files(repo: Path, roots: tuple[str, ...]) -> list[Path]:
    return sorted(
        path
        for root in roots
        for path in (repo / root).rglob("*.py")
        if "__pycache__" not in path.relative_to(repo).parts
    )


def measure(repo: Path, roots: tuple[str, ...] = ROOTS, module_roots: tuple[str, ...] = MODULE_ROOTS) -> dict[str, int]:
    """The size of every function under ``roots`` and of every module under ``module_roots``, keyed as
    :data:`PENDING` is."""
    sizes: dict[str, int] = {}
    for path in python_files(repo, roots):
        sizes.update(function_sizes(path, path.relative_to(repo).as_posix()))
    for path in python_files(repo, module_roots):
        sizes[path.relative_to(repo).as_posix()] = module_size(path)
    return sizes


def cap_of(key: str) -> int:
    return MAX_FUNCTION_LINES if "::" in key else MAX_MODULE_LINES


def violations(sizes: dict[str, int], pending: dict[str, int]) -> list[str]:
    """What breaks the rules: an item past its cap and not pending, a pending item grown past its listed size, and
    a pending entry no longer needed (its item back under the cap, or gone)."""
    found = []
    for key, size in sorted(sizes.items()):
        allowed = max(cap_of(key), pending.get(key, 0))
        if size > allowed:
            what = f"grew past its pending {pending[key]}" if key in pending else f"is past the cap of {cap_of(key)}"
            found.append(f"{key}: {size} lines, {what}")
    for key in sorted(pending):
        if key not in sizes:
            found.append(f"{key}: listed in PENDING but not found (split or renamed): remove its entry")
        elif sizes[key] <= cap_of(key):
            found.append(f"{key}: {sizes[key]} lines, within the cap: remove its PENDING entry")
    return found


def test_functions_and_modules_keep_to_the_caps():
    broken = violations(measure(REPO), PENDING)
    assert not broken, "size rules (tests/test_code_size.py):\n" + "\n".join(broken)


def test_the_roots_are_the_package_the_examples_and_the_benchmarks():
    for root in ROOTS + MODULE_ROOTS:
        assert python_files(REPO, (root,)), f"{root}/ holds no Python file"
    assert set(MODULE_ROOTS) <= set(ROOTS)


# --- the checker itself -------------------------------------------------------------------------------------------


def _function(name: str, lines: int, indent: str = "") -> str:
    """A function of exactly ``lines`` lines: its ``def``, a docstring and ``lines - 2`` statements."""
    body = [f'{indent}    """Docstring."""'] + [f"{indent}    x = {i}" for i in range(lines - 2)]
    return "\n".join([f"{indent}def {name}():"] + body) + "\n"


def _repo(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return tmp_path


def test_an_81_line_function_is_caught_and_an_80_line_one_is_not(tmp_path):
    repo = _repo(tmp_path, {"src/pkg/a.py": _function("long", 81) + "\n\n" + _function("short", 80)})
    sizes = measure(repo)
    assert sizes["src/pkg/a.py::long"] == 81 and sizes["src/pkg/a.py::short"] == 80
    assert violations(sizes, {}) == ["src/pkg/a.py::long: 81 lines, is past the cap of 80"]


def test_methods_and_nested_functions_are_measured_by_their_qualified_name(tmp_path):
    method = "class Demo:\n" + _function("build", 81, indent="    ")
    nested = "def outer():\n" + _function("inner", 81, indent="    ") + "    return inner\n"
    repo = _repo(tmp_path, {"examples/demo.py": method + "\n\n" + nested})
    assert violations(measure(repo), {}) == [
        "examples/demo.py::Demo.build: 81 lines, is past the cap of 80",
        "examples/demo.py::outer: 83 lines, is past the cap of 80",
        "examples/demo.py::outer.inner: 81 lines, is past the cap of 80",
    ]


def test_a_601_line_module_is_caught_where_modules_are_held(tmp_path):
    lines = "".join(f"x{i} = {i}\n" for i in range(601))
    repo = _repo(tmp_path, {"benchmarks/big.py": lines, "examples/fits.py": lines[: -len("x600 = 600\n")]})
    sizes = measure(repo)
    assert sizes["benchmarks/big.py"] == 601 and sizes["examples/fits.py"] == 600
    assert violations(sizes, {}) == ["benchmarks/big.py: 601 lines, is past the cap of 600"]
    assert "src/pkg/big.py" not in measure(_repo(tmp_path, {"src/pkg/big.py": lines}))  # test_import_graph's


def test_a_pending_item_may_stay_but_not_grow_and_its_entry_goes_when_it_is_split(tmp_path):
    repo = _repo(tmp_path, {"benchmarks/b.py": _function("main", 90)})
    sizes = measure(repo)
    assert violations(sizes, {"benchmarks/b.py::main": 90}) == []
    assert violations(sizes, {"benchmarks/b.py::main": 89}) == [
        "benchmarks/b.py::main: 90 lines, grew past its pending 89"
    ]
    split = measure(_repo(tmp_path, {"benchmarks/b.py": _function("main", 40)}))
    assert violations(split, {"benchmarks/b.py::main": 90}) == [
        "benchmarks/b.py::main: 40 lines, within the cap: remove its PENDING entry"
    ]
    assert violations(split, {"benchmarks/b.py::gone": 90}) == [
        "benchmarks/b.py::gone: listed in PENDING but not found (split or renamed): remove its entry"
    ]
