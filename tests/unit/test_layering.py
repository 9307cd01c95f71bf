"""The package's floors (README "Layout"): every import between folders goes down or across a
floor, never up, and no folder imports one that imports it back. The one exception is the
device-class plug-in loading: `profiles/device_schema.py` imports `accelsim.devices` inside
`load_builtin_classes`, so that the built-in classes register themselves. (`accelsim/__init__.py`
loads the API on first use; `accelsim` as an import target is its `__version__`.)"""

from __future__ import annotations

import ast
from pathlib import Path

import accelsim

PACKAGE = Path(accelsim.__file__).parent
# Low to high; a folder may import its own floor's folders and any lower floor's.
FLOORS = (
    ("errors", "physical", "formats", "datafiles", "tomlfiles", "schema", "numbers", "arguments",
     "accelsim"),
    ("workload", "results"),
    ("kernels", "profiles"),
    ("devices",),
    ("interconnect",),
    ("sim",),
    ("llm",),
    ("run",),
    ("calibrate", "explore", "plots"),
    ("validation",),
    ("report",),
    ("api", "cli"),
)
FLOOR = {name: i for i, names in enumerate(FLOORS) for name in names}
PLUGIN_LOADING = {("profiles/device_schema.py", "load_builtin_classes")}


def _imports() -> list[tuple[str, str, str, str]]:
    """(source folder, imported folder, file, innermost enclosing function or '') of every
    import of an accelsim module from another folder."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        src = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        if src == "__init__":  # the package's face: `accelsim.simulate` loads the API lazily
            continue

        def visit(node: ast.AST, func: str, rel: Path = rel, src: str = src) -> None:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                func = node.name
            mods = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                    else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            for mod in mods:
                parts = mod.split(".")
                if parts[0] == "accelsim":
                    dst = parts[1] if len(parts) > 1 else "accelsim"
                    if dst != src:
                        found.append((src, dst, rel.as_posix(), func))
            for child in ast.iter_child_nodes(node):
                visit(child, func)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def test_every_folder_has_a_floor():
    folders = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir()
               if (p.is_dir() and (p / "__init__.py").exists())
               or (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))}
    assert folders - set(FLOOR) == set()


def test_no_import_goes_up_a_floor():
    upward = sorted({(src, dst, file) for src, dst, file, func in _imports()
                     if FLOOR[dst] > FLOOR[src] and (file, func) not in PLUGIN_LOADING})
    assert upward == []


def test_the_plugin_loading_is_the_only_exception_and_is_in_a_function():
    exceptions = {(file, func) for src, dst, file, func in _imports()
                  if FLOOR[dst] > FLOOR[src]}
    assert exceptions == PLUGIN_LOADING
