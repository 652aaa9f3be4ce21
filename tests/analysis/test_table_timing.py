"""Honest timing in the comparison table: a speed (images/s), a time to target or a speed-up against the strongest
baseline only from runs timed alone on one machine (real processes: backend dist; the emulated network's runs);
simulated workers' rows leave those columns empty and say why. And the tier column says when a run is shorter
than its tier's recipe."""
from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from commbench.analysis.table import comparison, comparison_data, records_frame, render, tier_steps

from ..helpers import write_record

WITHHELD = "— (sim: not timed alone)"


def timed_runs(root, method: str, seconds_by_seed: dict, backend: str, steps: int = 600) -> None:
    """Runs whose history first reaches top-1 0.98 at the given training seconds, target declared."""
    for seed, seconds in seconds_by_seed.items():
        run_id = f"{method}-{backend}-{seed}"
        record = write_record(root, run_id, method=method, seed=seed, top1=0.985, steps=steps, backend=backend,
                              images_per_s=1000.0 / seconds, config={"eval_target": 0.98})
        record["history"] = [{"step": s, "top1": 0.985 if s * 0.1 >= seconds else 0.97, "train_s": s * 0.1}
                             for s in range(50, steps + 1, 50)]
        (root / "runs" / f"{run_id}.json").write_text(json.dumps(record))


@pytest.fixture
def both_backends(tmp_path):
    for backend in ("sim", "dist"):
        timed_runs(tmp_path, "baseline", {1: 40, 2: 50}, backend)
        timed_runs(tmp_path, "terngrad", {1: 20, 2: 25}, backend)
    return tmp_path


def test_a_sim_row_shows_no_speed_and_says_why_and_a_dist_row_shows_its_numbers(both_backends):
    shown = comparison(records_frame(both_backends)).set_index(["backend", "method"])
    for column in ("images/s", "time to target (s)", "vs strongest baseline"):
        assert shown.loc[("sim", "terngrad"), column] == WITHHELD, column
        assert shown.loc[("sim", "baseline"), column] == WITHHELD, column
    dist = shown.loc[("dist", "terngrad")]
    assert dist["images/s"] == "45 ± 7" and dist["time to target (s)"] == "22.5"
    speedup = dist["vs strongest baseline"]
    assert speedup.startswith("2.00x") and speedup.endswith("vs baseline (2 pairs)")
    # what is not a speed stays: the accuracy and the bytes
    assert shown.loc[("sim", "terngrad"), "top1"] == "0.9850 ± 0.0000"


def test_the_data_forms_leave_a_sim_rows_speed_empty_and_name_the_reason(both_backends):
    data = comparison_data(records_frame(both_backends)).set_index(["backend", "method"])
    sim, dist = data.loc[("sim", "terngrad")], data.loc[("dist", "terngrad")]
    assert sim["speed_withheld"] == "sim: not timed alone" and dist["speed_withheld"] == ""
    for column in ("images_per_s_mean", "time_to_target_s", "speedup_vs_strongest", "strongest_baseline"):
        assert pd.isna(sim[column]), column
        assert not pd.isna(dist[column]), column
    table = pd.read_csv(io.StringIO(render(comparison_data(records_frame(both_backends)), "csv")))
    rows = table.set_index(["backend", "method"])
    assert pd.isna(rows.loc[("sim", "baseline"), "images_per_s_mean"])
    assert rows.loc[("sim", "baseline"), "speed_withheld"] == "sim: not timed alone"
    assert pd.isna(rows.loc[("dist", "baseline"), "speed_withheld"])  # empty: nothing withheld
    parsed = json.loads(render(comparison_data(records_frame(both_backends)), "json"))
    sim_rows = [r for r in parsed if r["backend"] == "sim"]
    assert sim_rows and all(r["images_per_s_mean"] is None and r["time_to_target_s"] is None for r in sim_rows)


def test_an_emulated_network_run_is_timed():
    from commbench.analysis.table import not_timed_alone

    assert not_timed_alone({"backend": "dist", "net": "100mbit"}) == ""
    assert not_timed_alone({"backend": "dist"}) == ""
    assert not_timed_alone({"backend": "sim"}) == "sim: not timed alone"


@pytest.mark.parametrize("tier, steps, shown", [
    ("paper", 600, "paper, shortened (of 10,000)"),
    ("paper", 10_000, "paper"),
    ("cpu", 500, "cpu, shortened (of 2,000)"),
    ("smoke", 300, "smoke"),
])
def test_the_tier_says_shortened_when_a_run_is_shorter_than_its_tiers_recipe(tmp_path, tier, steps, shown):
    write_record(tmp_path, "run", tier=tier, steps=steps)
    assert comparison(records_frame(tmp_path)).loc[0, "tier"] == shown
    data = comparison_data(records_frame(tmp_path)).iloc[0]
    assert data["tier"] == tier and data["planned_steps"] == steps  # the data keep the tier's plain name


def test_an_interrupted_run_is_shortened_by_its_plan_not_by_where_it_stopped(tmp_path):
    record = write_record(tmp_path, "stopped", status="interrupted", steps=10_000)
    record["metrics"]["steps"] = 1_848
    (tmp_path / "runs" / "stopped.json").write_text(json.dumps(record))
    assert comparison(records_frame(tmp_path)).loc[0, "tier"] == "paper"


def test_the_tiers_steps_come_from_the_task_its_recipe_and_its_tier():
    assert tier_steps({"task": "lenet-mnist", "tier": "paper", "recipe": "momentum", "method": "terngrad"}) == 10_000
    assert tier_steps({"task": "lenet-mnist", "tier": "smoke", "method": "baseline"}) == 300
    assert tier_steps({"task": "cifarnet-cifar10", "tier": "paper", "recipe": "16-workers"}) == 18_750
    assert tier_steps({"task": "cifarnet-cifar10", "tier": "cpu", "recipe": "16-workers"}) == 3_000
    assert tier_steps({"task": "no-such-task", "tier": "paper"}) is None
    assert tier_steps({"task": "lenet-mnist", "tier": "paper", "recipe": "no-such-recipe"}) is None
