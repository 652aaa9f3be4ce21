"""The import rules of the code's rooms (docs/architecture.md), read from the source with ``ast``: every import
counts, the ones inside functions too, so a cycle cannot hide in a lazy import.

- ``methods`` and ``tasks`` (``commbench.methods``, ``commbench.tasks``) import nothing else of commbench;
- bench's rooms import one way: cli -> launch -> run -> config -> store; cli -> analysis -> config -> store;
- nothing imports the CLI (``python -m commbench`` enters through ``__main__``).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .conftest import REPO

PACKAGE_DIRS = {"commbench": REPO / "bench", "commbench.methods": REPO / "methods", "commbench.tasks": REPO / "tasks"}

# room -> the rooms it may import (itself always)
ALLOWED = {
    "methods": set(),
    "tasks": set(),
    "store": set(),
    "config": {"store", "methods", "tasks"},
    "run": {"config", "store", "methods", "tasks"},
    "launch": {"run", "config", "store", "methods", "tasks"},
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


def test_no_cycle_between_modules():
    """Module-level imports only (a lazy import inside a function cannot deadlock the import system): the graph
    of modules is acyclic."""
    graph = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        deps = set()
        for node in top:
            sub = ast.Module(body=[node], type_ignores=[])
            for _, name in imports_of_tree(module, path, sub):
                target = name if name in MODULES else name.rpartition(".")[0]
                if target in MODULES and target != module:
                    deps.add(target)
        graph[module] = deps
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in graph[m]:
            if state.get(d) == "open" and not m.startswith(d + ".") and not d.startswith(m + "."):
                # a package importing its own submodule (or the reverse) is how packages are built
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)


def imports_of_tree(module: str, path: Path, tree: ast.Module) -> list[tuple[int, str]]:
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
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names if f"{base}.{a.name}" in MODULES]
    return [(line, name) for line, name in out if name == "commbench" or name.startswith("commbench.")]
