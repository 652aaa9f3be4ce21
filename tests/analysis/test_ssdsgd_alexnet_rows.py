"""SSD-SGD's AlexNet rows (Sec. 4.6: its size, Fig. 7's speed-ups) are judged on MXNet's AlexNet, the network the
authors' alex.sh runs (alexnet-mxnet-imagenet), not on TernGrad's AlexNet-BN; Fig. 7's batch-32 row is declared by
network-ssdsgd-mxnet.yaml alone, and until that grid runs the row says which command fills it."""
from __future__ import annotations

import json
from pathlib import Path

from commbench.analysis.papers.cell import Cell
from commbench.analysis.papers.reference import PAPER_DIR, load_declarations, load_references
from commbench.analysis.papers.reproduce import reproduce
from commbench.analysis.papers.speed_rows import declared_links, why_unmeasured
from commbench.analysis.runs import as_run

REPO = Path(__file__).resolve().parents[2]
TASK = "alexnet-mxnet-imagenet"
GRID = "bench/grids/campaign/network-ssdsgd-mxnet.yaml"


def alexnet_rows() -> list:
    return [r for r in load_references("ssdsgd", PAPER_DIR) if "AlexNet" in r.row]


def fig7_row(batch: int):
    [row] = [r for r in alexnet_rows() if r.metric == "speedup_pct" and r.batch_per_worker == batch]
    return row


def test_ssdsgds_alexnet_rows_name_mxnets_alexnet():
    rows = alexnet_rows()
    assert {(r.metric, r.batch_per_worker) for r in rows} == {("model_size", None), ("speedup_pct", 64),
                                                               ("speedup_pct", 32)}
    assert {r.task for r in rows} == {TASK}
    assert not [r for r in load_references("ssdsgd", PAPER_DIR) if r.task == "alexnet-imagenet"]


def test_the_committed_size_record_is_the_papers_203_4_mb():
    [path] = (REPO / "results" / "campaign" / "runs").glob(f"{TASK}_baseline_w1_*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "done" and record["metrics"]["parameters"] == 50_844_008
    [size] = [r for r in alexnet_rows() if r.metric == "model_size"]
    assert abs(4 * record["metrics"]["parameters"] / 1e6 - size.value) / size.value < 0.01


def test_only_the_mxnet_grid_declares_figure_7s_alexnet():
    declared = [d for d in load_declarations() if d.paper == "ssdsgd" and "alexnet" in d.task]
    assert [(d.grid, d.task, d.batch_per_worker, d.workers) for d in declared] == \
        [("network-ssdsgd-mxnet", TASK, 32, 4)]
    assert "network-ssdsgd" not in {d.grid for d in load_declarations()}  # its runs time TernGrad's AlexNet-BN


def test_an_unrun_declared_row_names_the_sweep_that_fills_it():
    [declared] = [d for d in load_declarations() if d.task == TASK]
    cell = Cell(fig7_row(32))
    assert declared_links(cell, [], declared) == ([], [])
    assert cell.why_missing == (f"no run of {TASK} with its baseline yet: commbench sweep {GRID} --out "
                                f"results/campaign (root; each run alone)")


def test_runs_off_the_declared_links_say_what_is_missing_instead():
    [declared] = [d for d in load_declarations() if d.task == TASK]
    loopback = as_run({"run_id": "a", "config": {"workers": 4, "net": None}})
    assert why_unmeasured(declared, measured_any=True).startswith("no measurement of 4 workers on the declared links")
    cell = Cell(fig7_row(32))
    declared_links(cell, [(1.5, loopback)], declared)
    assert cell.why_missing == f"no measurement of 4 workers on the declared links (100mbit, 1gbit; {GRID})"


def test_figure_7s_alexnet_rows_are_missing_and_name_the_new_grid():
    references = load_references("ssdsgd", PAPER_DIR)
    for batch in (32, 64):
        cell = reproduce(fig7_row(batch), [], [], references, load_declarations())
        assert not cell.values and GRID in cell.why_missing, (batch, cell.why_missing)
