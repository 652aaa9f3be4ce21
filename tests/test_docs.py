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
