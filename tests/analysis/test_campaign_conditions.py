"""Each campaign grid's stand-in runs carry the training conditions of the paper experiment they stand in for;
what still differs is named by the tables, and only what the stand-in cannot share (its own learning rate,
weight decay or batch)."""
from __future__ import annotations

import dataclasses

import pytest

from commbench.config.grid import expand, load_grid
from commbench.analysis.papers.conditions import condition_markers, coverage, describe_shape, schedule_shape
from commbench.analysis.papers.evidence import LENGTH_SHARE
from commbench.analysis.papers.reference import Reference
from commbench.analysis.papers.differs import markers
from commbench.analysis.runs import as_run

from ..conftest import REPO

GRIDS = REPO / "bench" / "grids" / "campaign"
CONDITIONS = ("optimizer:", "momentum form", "lr schedule", "evaluated on", "momentum 0")


def row(task: str, method: str, optimizer: str | None = None, workers: int | None = None) -> Reference:
    fields = {f.name: None for f in dataclasses.fields(Reference)}
    fields.update(paper="p", source="s", row="r", task=task, method=method, optimizer=optimizer, workers=workers,
                  metric="top1", value=1.0, unit="%")
    return Reference(**fields)


CASES = {  # grid -> the paper row its runs stand in for
    "threshold-tables": row("nin-imagenet", "wgt", "momentum", 8),
    "threshold-shares": row("nin-imagenet", "wgt", "momentum", 8),
    "ssdsgd-table2": row("resnet20-cifar10", "ssdsgd", "momentum", 4),
    "ssdsgd-fig4-fig5": row("resnet20-cifar10", "ssdsgd", "momentum", 4),
    "ssdsgd-table2-lenet": row("resnet20-cifar10", "ssdsgd", "momentum", 4),
    "terngrad-table1": row("cifarnet-cifar10", "terngrad", "adam", 2),
    "terngrad-table2": row("alexnet-imagenet", "terngrad", "momentum", 2),
}


@pytest.mark.parametrize("grid", sorted(CASES))
def test_a_stand_in_grid_trains_under_the_papers_conditions(grid):
    runs = expand(load_grid(GRIDS / f"{grid}.yaml"))
    for cfg in runs:
        if CASES[grid].workers and cfg.workers != CASES[grid].workers:
            continue
        departures = [m for m in condition_markers(cfg, CASES[grid]) if m.startswith(CONDITIONS)]
        assert departures == [], (cfg.run_id, departures)


def test_the_old_lenet_recipe_departs_from_nins_conditions_and_the_table_says_how():
    lenet = expand(load_grid(GRIDS / "terngrad-fig3.yaml"))[0]
    said = condition_markers(lenet, CASES["threshold-tables"])
    assert "momentum form: lr outside the momentum (torch, TF) for lr inside the momentum (Caffe, MXNet)" in said
    assert "lr schedule: polynomial decay (power 0.5) to 0 for x0.1 at 45%, 91% of the run" in said
    assert "evaluated on a 0.9999 moving average, the paper on the raw weights" in said


def test_schedule_shapes_are_relative_to_each_runs_length():
    nin = schedule_shape({"kind": "step", "gamma": 0.1, "step_size": 100_000}, 220_000)
    assert describe_shape(nin) == "x0.1 at 45%, 91% of the run"
    assert schedule_shape({"kind": "step", "gamma": 0.1, "step_size": 100_000}, 1000) == ("fixed", 0.0)
    resnet = schedule_shape({"kind": "multistep", "gamma": 0.1, "milestones": [7813, 11719]}, 15625)
    assert describe_shape(resnet) == "x0.1 at 50%, 75% of the run"


# the grids whose rows issue 39 asks the verdict rule to judge (item 3): every run must pass the length gate
JUDGED = {"terngrad-table2": row("alexnet-imagenet", "terngrad", "momentum", 2),
          "ssdsgd-fig4-fig5": row("resnet20-cifar10", "ssdsgd", "momentum", 4),
          "ssdsgd-table2-lenet": row("resnet20-cifar10", "ssdsgd", "momentum", 4),
          "threshold-shares": row("nin-imagenet", "wgt", "momentum", 8)}


@pytest.mark.parametrize("grid", sorted(JUDGED))
def test_a_judged_stand_in_grid_covers_half_its_recipe_with_the_drops_in_place(grid):
    for cfg in expand(load_grid(GRIDS / f"{grid}.yaml")):
        covered = coverage(as_run({"config": cfg.to_dict()}), JUDGED[grid])
        assert covered.share >= LENGTH_SHARE, (cfg.run_id, covered.describe())
        assert covered.complete, (cfg.run_id, covered.shape)


def test_the_length_gate_fails_a_grid_at_40_percent_of_its_recipe():
    cfg = expand(load_grid(GRIDS / "ssdsgd-fig4-fig5.yaml"))[0].to_dict()
    cfg.update(steps=2000, lr_schedule={**cfg["lr_schedule"], "milestones": [1000, 1500]})
    covered = coverage(as_run({"config": cfg}), JUDGED["ssdsgd-fig4-fig5"])
    assert covered.share == pytest.approx(0.4) and covered.complete


def test_a_worker_that_stands_for_a_machine_names_its_batchnorm_slices():
    """Table 2's ResNet-20 runs put 128 images on a simulated worker (one of the paper's 4-GPU machines) with
    BatchNorm over the paper's 32-image per-GPU batch; the row names the slices, and does not where they differ."""
    cfg = next(c for c in expand(load_grid(GRIDS / "ssdsgd-table2-half.yaml"))
               if c.task == "resnet20-cifar10").to_dict()
    ref = dataclasses.replace(row("resnet20-cifar10", "ssdsgd", "momentum", 4), batch_per_worker=32)
    assert "128/worker for 32, BatchNorm over 32-image slices" in markers([as_run({"config": cfg})], ref, None)
    unsliced = {**cfg, "model_options": {}}
    assert "128/worker for 32" in markers([as_run({"config": unsliced})], ref, None)
