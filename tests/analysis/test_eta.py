"""The time left of a grid, from the step times of finished runs like its runs."""
from __future__ import annotations

import pytest

from commbench.analysis.eta import describe, step_seconds, time_left

KIND = ("lenet-mnist",)  # a step time's key: task, method, workers, backend, data set, batch, link, node link,
CPU_FP32 = ("fp32", None, (), "cpu")  # ... precision, threads, model options, device


def done(method: str, workers: int, train_s: float, steps: int, status: str = "done", device: str = "cpu") -> dict:
    return {"status": status, "config": {"task": "lenet-mnist", "method": method, "workers": workers,
                                         "backend": "dist", "dataset": "mnist", "global_batch": 64},
            "metrics": {"train_s": train_s, "steps": steps}, "env": {"device": device}}


def test_each_kind_of_run_is_timed_by_the_mean_step_of_its_done_runs():
    records = [done("baseline", 2, 100.0, 1000), done("baseline", 2, 300.0, 1000), done("terngrad", 2, 50.0, 100),
               done("terngrad", 4, 1.0, 1, status="failed")]
    assert step_seconds(records) == {
        KIND + ("baseline", 2, "dist", "mnist", 64, None, None) + CPU_FP32: pytest.approx(0.2),
        KIND + ("terngrad", 2, "dist", "mnist", 64, None, None) + CPU_FP32: pytest.approx(0.5)}
    todo = [{**done("baseline", 2, 0, 0)["config"], "steps": 10_000},
            {**done("terngrad", 2, 0, 0)["config"], "steps": 1_000, "done_steps": 400},  # resumes at 400
            {**done("terngrad", 4, 0, 0)["config"], "steps": 1_000}]  # only a failed run of its kind: unknown
    seconds, known, unknown = time_left(todo, records)
    assert seconds == pytest.approx(0.2 * 10_000 + 0.5 * 600) and (known, unknown) == (2, 1)
    assert describe(seconds, known, unknown).startswith("about 38 min of training left for 2 runs; 1 run without")
    assert describe(7200.0, 1, 0).startswith("about 2.0 h of training left for 1 run (")
    assert describe(0.0, 0, 0) == ""


def test_a_run_resumed_on_other_hardware_lends_no_step_time():
    """Its seconds were spent on two machines (or on one this record cannot name): they time neither."""
    def resumed(train_s, devices):
        return {**done("baseline", 2, train_s, 1000), "env": {"device": "cpu", "devices_by_stretch": devices}}

    records = [done("baseline", 2, 100.0, 1000), resumed(1.0, ["cuda (NVIDIA H100 80GB HBM3)", "cpu"]),
               resumed(1.0, [None, "cpu"]), resumed(300.0, ["cpu", "cpu"])]
    assert step_seconds(records) == {
        KIND + ("baseline", 2, "dist", "mnist", 64, None, None) + CPU_FP32: pytest.approx(0.2)}


def test_a_run_on_an_emulated_link_is_timed_only_by_runs_on_that_link():
    """A speed grid's step over 100 Mbit/s takes many times one over loopback: neither times the other."""
    def on(net, train_s):
        record = done("baseline", 2, train_s, 10)
        record["config"]["net"] = net
        return record

    records = [on(None, 10.0), on("1gbit", 40.0)]
    todo = [{**on("100mbit", 0)["config"], "steps": 10}, {**on("1gbit", 0)["config"], "steps": 10}]
    seconds, known, unknown = time_left(todo, records)
    assert seconds == pytest.approx(40.0) and (known, unknown) == (1, 1)


def test_a_running_run_is_timed_by_its_own_pace_and_lends_it_to_runs_like_it():
    records = [done("baseline", 2, 100.0, 1000)]  # 0.1 s a step, measured on a quieter machine
    running = {**done("baseline", 2, 0, 0)["config"], "steps": 1_000, "done_steps": 600, "live_step_s": 0.3}
    first_of_kind = {**done("terngrad", 4, 0, 0)["config"], "steps": 500, "done_steps": 100, "live_step_s": 2.0}
    like_it = {**done("terngrad", 4, 0, 0)["config"], "steps": 1_000}  # no done run: the running one's pace
    other = {**done("terngrad", 8, 0, 0)["config"], "steps": 1_000}
    seconds, known, unknown = time_left([running, first_of_kind, like_it, other], records)
    assert seconds == pytest.approx(0.3 * 400 + 2.0 * 400 + 2.0 * 1_000) and (known, unknown) == (3, 1)


def test_a_run_is_timed_only_by_runs_of_its_precision_threads_model_and_device():
    """Each of these changes a step's cost: bf16 autocast halves it on a CPU with AMX, BatchNorm over 32-image
    slices lengthens a ResNet-20 step, a GPU's step times no step on the CPU."""
    def like(train_s=0.0, device="cpu", **config):
        record = done("ssdsgd", 4, train_s, 10, device=device)
        record["config"].update(config)
        return record

    records = [like(10.0), like(1.0, precision="bf16-autocast"), like(2.0, threads=1),
               like(3.0, model_options={"bn_batch": 32}), like(0.5, device="cuda"), like(4.0, precision="fp32")]
    fp32 = {**like()["config"], "steps": 10}  # no precision recorded: fp32, the setting's default then and now
    sliced = {**like(model_options={"bn_batch": 32})["config"], "steps": 10}
    gpu = {**like()["config"], "device": "cuda", "steps": 10}
    unlike = {**like(model_options={"bn_batch": 64})["config"], "steps": 10}
    assert time_left([fp32], records) == (pytest.approx(10 * (1.0 + 0.4) / 2), 1, 0)
    assert time_left([sliced], records) == (pytest.approx(3.0), 1, 0)
    assert time_left([fp32], records, here="cuda") == (pytest.approx(0.5), 1, 0)  # device auto on a GPU host
    assert time_left([gpu], records) == (pytest.approx(0.5), 1, 0)
    assert time_left([unlike], records) == (0.0, 0, 1)
