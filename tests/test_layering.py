"""The import rules of the code's rooms (docs/architecture.md), read from the source with ``ast``: every import
counts, the ones inside functions too, so a cycle cannot hide in a lazy import.

- ``methods`` and ``tasks`` (``commbench.methods``, ``commbench.tasks``) import nothing else of commbench;
- bench's rooms import one way: cli -> launch -> run -> config -> store; cli -> analysis -> config -> store;
- nothing imports the CLI (``python -m commbench`` enters through ``__main__``).
"""
from __future__ import annotations

import ast
from pathlib import Path


from commbench.layout import CODE

from .conftest import REPO

PACKAGE_DIRS = {package: REPO / folder for package, folder in CODE.items()}  # bench/layout.py: the one mapping

# room -> the rooms it may import (itself always)
ALLOWED = {
    "methods": set(),
    "tasks": set(),
    "store": set(),
    "layout": set(),  # commbench/layout.py: where the package's parts live (read by setup.py too)
    "config": {"store", "methods", "tasks"},
    "run": {"config", "store", "methods", "tasks"},
    "launch": {"run", "config", "store", "methods", "tasks", "layout"},
    "analysis": {"config", "store", "methods", "tasks"},
    "cli": {"launch", "run", "analysis", "config", "store", "methods", "tasks", "package"},
    "entry": {"cli"},  # commbench/__main__.py
    "package": {"analysis"},  # commbench/__init__.py: load_records, the API a script uses
}


def module_files() -> dict[str, Path]:
    """Every module of the installed package by its dotted name."""
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if package == "commbench" and parts and parts[0] in ("methods", "tasks"):
                continue
            found[".".join([package, *parts])] = path
    return found


MODULES = module_files()


def room(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    if parts[1] == "__main__":
        return "entry"
    return parts[1]


def imports_of(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import of commbench code in a file."""
    return imports_of_tree(module, path, ast.parse(path.read_text(), str(path)))


def test_the_package_is_read_from_the_folders_it_maps():
    assert "commbench.cli" in MODULES and "commbench.methods.terngrad" in MODULES
    assert "commbench.tasks.lenet_mnist" in MODULES and "commbench.run.train" in MODULES


def test_every_import_follows_the_rooms_rules():
    broken = []
    for module, path in sorted(MODULES.items()):
        mine = room(module)
        for line, name in imports_of(module, path):
            theirs = room(name)
            if theirs != mine and theirs not in ALLOWED[mine]:
                broken.append(f"{path.relative_to(REPO)}:{line}: {mine} imports {theirs} ({name})")
    assert not broken, "imports against the rules:\n" + "\n".join(broken)


def test_no_import_of_old_top_level_names():
    """bench, methods and tasks are folders, not import names: code that imports them would pick up a user's
    package of the same name."""
    stale = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            stale += [f"{path.relative_to(REPO)}:{node.lineno}: {n}" for n in names
                      if n.split(".")[0] in ("bench", "methods", "tasks")]
    assert not stale, "\n".join(stale)


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules it imports, every import counted: at the top, or lazily inside a function (a lazy
    import hides a circle from the import system, not from the design)."""
    graph = {}
    for module, path in modules.items():
        deps = set()
        for _, name in imports_of_tree(module, path, ast.parse(path.read_text()), modules):
            target = name if name in modules else name.rpartition(".")[0]
            if target in modules and target != module:
                deps.add(target)
        graph[module] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports, or None. A package and its own submodules importing each other is how packages
    are built, and is not one."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == "open" and not m.startswith(d + ".") and not d.startswith(m + "."):
                return stack[stack.index(d):] + [d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = "done"
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_cycle_between_modules():
    cycle = find_cycle(module_graph(MODULES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_a_planted_lazy_import_circle_is_found(tmp_path):
    (tmp_path / "a.py").write_text("import commbench.planted.b\n")
    (tmp_path / "b.py").write_text("def later():\n    from commbench.planted import a\n")
    modules = {"commbench.planted.a": tmp_path / "a.py", "commbench.planted.b": tmp_path / "b.py"}
    assert find_cycle(module_graph(modules)) == ["commbench.planted.a", "commbench.planted.b", "commbench.planted.a"]


def imports_of_tree(module: str, path: Path, tree: ast.Module,
                    modules: dict[str, Path] | None = None) -> list[tuple[int, str]]:
    """(line, absolute name) of the commbench imports in ``tree`` (a file's, or a part of it)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if f"{base}.{a.name}" in (modules or MODULES)]
    return [(line, name) for line, name in out if name == "commbench" or name.startswith("commbench.")]
