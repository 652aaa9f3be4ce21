"""Where real data sets come from on a machine without internet: a local mirror, named by the environment.

``COMMBENCH_DATA_MIRROR`` names a folder holding data sets as their publishers ship them (``mnist/*.gz``,
``cifar10-jpeg/cifar10-jpeg.tar.gz``). The package knows no such path itself: the Makefile and CI set the
variable where a mirror exists. Files taken from a mirror are checked against the canonical checksums.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MIRROR_ENV = "COMMBENCH_DATA_MIRROR"
OFFLINE_ENV = "COMMBENCH_OFFLINE"  # 1: never try a download (an air-gapped cluster, where one would hang)


def downloads_allowed() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip() not in ("1", "true", "yes")


def mirror_folder(name: str) -> Path | None:
    """``$COMMBENCH_DATA_MIRROR/<name>`` if the variable is set and that folder exists, else None."""
    root = os.environ.get(MIRROR_ENV, "").strip()
    if not root:
        return None
    folder = Path(root).expanduser() / name
    return folder if folder.is_dir() else None


def mirror_hint(name: str) -> str:
    """Why the mirror did not help, for an error message."""
    root = os.environ.get(MIRROR_ENV, "").strip()
    if not root:
        return f"{MIRROR_ENV} is not set"
    return f"{MIRROR_ENV}={root} has no {name}/ folder"


def md5_of(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_json_atomic(path: Path, value: dict) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)  # concurrent provisioners never see half a file


def stamp(files: list[Path]) -> dict:
    """Sizes and modification times: what a later look compares to trust an earlier checksum."""
    return {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in files}
