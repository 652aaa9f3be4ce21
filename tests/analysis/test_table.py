"""The comparison table: one row per setting (everything in the run id but the seed), n its seeds, a column
that names what differs between rows that would otherwise look alike; the machine-readable forms."""
from __future__ import annotations

import io
import json

import pandas as pd
import pytest

import commbench
from commbench.analysis.table import comparison, comparison_data, records_frame, render

from ..conftest import commbench as run_cli
from ..helpers import write_record

LR = "lr_schedule"


def write_runs(root, seeds, **change):
    """Runs of one setting (``change`` applied to the config of a LeNet baseline), one per seed."""
    lr = change.pop(LR, None)
    for seed in seeds:
        tag = "-".join(f"{k}{v}" for k, v in sorted(change.items())).replace(".", "") + f"lr{lr}"
        record = write_record(root, f"run-{tag}-s{seed}", seed=seed, top1=0.90 + seed / 100, config=dict(change))
        if lr is not None:  # the base learning rate lives inside the schedule
            record["config"][LR] = {**record["config"][LR], "base_lr": lr}
            (root / "runs" / f"run-{tag}-s{seed}.json").write_text(json.dumps(record))


@pytest.mark.parametrize("field,values,shown", [
    (LR, (0.01, 0.1), "lr_schedule.base_lr="),
    ("net", ("1gbit", "100mbit"), "net="),
    ("recipe", ("momentum", "vanilla"), "recipe="),
    ("global_batch", (64, 128), "global_batch="),
])
def test_settings_that_differ_in_one_field_are_separate_rows_with_their_own_seeds(tmp_path, field, values, shown):
    first, second = values
    write_runs(tmp_path, [1, 2], **{field: first})
    write_runs(tmp_path, [1, 2, 3], **{field: second})
    data = comparison_data(records_frame(tmp_path))
    assert len(data) == 2 and sorted(data["n_runs"]) == [2, 3]
    by_n = {row["n_runs"]: row for _, row in data.iterrows()}
    assert by_n[2]["seeds"] == "1 2" and by_n[3]["seeds"] == "1 2 3"
    assert by_n[2]["top1_mean"] == pytest.approx(0.915) and by_n[3]["top1_mean"] == pytest.approx(0.92)
    assert f"{shown}{first}" in by_n[2]["differs"] and f"{shown}{second}" in by_n[3]["differs"]
    text = render(comparison(records_frame(tmp_path)), "md")
    assert f"{shown}{first}" in text and f"{shown}{second}" in text


def test_seeds_of_one_setting_share_a_row_and_nothing_differs(tmp_path):
    write_runs(tmp_path, [1, 2, 3])
    data = comparison_data(records_frame(tmp_path))
    assert len(data) == 1 and data.loc[0, "n_runs"] == 3 and data.loc[0, "differs"] == ""
    assert data.loc[0, "top1_std"] == pytest.approx(0.01)


def test_the_csv_is_plain_numbers_that_pandas_reads_as_such(tmp_path):
    write_runs(tmp_path, [1, 2], net="1gbit")
    write_runs(tmp_path, [1], net="100mbit")
    proc = run_cli("table", "--results", str(tmp_path), "--format", "csv")
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(io.StringIO(proc.stdout))
    for column in ("workers", "steps", "n_runs", "top1_mean", "bytes_sent_per_worker_step", "images_per_s_mean"):
        assert pd.api.types.is_numeric_dtype(table[column]), column
    assert table["top1_mean"].between(0, 1).all()  # a fraction, as in the records
    parsed = json.loads(run_cli("table", "--results", str(tmp_path), "--format", "json").stdout)
    assert {row["n_runs"] for row in parsed} == {1, 2}


def test_load_records_gives_one_column_per_setting_and_metric(tmp_path):
    write_runs(tmp_path, [1, 2], net="1gbit")
    runs = commbench.load_records(tmp_path)
    assert len(runs) == 2 and list(runs["config.seed"]) == [1, 2]
    assert {"config.net", "config.optimizer.name", "config.lr_schedule.base_lr", "metrics.top1",
            "metrics.bytes_sent", "data.dataset"} <= set(runs.columns)
    assert pd.api.types.is_float_dtype(runs["metrics.top1"]) and pd.api.types.is_integer_dtype(runs["config.seed"])
    assert runs.groupby("config.net")["metrics.top1"].mean().iloc[0] == pytest.approx(0.915)


def test_time_to_target_is_unknown_where_the_history_has_no_train_s(tmp_path):
    """Older records' history points carry no train_s: their time to a target is unknown, not "not reached",
    even when their top-1 is above it; a run that does carry it and stays below reads "not reached"."""
    import json as json_module

    def with_history(run_id, top1, points, **kw):
        record = write_record(tmp_path, run_id, top1=top1, **kw)
        record["history"] = points
        (tmp_path / "runs" / f"{run_id}.json").write_text(json_module.dumps(record))

    untimed = [{"step": 5, "top1": 0.80}, {"step": 10, "top1": 0.87}]
    with_history("old", 0.87, untimed)
    with_history("new-slow", 0.80, [{"step": 5, "top1": 0.70, "train_s": 5.0},
                                    {"step": 10, "top1": 0.80, "train_s": 10.0}], seed=1, method="terngrad")
    data = comparison_data(records_frame(tmp_path), target=0.85).set_index("method")
    assert pd.isna(data.loc["baseline", "runs_reaching_target"]) and data.loc["baseline", "runs_untimed"] == 1
    assert data.loc["terngrad", "runs_reaching_target"] == 0 and data.loc["terngrad", "runs_untimed"] == 0
    shown = comparison(records_frame(tmp_path), target=0.85).set_index("method")["time to target (s)"]
    assert shown["baseline"] == "unknown (the history has no train_s)"
    assert shown["terngrad"] == "not reached within 10000 steps (target top-1 0.8500)"


def test_a_run_resumed_on_other_hardware_is_not_timed(tmp_path):
    """Its train_s sums seconds from two machines: no time to target from it, as from a history without train_s;
    a run resumed on the device it started on keeps its clock."""
    import json as json_module

    timed = [{"step": 5, "top1": 0.86, "train_s": 5.0}, {"step": 10, "top1": 0.87, "train_s": 10.0}]
    for run_id, method, devices in (("mixed", "baseline", ["cuda (NVIDIA H100 80GB HBM3)", "cpu"]),
                                    ("same", "terngrad", ["cpu", "cpu"])):
        record = write_record(tmp_path, run_id, top1=0.87, method=method)
        record["history"], record["env"] = timed, {**(record.get("env") or {}), "devices_by_stretch": devices}
        (tmp_path / "runs" / f"{run_id}.json").write_text(json_module.dumps(record))
    data = comparison_data(records_frame(tmp_path), target=0.85).set_index("method")
    assert pd.isna(data.loc["baseline", "runs_reaching_target"]) and data.loc["baseline", "runs_untimed"] == 1
    assert data.loc["terngrad", "runs_reaching_target"] == 1 and data.loc["terngrad", "runs_untimed"] == 0


def test_a_timm_model_a_sliced_batch_norm_and_bf16_show_in_the_params(tmp_path):
    write_record(tmp_path, "timm", config={"model_options": {"timm": "resnet18"}})
    write_record(tmp_path, "bf16", seed=2, config={"precision": "bf16-autocast", "model_options": {"bn_batch": 32}})
    params = set(comparison_data(records_frame(tmp_path))["params"])
    assert params == {"model.timm=resnet18", "model.bn_batch=32, precision=bf16-autocast"}


def _timed_runs(root, method, seconds_by_seed, *, target=None, steps=600, cpu=None):
    """Runs of one method whose history crosses top-1 0.98 at the given training seconds (None: never, within
    the horizon of ``steps``); ``cpu``: the CPU they say they ran on, as a name or per seed (None: unsaid)."""
    import json as json_module

    for seed, seconds in seconds_by_seed.items():
        run_id = f"{method}-{seed}"
        record = write_record(root, run_id, method=method, seed=seed, top1=0.985 if seconds else 0.97, steps=steps,
                              config={"eval_target": target} if target is not None else None)
        on = cpu.get(seed) if isinstance(cpu, dict) else cpu
        if on is not None:
            record.setdefault("env", {})["cpu_model"] = on
        crossing = seconds if seconds else 1e9
        record["history"] = [{"step": s, "top1": 0.985 if s * 0.1 >= crossing else 0.97, "train_s": s * 0.1}
                             for s in range(50, steps + 1, 50)]
        (root / "runs" / f"{run_id}.json").write_text(json_module.dumps(record))


def test_the_strongest_baseline_is_the_fastest_all_reduce_whose_every_run_reached_the_target(tmp_path):
    """fp16 beats the fp32 baseline; bf16 is faster on average but one of its runs never reached the target, so
    it cannot be the reference; TernGrad's speed-up pairs its seeds with fp16's: geometric mean of 20/10, 30/10
    and 25/20, with a t interval on the logarithms."""
    import math

    from scipy import stats

    _timed_runs(tmp_path, "baseline", {1: 40, 2: 45, 3: 50}, target=0.98)
    _timed_runs(tmp_path, "fp16", {1: 20, 2: 30, 3: 25}, target=0.98)
    _timed_runs(tmp_path, "bf16", {1: 5, 2: 5, 3: None}, target=0.98)
    _timed_runs(tmp_path, "terngrad", {1: 10, 2: 10, 3: 20}, target=0.98)
    data = comparison_data(records_frame(tmp_path)).set_index("method")
    assert set(data["strongest_baseline"]) == {"fp16"} and set(data["target_source"]) == {"declared"}
    logs = [math.log(2), math.log(3), math.log(1.25)]
    mean, sd = sum(logs) / 3, float(pd.Series(logs).std())
    half = stats.t.ppf(0.975, 2) * sd / math.sqrt(3)
    row = data.loc["terngrad"]
    assert row["speedup_vs_strongest"] == pytest.approx(math.exp(mean))
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx((math.exp(mean - half), math.exp(mean + half)))
    assert row["speedup_pairs"] == 3 and data.loc["fp16", "speedup_vs_strongest"] == pytest.approx(1.0)
    assert data.loc["bf16", "runs_reaching_target"] == 2 and pd.isna(data.loc["bf16", "speedup_vs_strongest"])
    shown = comparison(records_frame(tmp_path)).set_index("method")["vs strongest baseline"]
    assert shown["terngrad"].startswith(f"{math.exp(mean):.2f}x [") and shown["terngrad"].endswith("vs fp16 (3 pairs)")
    assert shown["bf16"] == "—"


def test_a_target_no_run_reaches_within_the_horizon_is_censored_not_timed(tmp_path):
    _timed_runs(tmp_path, "baseline", {1: None, 2: None}, target=0.98, steps=300)
    _timed_runs(tmp_path, "terngrad", {1: 10, 2: None}, target=0.98, steps=300)
    data = comparison_data(records_frame(tmp_path)).set_index("method")
    assert pd.isna(data.loc["baseline", "time_to_target_s"]) and data.loc["baseline", "runs_reaching_target"] == 0
    assert data["strongest_baseline"].isna().all() and data["speedup_vs_strongest"].isna().all()
    shown = comparison(records_frame(tmp_path)).set_index("method")
    assert shown.loc["baseline", "time to target (s)"] == "not reached within 300 steps (target top-1 0.9800)"
    assert shown.loc["terngrad", "time to target (s)"] == "10.0 (1 of 2)"


def test_the_readers_target_overrides_the_declared_one_and_a_derived_target_says_so(tmp_path):
    _timed_runs(tmp_path, "baseline", {1: 40}, target=0.98)
    assert comparison_data(records_frame(tmp_path), target=0.9)["target_source"].tolist() == ["given"]
    other = tmp_path / "undeclared"
    _timed_runs(other, "baseline", {1: 40})
    row = comparison_data(records_frame(other)).iloc[0]
    assert row["target_source"] == "derived" and row["target_top1"] == pytest.approx(0.985 - 0.005)


def test_times_compare_only_on_one_cpu(tmp_path):
    """A method timed on two CPUs gets no time to target (the row names both); an arm is measured against the
    strongest baseline timed on its own CPU, never against a faster machine's."""
    fast, slow = "Intel Xeon (cpu family 6, model 143)", "AMD EPYC (cpu family 25, model 1)"
    _timed_runs(tmp_path, "baseline", {1: 40, 2: 50}, target=0.98, cpu=slow)
    _timed_runs(tmp_path, "fp16", {1: 10, 2: 11}, target=0.98, cpu=fast)            # fastest, but elsewhere
    _timed_runs(tmp_path, "terngrad", {1: 20, 2: 25}, target=0.98, cpu=slow)
    _timed_runs(tmp_path, "qgt", {1: 20, 2: 22}, target=0.98, cpu={1: slow, 2: fast})
    data = comparison_data(records_frame(tmp_path)).set_index("method")
    assert data.loc["terngrad", "strongest_baseline"] == "baseline"
    assert data.loc["terngrad", "speedup_vs_strongest"] == pytest.approx(2.0)
    assert data.loc["terngrad", "timing_cpu"] == slow
    assert data.loc["fp16", "strongest_baseline"] == "fp16"  # alone on its CPU: its own reference
    assert pd.isna(data.loc["qgt", "time_to_target_s"]) and pd.isna(data.loc["qgt", "speedup_vs_strongest"])
    assert data.loc["qgt", "timing_cpu"] == f"mixed: {slow} (1); {fast} (1)"
    shown = comparison(records_frame(tmp_path)).set_index("method")["time to target (s)"]
    assert shown["qgt"] == f"none (timed on more than one CPU: {slow} (1); {fast} (1))"


def test_records_that_do_not_name_their_cpu_count_as_one_unknown_cpu(tmp_path):
    _timed_runs(tmp_path, "baseline", {1: 40, 2: 40}, target=0.98)
    _timed_runs(tmp_path, "terngrad", {1: 20, 2: 20}, target=0.98)
    _timed_runs(tmp_path, "qgt", {1: 20, 2: 20}, target=0.98, cpu={1: "AMD EPYC (cpu family 25, model 1)"})
    data = comparison_data(records_frame(tmp_path)).set_index("method")
    assert data.loc["terngrad", "speedup_vs_strongest"] == pytest.approx(2.0)
    assert data.loc["terngrad", "timing_cpu"] == "unknown CPU"
    assert data.loc["qgt", "timing_cpu"].startswith("mixed: ") and pd.isna(data.loc["qgt", "speedup_vs_strongest"])


def test_a_real_data_row_beside_a_stand_in_row_names_no_substitute(tmp_path):
    """pandas fills the stand-in column of the real-data rows with NaN, which is truthy: the row must read
    'mnist', not 'mnist (for nan)'."""
    write_record(tmp_path, "real", dataset="mnist")
    write_record(tmp_path, "stand-in", dataset="fashion-mnist", substitute="mnist", seed=2)
    shown = set(comparison(records_frame(tmp_path))["dataset"])
    assert shown == {"mnist", "fashion-mnist (for mnist)"}


def test_the_table_says_which_runs_are_checkpointed_part_way_and_not_in_it_yet(tmp_path):
    """A campaign's table is read while runs are under way: stderr names each run checkpointed part-way (its step)
    whose record is not finished, and no finished run, so that no one takes the table for the whole evidence."""
    def checkpoint(run_id: str, step: int) -> None:
        folder = tmp_path / "campaign" / "checkpoints" / run_id
        (folder / f"step-{step:09d}").mkdir(parents=True)
        (folder / f"step-{step:09d}" / "sim.pt").write_bytes(b"")
        (folder / "latest.json").write_text(json.dumps({"step": step, "folder": f"step-{step:09d}",
                                                         "files": ["sim.pt"]}))

    write_record(tmp_path / "campaign", "finished", seed=1)
    write_record(tmp_path / "campaign", "stopped", seed=2, status="interrupted")
    proc = run_cli("table", "--results", str(tmp_path))
    assert proc.returncode == 0 and "checkpointed part-way" not in proc.stderr, proc.stderr
    checkpoint("stopped", 1848)
    checkpoint("never-recorded", 250)
    checkpoint("finished", 500)  # a finished run's checkpoint left behind is not under way
    proc = run_cli("table", "--results", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert ("not in these tables yet, 2 runs checkpointed part-way (a sweep of its grid resumes it): "
            "never-recorded at step 250, stopped at step 1,848") in proc.stderr
    assert "finished at step" not in proc.stderr
