"""A user's compressor from outside the repository, as docs/extending.md shows it: the docs' code block is built
into a package (its module and entry-point metadata, on PYTHONPATH), run by name through ``commbench run`` under
sim and under dist (2 gloo workers), which finish ``done`` with the same final weights and bytes, and checked by
``commbench compressors``. The docs example is thereby the tested code, and stays it."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMBENCH = Path(sys.executable).with_name("commbench")
RUN = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--workers", "2", "--steps", "3", "--seed", "5",
       "--set", "method.ratio=0.05", "--save-weights", "--quiet"]
MAX_LINES = 40


def docs_example() -> tuple[str, str]:
    """The first Python block of docs/extending.md's "Adding a method" and the entry point under it."""
    text = (REPO / "docs" / "extending.md").read_text()
    section = text[text.index("## Adding a method"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    entry = re.search(r'\[project\.entry-points\."commbench\.methods"\]\n(.*?)\n```', section, re.S).group(1)
    return code, entry.strip()


@pytest.fixture(scope="module")
def user_package(tmp_path_factory) -> dict:
    """The package on disk, outside the repository, as importlib.metadata finds it; the environment to use it."""
    code, entry = docs_example()
    name, target = (part.strip().strip('"') for part in entry.split("="))
    root = tmp_path_factory.mktemp("site")
    package = target.split(":")[0]
    (root / package).mkdir()
    (root / package / "__init__.py").write_text(code)
    info = root / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[commbench.methods]\n{name} = {target}\n")
    return {"name": name, "code": code, "env": {**os.environ, "PYTHONPATH": str(root)}}


def test_the_docs_example_is_one_short_file(user_package):
    assert user_package["name"] == "my-topk"
    assert len(user_package["code"].rstrip("\n").splitlines()) <= MAX_LINES


def _run(user_package, backend: str, out: Path) -> tuple[dict, bytes]:
    proc = subprocess.run([str(COMMBENCH), *RUN, "--method", user_package["name"], "--backend", backend,
                           "--results", str(out)], capture_output=True, text=True, env=user_package["env"],
                          timeout=600, cwd=out.parent)
    assert proc.returncode == 0 and ": done" in proc.stdout, (backend, proc.stdout, proc.stderr[-3000:])
    (record_path,) = (out / "runs").glob("*.json")
    record = json.loads(record_path.read_text())
    return record, (out / "weights" / f"{record['run_id']}.pt").read_bytes()


def test_a_users_package_runs_by_name_under_sim_and_dist_with_the_same_weights_and_bytes(user_package, tmp_path):
    sim, sim_weights = _run(user_package, "sim", tmp_path / "sim")
    dist, dist_weights = _run(user_package, "dist", tmp_path / "dist")
    assert sim["metrics"]["final_weights"] == dist["metrics"]["final_weights"]
    assert sim["metrics"]["bytes_sent"] == dist["metrics"]["bytes_sent"] > 0
    # each worker sends k = 5% of each tensor's elements a step, an int32 index and a float32 value each
    import torch

    weights = torch.load(io.BytesIO(sim_weights))
    per_step = 8 * sum(max(1, int(t.numel() * 0.05)) for t in weights.values())
    assert sim["metrics"]["bytes_sent"] == 3 * 2 * per_step  # 3 steps, the 2 workers' bytes summed


def test_the_contract_report_checks_a_users_compressor(user_package, tmp_path):
    proc = subprocess.run([str(COMMBENCH), "compressors", "--method", user_package["name"], "--format", "csv"],
                          capture_output=True, text=True, env=user_package["env"], timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["compressor"] for r in rows] == ["my-topk"], proc.stdout
    row = rows[0]
    assert row["bytes_formula"] == "exact" and row["verdict"] == "holds", row
    assert row["declared_linear"] == "False" and row["linear_holds"] == "False"  # top-k: gathered, not summed
