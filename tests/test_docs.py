"""The documents: a README a user can read (under 15 KB), and links that stay inside the repository and
resolve."""
from __future__ import annotations

import re

from .conftest import REPO

DOCS = [REPO / "README.md", REPO / "results" / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_is_short():
    assert (REPO / "README.md").stat().st_size < 15_000


def test_every_link_stays_in_the_repository_and_resolves():
    bad = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                bad.append(f"{doc.relative_to(REPO)}: {target} (leaves the repository)")
                continue
            path = (doc.parent / target.split("#")[0]).resolve() if not target.startswith("#") else doc
            if REPO not in path.parents and path != REPO:
                bad.append(f"{doc.relative_to(REPO)}: {target} (outside the repository)")
            elif not path.exists():
                bad.append(f"{doc.relative_to(REPO)}: {target} (no such file)")
    assert not bad, "\n".join(bad)


def test_no_document_or_module_points_at_files_outside_the_repository():
    offenders = [str(p.relative_to(REPO)) for p in [*DOCS, *REPO.glob("bench/**/*.py"), *REPO.glob("methods/**/*.py"),
                                                     *REPO.glob("tasks/**/*.py")]
                 if "../shared" in p.read_text()]
    assert not offenders, offenders


SHELL_BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
# the options by which a command names what it writes: a run's records, a table, figures, a calibration
WRITES = {"run": ("--results", "--out"), "sweep": ("--results", "--out"), "table": ("--out",), "plot": ("--out",),
          "report": ("--out",), "model": ("--out",)}


def written_by(line: str) -> list[str]:
    """The folders and files a documented ``commbench`` command line writes (placeholders such as ``DIR`` or
    ``RESULTS/figures`` left out: they name no place)."""
    import shlex

    try:
        words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
    except ValueError:  # an unclosed quote: a line of Python or prose, not a command
        return []
    starts = [i for i, w in enumerate(words) if w.endswith("commbench") and i + 1 < len(words)]
    if not starts:
        return []
    command, options = words[starts[0] + 1], words[starts[0] + 2:]
    found = []
    for i, word in enumerate(options):
        flag, _, value = word.partition("=")
        if flag in WRITES.get(command, ()):
            found.append(value or (options[i + 1] if i + 1 < len(options) else ""))
    return [path for path in found if path and not path.split("/")[0].isupper()]


def test_every_documented_command_writes_under_local_results():
    """The README's and docs' examples write under the git-ignored local-results/, never into results/ (the
    records the project commits) or beside the code."""
    stray = [f"{doc.relative_to(REPO)}: {line.strip()}" for doc in [REPO / "README.md", *(REPO / "docs").glob("*.md")]
             for block in SHELL_BLOCK.findall(doc.read_text()) for line in block.replace("\\\n", " ").splitlines()
             if any(not path.startswith("local-results/") for path in written_by(line))]
    assert not stray, "\n".join(stray)


def test_the_check_above_sees_a_command_that_writes_elsewhere():
    assert written_by("commbench sweep bench/grids/smoke.yaml --results results/smoke") == ["results/smoke"]
    assert written_by("sudo commbench sweep g.yaml --out=results/tour --wait  # a comment --out x") == ["results/tour"]
    assert written_by("commbench table --results results/x [--out table.md]") == ["table.md"]
    assert written_by("commbench status --out results/tour") == []  # reads: status --out names the folder it reads
    assert written_by("commbench plot [--out RESULTS/figures]") == []


def test_make_run_writes_its_smoke_records_under_local_results():
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    smoke = re.search(r"^SMOKE\s*=\s*(\S+)$", makefile, re.M)
    assert smoke and smoke[1].startswith("local-results/")
    assert "--out $(SMOKE)" in recipe and "--results $(SMOKE)" in recipe and "results/smoke" not in recipe
