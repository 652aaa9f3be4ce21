"""Modules are named by their import name (``commbench.methods.terngrad.TernGrad``), never by the folder they sit
in (``methods.terngrad.TernGrad``): a reader types the dotted name into Python, where only the import name works.
Checked in the code's docstrings and comments, the docs and the READMEs."""
from __future__ import annotations

import re

from .conftest import REPO

FOLDER_ROOTED = re.compile(r"(?<![\w./-])(?:methods|bench|tasks)\.[a-z_]+(?:\.[A-Za-z_]+)*")
FILE_SUFFIXES = {"py", "md", "yaml", "json", "txt", "csv"}  # a file's name (methods/terngrad.py), not a module


def folder_rooted_names(text: str) -> list[str]:
    return [m.group(0) for m in FOLDER_ROOTED.finditer(text) if m.group(0).rsplit(".", 1)[-1] not in FILE_SUFFIXES]


def test_the_pattern_tells_a_folder_name_from_an_import_name_and_a_file():
    text = ("see methods.terngrad.TernGrad; commbench.methods.terngrad.TernGrad; methods/terngrad.py; "
            "bench/cli/__init__.py; tasks.data; my.methods.x")
    assert folder_rooted_names(text) == ["methods.terngrad.TernGrad", "tasks.data"]


def test_no_module_is_named_by_its_folder():
    files = [*REPO.glob("bench/**/*.py"), *REPO.glob("methods/**/*.py"), *REPO.glob("tasks/**/*.py"),
             *REPO.glob("docs/*.md"), REPO / "README.md", REPO / "results" / "README.md"]
    found = [f"{path.relative_to(REPO)}:{i}: {name}" for path in files
             for i, line in enumerate(path.read_text().splitlines(), 1) for name in folder_rooted_names(line)]
    assert not found, "name modules by import name (commbench.…):\n" + "\n".join(found)
