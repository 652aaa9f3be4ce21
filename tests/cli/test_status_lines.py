"""``commbench status``: a run stopped part-way shows the steps it reached (from its record's metrics, else its
history, else its checkpoint), never ``None/200``; every line names the method's parameters that tell its runs
apart (``wgt(threshold=0.005)``)."""
from __future__ import annotations

import json

import pytest

from commbench.cli import main
from commbench.config import resolve
from commbench.store.records import EMPTY_METRICS, make_record, write_record

STEPS = 200
DONE = {"steps": STEPS, "top1": 0.5, "bytes_sent": 1000, "bytes_received": 1000, "bytes_fp32_equiv": 4000}


def config(method: str = "baseline", **settings):
    return resolve({"task": "lenet-mnist", "method": method, "dataset": "synthetic", "workers": 2,
                    "backend": "sim", "steps": STEPS, **settings})


def store(out, cfg, status: str, metrics: dict, history: list | None = None, config_dict: dict | None = None):
    write_record(out, make_record(cfg.run_id, status, None if status == "done" else "stopped", config_dict or
                                  cfg.to_dict(), {}, {**EMPTY_METRICS, **metrics}, history or []))


def checkpoint(out, run_id: str, step: int) -> None:
    folder = out / "checkpoints" / run_id
    (folder / f"step-{step:09d}").mkdir(parents=True)
    (folder / f"step-{step:09d}" / "sim.pt").write_bytes(b"")
    (folder / "latest.json").write_text(json.dumps({"step": step, "folder": f"step-{step:09d}", "files": ["sim.pt"]}))


def status_lines(capsys, out, *args: str) -> dict[str, str]:
    """Each printed run's line, by run id."""
    assert main(["status", "--results", str(out), *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    return {line.split()[1] if not line.startswith("to do") else line.split()[2]: line for line in lines}


def test_a_run_stopped_before_its_metrics_shows_the_steps_its_history_reached(tmp_path, capsys):
    cfg = config()
    store(tmp_path, cfg, "interrupted", {}, [{"step": 60, "train_loss": 1.0}, {"step": 120, "train_loss": 0.5}])
    line = status_lines(capsys, tmp_path)[cfg.run_id]
    assert f"steps=120/{STEPS} " in line and "None" not in line


def test_a_run_whose_record_says_nothing_of_its_steps_shows_its_checkpoints(tmp_path, capsys):
    stopped, finished = config(seed=2), config(seed=3)
    store(tmp_path, stopped, "failed", {})
    store(tmp_path, finished, "done", DONE)
    checkpoint(tmp_path, stopped.run_id, 40)
    lines = status_lines(capsys, tmp_path)
    assert f"steps=40/{STEPS} (checkpoint)" in lines[stopped.run_id] and "None" not in lines[stopped.run_id]
    assert f"steps={STEPS}/{STEPS} top1=0.5000" in lines[finished.run_id]


def test_a_run_with_neither_says_so_without_none(tmp_path, capsys):
    cfg = config(seed=4)
    store(tmp_path, cfg, "failed", {})
    line = status_lines(capsys, tmp_path)[cfg.run_id]
    assert f"steps=-/{STEPS} " in line and "None" not in line


def test_each_line_names_the_method_parameters_the_run_set(tmp_path, capsys):
    chosen, other = config("wgt", **{"method.threshold": 0.005}), config("wgt", **{"method.threshold": 0.01})
    plain = config("terngrad")  # the recipe's parameters: the same for every run of it, not shown
    for cfg in (chosen, other, plain):
        store(tmp_path, cfg, "done", DONE)
    lines = status_lines(capsys, tmp_path)
    assert " lenet-mnist wgt(threshold=0.005) w=2 sim " in lines[chosen.run_id]
    assert " lenet-mnist wgt(threshold=0.01) w=2 sim " in lines[other.run_id]
    assert " lenet-mnist terngrad w=2 sim " in lines[plain.run_id]


def test_a_configuration_without_sources_shows_the_parameters_other_than_the_methods_defaults(tmp_path, capsys):
    cfg = config("terngrad", **{"method.packing": "base3"})
    old = {k: v for k, v in cfg.to_dict().items() if k != "sources"}
    store(tmp_path, cfg, "done", DONE, config_dict=old)
    line = status_lines(capsys, tmp_path)[cfg.run_id]
    assert "packing=base3" in line and "clip=" not in line  # clip 2.5 is TernGrad's own default


def test_a_grids_runs_to_do_name_their_parameters(tmp_path, capsys):
    grid = tmp_path / "grid.yaml"
    grid.write_text("base: {task: lenet-mnist, method: bgt, dataset: synthetic, workers: 2, steps: 20}\n"
                    "axes:\n  method.threshold: [0.001, 0.02]\n")
    results = tmp_path / "results"
    results.mkdir()
    lines = status_lines(capsys, results, "--grid", str(grid))
    assert sorted(line.split()[4] for line in lines.values()) == ["bgt(threshold=0.001)", "bgt(threshold=0.02)"]


@pytest.mark.parametrize("history", [[], [{"step": "x"}], [{"loss": 1.0}]])
def test_a_history_without_steps_reaches_nothing(history):
    from commbench.cli.status import _recorded_steps

    assert _recorded_steps({"metrics": {"steps": None}, "history": history}) is None
