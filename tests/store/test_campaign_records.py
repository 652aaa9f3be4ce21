"""The committed campaign records are what the campaign grids say, and nothing else.

Every record in results/campaign/ must be a run of one of bench/grids/campaign/*.yaml (a run of some other
setting would slip into the paper tables unannounced). Every record is finished and made from committed code
(git_dirty false), so that each number in the tables can be regenerated from a named commit.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from commbench.config.grid import expand, load_grid

REPO = Path(__file__).resolve().parents[2]
RECORDS = sorted((REPO / "results" / "campaign" / "runs").glob("*.json"))


@pytest.fixture(scope="module")
def grid_runs() -> dict[str, str]:
    """run id -> the campaign grid that has it."""
    out = {}
    for grid in sorted((REPO / "bench" / "grids" / "campaign").glob("*.yaml")):
        for cfg in expand(load_grid(str(grid))):
            out.setdefault(cfg.run_id, grid.name)
    return out


def older_version(record: dict) -> bool:
    from commbench.methods import METHODS

    method = METHODS.get(record["config"].get("method"))
    return method is not None and record["config"].get("method_version", 1) < method.version


def test_there_are_campaign_records():
    assert len(RECORDS) > 0


@pytest.mark.parametrize("path", RECORDS, ids=[p.stem for p in RECORDS])
def test_each_record_is_a_finished_run_of_a_campaign_grid_from_clean_code(path, grid_runs):
    record = json.loads(path.read_text())
    assert record["run_id"] == path.stem
    # a run of an older version of its method stays until its grid runs the current version (the method's
    # version is in the run id, so the grid now names another run); the paper tables count it only where the
    # method says it computes the same (computes_as)
    assert record["run_id"] in grid_runs or older_version(record), "not a run of any bench/grids/campaign grid"
    assert record["status"] in ("done", "diverged"), record.get("error")
    assert record["env"]["git_dirty"] is False and len(record["env"]["git_sha"]) == 40


def test_results_readme_quotes_the_totals_of_the_committed_records():
    """results/README.md quotes the paper tables' totals line; a change to the records or to the rule that moves
    a verdict must move the quote with it."""
    import re

    from commbench.analysis.papers.tables import build, rows, totals_line

    readme = (REPO / "results" / "README.md").read_text()
    quoted = " ".join(line[2:].strip() for line in readme.splitlines() if line.startswith("> "))
    live = totals_line(rows(build("all", REPO / "results")))
    assert re.sub(r"\s+", " ", live) in quoted


def test_campaign_checkpoints_are_carried_in_git_and_every_other_results_folders_are_not():
    """A ResNet-20 run of the campaign outlasts a session: its checkpoint is committed when the session stops the
    campaign, and a fresh checkout resumes it. Nowhere else are checkpoints meant for git."""
    import subprocess

    def ignored(path: str) -> bool:
        done = subprocess.run(["git", "check-ignore", "-q", path], cwd=REPO)
        if done.returncode == 128:
            pytest.skip("not a git checkout")
        return done.returncode == 0

    assert not ignored("results/campaign/checkpoints/some-run/step-000000250/sim.pt")
    assert ignored("local-results/checkpoints/some-run/step-000000250/sim.pt")
    assert ignored("results/smoke/checkpoints/some-run/latest.json")
    assert ignored("results/campaign/logs/some-run.log")


def test_each_carried_checkpoint_is_of_an_unfinished_campaign_run(grid_runs):
    """A carried checkpoint belongs to a run of a campaign grid that has no finished record (a finished run
    removes its checkpoint) and names files that are there, so that `make campaign` resumes it."""
    carried = sorted((REPO / "results" / "campaign" / "checkpoints").glob("*/latest.json"))
    for latest in carried:
        run_id = latest.parent.name
        assert run_id in grid_runs, f"{run_id}: a checkpoint of no campaign grid's run"
        assert not (REPO / "results" / "campaign" / "runs" / f"{run_id}.json").exists() or json.loads(
            (REPO / "results" / "campaign" / "runs" / f"{run_id}.json").read_text())["status"] == "interrupted", \
            f"{run_id}: finished, yet its checkpoint is still carried"
        named = json.loads(latest.read_text())
        for name in named["files"]:
            assert (latest.parent / named["folder"] / name).is_file(), f"{run_id}: {name} missing"
