"""GRACE's released ResNet-20 runs as a peer reference (results/paper/grace.csv): its rows are judged by the
same rule as the papers', from the runs of the grid that reproduces its setting (grace-resnet20), and from
nothing else."""
from __future__ import annotations

import json

import pytest

from commbench.analysis.papers.reference import PAPER_DIR, PAPERS
from commbench.analysis.papers.tables import build, rows
from commbench.config.grid import expand, find_grid, load_grid

from ..conftest import commbench


def _grid_record(results, cfg, best: float, seed: int, params: dict | None = None, drop: float = 0.002) -> None:
    """A done record of one of the grace-resnet20 grid's runs (its resolved configuration, ``seed``), whose best
    per-epoch top-1 was ``best`` and final one ``drop`` lower."""
    config = {**cfg.to_dict(), "seed": seed}
    config["method_params"] = {**config["method_params"], **(params or {})}
    run_id = f"{config['method']}-{seed}-{len(list((results / 'runs').glob('*.json')))}"
    record = {"schema_version": 1, "run_id": run_id, "status": "done", "config": config,
              "data": {"dataset": "cifar10-jpeg", "synthetic": False, "substitute_for": "cifar10"},
              "metrics": {"top1": best - drop, "top1_best": best, "top1_best_step": 3900, "top5": 0.99,
                          "steps": config["steps"], "bytes_sent": 1, "bytes_received": 1, "bytes_fp32_equiv": 4},
              "history": [], "env": {}}
    (results / "runs" / f"{run_id}.json").write_text(json.dumps(record))


@pytest.fixture
def grace_runs(tmp_path):
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    configs = {c.method: c for c in expand(load_grid(find_grid("grace-resnet20"))) if c.seed == 1}
    for seed, (base, tern) in enumerate([(0.905, 0.901), (0.907, 0.903), (0.903, 0.900)], start=1):
        _grid_record(results, configs["baseline"], base, seed)
        _grid_record(results, configs["terngrad"], tern, seed, drop=0.004)  # its final gaps 0.2 points wider
        # TernGrad with the paper's shared scaler (Eq. 4) is not GRACE's TernGrad: never in its row
        _grid_record(results, configs["terngrad"], 0.80, seed, {"scaler_sharing": True})
    return results


def test_the_peer_rows_are_judged_from_the_grids_runs_only_and_on_the_best_top1(grace_runs):
    base, tern = build("grace", grace_runs, PAPER_DIR)
    assert base.values == pytest.approx([90.5, 90.7, 90.3])  # the best per-epoch top-1, as GRACE reports
    assert tern.values == pytest.approx([90.1, 90.3, 90.0])  # the shared-scaler runs (80%) are not GRACE's
    by_row = {r["row"]: r for r in rows([base, tern])}
    gap = by_row["ResNet-20 (resnet20_v2), TernGrad, 8 V100s"]
    assert (gap["paper gap"], gap["our gap"], gap["n"], gap["paired seeds"]) == ("-0.38", "-0.37", "3", "3")
    # half the schedule with the drops at their places, GRACE's lr, optimizer and momentum form: nothing differs
    # but the data, the length (half, which the rule accepts) and the simulated workers
    assert gap["differs"] == "data: cifar10-jpeg for cifar10; shortened: 4,009 of 8,018 iterations; simulated workers"
    # the rule then asks for power: its 0.25-point margin on 10,000 test images (GRACE's own run is a sample too,
    # and our binomial floor is 0.42 points) is far below the 4.8 SE TOST needs at 2 degrees of freedom, whatever
    # the seeds say (their paired gaps, -0.4, -0.4, -0.3, sit on GRACE's), so no verdict, and the row says why
    assert gap["verdict"] == "untestable here" and gap["why"].startswith(
        "no power: the equivalence (TOST) test needs 0.25 points to span 4.8 SE at 2 degrees of freedom")
    assert gap["seeds to decide"] == ">50"
    assert by_row["ResNet-20 (resnet20_v2), no compression (none), 8 V100s"]["verdict"] == "untestable here"


def test_the_peer_row_states_the_final_gap_beside_the_best_one_with_its_interval(grace_runs):
    base, tern = build("grace", grace_runs, PAPER_DIR)
    gap = {r["row"]: r for r in rows([base, tern])}["ResNet-20 (resnet20_v2), TernGrad, 8 V100s"]
    assert "best top-1 gap to the baseline here -0.37" in gap["why"]
    # the last evaluations' gaps are -0.6, -0.6, -0.5: their mean, and the 95% interval of the binomial floor
    # (no correctness bits in these records), 1.96 x sqrt(p1 q1 + p2 q2) over 10,000 images at the mean accuracies
    p1, p2 = (0.901 + 0.903 + 0.900) / 3 - 0.004, (0.905 + 0.907 + 0.903) / 3 - 0.002
    half = 1.96 * 100 * ((p1 * (1 - p1) + p2 * (1 - p2)) / 10_000) ** 0.5
    final = (-0.6 - 0.6 - 0.5) / 3
    assert gap["why"].endswith(f"; the final top-1 gap (the last evaluation) {final:+.2f}, 95% interval "
                               f"[{final - half:+.2f}, {final + half:+.2f}] (n=3 paired seeds, SE {half / 1.96:.2f}, "
                               f"binomial floor over 10,000 test images)")
    # the verdict's own numbers stay the best gap's
    assert float(gap["tested"]) == pytest.approx((-0.4 - 0.4 - 0.3) / 3 + 0.38, abs=5e-4)


def test_the_peer_is_listed_with_the_papers_and_named_as_a_peer(grace_runs):
    assert "a peer's reproduction" in PAPERS["grace"]
    done = commbench("table", "--results", str(grace_runs), "--paper", "grace", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert "90.97" in done.stdout and "90.59" in done.stdout and "-0.38" in done.stdout
