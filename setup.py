"""The wheel's packages, found from bench/layout.py (the one declaration of where the package's parts live):
every folder with an __init__.py under a code package's folder is a subpackage, so a new one cannot be left out.
The project's metadata is in pyproject.toml."""
import runpy
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
layout = runpy.run_path(str(ROOT / "bench" / "layout.py"))


def subpackages(name: str, folder: str) -> list[str]:
    base = ROOT / folder
    found = [name]
    for init in sorted(base.rglob("__init__.py")):
        rel = init.parent.relative_to(base)
        if rel.parts and not any(p.startswith((".", "__")) for p in rel.parts):
            found.append(".".join([name, *rel.parts]))
    return found


code = layout["CODE"]
packages = sorted({p for name, folder in code.items() for p in subpackages(name, folder)}) + list(layout["DATA"])
setup(package_dir=layout["package_dirs"](), packages=packages,
      package_data={**layout["CODE_DATA"], **{name: files for name, (_, files) in layout["DATA"].items()}},
      include_package_data=False)
