"""Paper tables from hand-made records: matching, means over seeds, markers, missing rows, formats."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from commbench.config import ConfigError
from commbench.config.grid import Declaration
from commbench.analysis.papers.reference import COLUMNS, load_references
from commbench.analysis.papers.tables import build, render, rows

from ..helpers import write_record
from ..conftest import commbench


COUNTS = ("model_size", "gradients_per_iteration", "gradients_total")
SPEEDS = ("speedup", "speedup_pct", "speedup_pct_min", "speedup_pct_max")


def claim_of(ref: dict) -> str:
    """The claim a test row makes where it does not say: as results/paper/*.csv types such rows."""
    metric = ref["metric"]
    if metric in COUNTS or (ref.get("method") == "baseline" and metric in ("gb_transferred",
                                                                            "bytes_per_node_per_iteration")):
        return "count"
    if metric in SPEEDS:
        return "speedup"
    if metric in ("best_delay_steps", "warmup_steps_chosen"):
        return "ordering"
    if metric in ("top1", "top5", "gb_transferred", "pct_per_gb", "data_fraction", "throughput_images_per_s",
                  "gradient_zero_fraction", "bytes_per_node_per_iteration"):
        return "value" if ref.get("method") == "baseline" or metric not in ("top1", "top5") else "gap"
    return "gap"


def write_refs(folder: Path, paper: str, refs: list[dict], analogues: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{paper}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for ref in refs:
            writer.writerow({"paper": paper, "unit": "%", "claim": claim_of(ref), **ref})
    if analogues is not None:
        (folder / "analogues.yaml").write_text(analogues)
    return folder




TERNGRAD = {"terngrad": {"clip": 2.5, "layerwise": True}, "noclip": {"clip": 0.0, "layerwise": True}}


def test_a_row_takes_the_mean_and_std_of_its_seeds_and_the_delta_to_the_paper(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "TernGrad 2 workers", "task": "lenet-mnist", "dataset": "mnist",
         "method": "terngrad", "workers": "2", "metric": "top1", "value": "99.0"}])
    results = tmp_path / "results"
    write_record(results, "a", method="terngrad", params=TERNGRAD["terngrad"], top1=0.98, seed=1)
    write_record(results, "b", method="terngrad", params=TERNGRAD["terngrad"], top1=0.99, seed=2)
    write_record(results, "c", method="terngrad", params=TERNGRAD["noclip"], top1=0.10, seed=1)  # other variant
    write_record(results, "d", method="terngrad", params=TERNGRAD["terngrad"], top1=0.50, workers=4)  # other count
    write_record(results, "e", method="terngrad", params=TERNGRAD["terngrad"], top1=0.20, status="failed")
    [cell] = build("terngrad", results, refs)
    assert cell.values == pytest.approx([98.0, 99.0]) and sorted(cell.run_ids) == ["a", "b"]
    assert cell.mean == pytest.approx(98.5) and cell.std == pytest.approx(0.7071, abs=1e-4)
    assert cell.delta == pytest.approx(-0.5) and cell.markers == []
    [row] = rows([cell])
    assert row["reproduced"] == "98.50 ± 0.71" and row["n"] == "2" and row["delta"] == "-0.50"
    assert row["paper value"] == "99.0"  # as the reference file prints it


def test_variant_rows_match_only_their_variant(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "TernGrad", "task": "lenet-mnist", "method": "terngrad", "metric": "top1",
         "value": "99"},
        {"source": "Table 2", "row": "TernGrad-noclip", "task": "lenet-mnist", "method": "terngrad",
         "variant": "noclip", "metric": "top1", "value": "96"}])
    results = tmp_path / "results"
    write_record(results, "clip", method="terngrad", params=TERNGRAD["terngrad"], top1=0.97)
    write_record(results, "noclip", method="terngrad", params=TERNGRAD["noclip"], top1=0.93)
    clipped, unclipped = build("terngrad", results, refs)
    assert clipped.run_ids == ["clip"] and unclipped.run_ids == ["noclip"]


def test_substitutions_are_marked(tmp_path):
    refs = write_refs(tmp_path / "paper", "threshold", [
        {"source": "Section 3.1", "row": "baseline GB", "task": "nin-imagenet", "dataset": "imagenet",
         "method": "baseline", "workers": "8", "iterations": "220000", "metric": "gb_transferred", "value": "1000",
         "unit": "GB"},
        {"source": "Section 3.1", "row": "baseline", "task": "nin-imagenet", "dataset": "imagenet",
         "method": "baseline", "workers": "8", "iterations": "220000", "metric": "top1", "value": "57"},
        {"source": "Table 1", "row": "BGT T=0.01", "task": "nin-imagenet", "dataset": "imagenet", "method": "bgt",
         "workers": "8", "threshold": "0.01", "iterations": "220000", "metric": "gb_transferred", "value": "100",
         "unit": "GB"},
        {"source": "Table 1", "row": "BGT T=0.01", "task": "nin-imagenet", "dataset": "imagenet", "method": "bgt",
         "workers": "8", "threshold": "0.01", "iterations": "220000", "metric": "pct_per_gb", "value": "0.5",
         "unit": "%/GB"}],
        analogues="- {paper: threshold, task: nin-imagenet, use: {task: lenet-mnist, workers: 4},"
                  " reason: 'NiN on ImageNet does not train on 2 CPU cores'}\n")
    results = tmp_path / "results"
    write_record(results, "x", method="bgt", workers=4, backend="sim", tier="cpu", dataset="fashion-mnist",
                 substitute="mnist", params={"threshold": 0.01}, top1=0.8, steps=600, paper_bytes=400,
                 bytes_sent=1000, overrides={"steps": {"paper": 10000, "used": 600}})
    write_record(results, "y", method="bgt", workers=4, params={"threshold": 0.02}, top1=0.1)  # other threshold
    write_record(results, "x0", workers=4, backend="sim", tier="cpu", dataset="fashion-mnist", substitute="mnist",
                 top1=0.8, steps=600, overrides={"steps": {"paper": 10000, "used": 600}})
    _, accuracy, gigabytes, ratio = build("threshold", results, refs)
    assert accuracy.run_ids == ["x0"] and accuracy.mean == pytest.approx(80.0)
    assert accuracy.markers == ["model: lenet-mnist for nin-imagenet", "data: fashion-mnist for mnist",
                                "shortened: 600 of 220,000 iterations", "fewer workers: 4 of 8", "simulated workers",
                                # LeNet's own recipe against NiN's (Caffe): every condition that differs is named
                                "momentum form: lr outside the momentum (torch, TF) for lr inside the momentum "
                                "(Caffe, MXNet)",
                                "lr schedule: polynomial decay (power 0.5) to 0 for x0.1 at 45%, 91% of the run",
                                "batch 64 for 128",
                                "evaluated on a 0.9999 moving average, the paper on the raw weights",
                                "NiN on ImageNet does not train on 2 CPU cores"]
    # The stand-in's own gigabytes mean nothing for NiN: its share of the fp32 bytes (the paper's accounting,
    # metrics.paper_bytes: 400 of 4 x 1000) scales the paper's baseline, 10% of 1000 GB.
    assert gigabytes.mean == pytest.approx(100.0) and gigabytes.delta == pytest.approx(0.0)
    assert "scaled: our 10% of the fp32 bytes x the paper's baseline 1,000 GB" in gigabytes.markers
    assert ratio.mean == pytest.approx(80.0 / 100.0)


def test_a_row_takes_one_setting_the_nearest_the_papers(tmp_path):
    """Runs of different settings are never averaged: the longest here (the paper ran 10K steps), with its
    seeds; the shorter setting is counted in a marker."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "TernGrad 2 workers", "task": "lenet-mnist", "dataset": "mnist",
         "method": "terngrad", "workers": "2", "iterations": "10000", "metric": "top1", "value": "99.0"}])
    results = tmp_path / "results"
    write_record(results, "long1", method="terngrad", params=TERNGRAD["terngrad"], top1=0.98, seed=1, steps=1000)
    write_record(results, "long2", method="terngrad", params=TERNGRAD["terngrad"], top1=0.96, seed=2, steps=1000)
    write_record(results, "short", method="terngrad", params=TERNGRAD["terngrad"], top1=0.50, seed=1, steps=300)
    [cell] = build("terngrad", results, refs)
    assert sorted(cell.run_ids) == ["long1", "long2"] and cell.mean == pytest.approx(97.0)
    assert "1 other matching setting not pooled" in cell.markers
    assert "shortened: 1,000 of 10,000 iterations" in cell.markers


def test_model_rows_come_from_the_papers_own_model(tmp_path):
    """Sizes and gradient counts describe a model: any run of it gives them, scaled to the row's nodes and
    iterations; a stand-in cannot, and the row says which run would."""
    model_rows = [
        {"source": "Section 2.2", "row": "size", "task": "nin-imagenet", "method": "baseline", "metric": "model_size",
         "value": "29", "unit": "MB"},
        {"source": "Section 3.1", "row": "per iteration", "task": "nin-imagenet", "method": "baseline",
         "workers": "8", "iterations": "220000", "metric": "gradients_per_iteration", "value": "80", "unit": "count"},
        {"source": "Section 3.1", "row": "total", "task": "nin-imagenet", "method": "baseline", "workers": "8",
         "iterations": "220000", "metric": "gradients_total", "value": "1", "unit": "count"},
        {"source": "Section 3.1", "row": "GB", "task": "nin-imagenet", "method": "baseline", "workers": "8",
         "iterations": "220000", "metric": "gb_transferred", "value": "1", "unit": "GB"},
        {"source": "Section 4", "row": "per node", "task": "nin-imagenet", "method": "baseline", "workers": "8",
         "iterations": "220000", "metric": "bytes_per_node_per_iteration", "value": "30", "unit": "MB"}]
    refs = write_refs(tmp_path / "paper", "threshold", [{"dataset": "imagenet", **r} for r in model_rows],
                      analogues="- {paper: threshold, task: nin-imagenet, use: {task: lenet-mnist}}\n")
    results = tmp_path / "results"
    write_record(results, "lenet", workers=8)
    stand_in_only = build("threshold", results, refs)
    assert all(c.values == [] and "a property of nin-imagenet itself" in c.why_missing for c in stand_in_only)
    record = write_record(results, "nin", task="nin-imagenet", dataset="synthetic", workers=1, steps=1)
    record["metrics"]["parameters"] = 7_595_176
    (results / "runs" / "nin.json").write_text(json.dumps(record))
    size, per_iteration, total, gigabytes, per_node = build("threshold", results, refs)
    assert size.values == [pytest.approx(4 * 7_595_176 / 1e6)] and size.run_ids == ["nin"]
    assert per_iteration.values == [8 * 7_595_176]
    assert total.values == [8 * 7_595_176 * 220_000]
    assert gigabytes.values == [pytest.approx(4 * 8 * 7_595_176 * 220_000 / 1e9)]
    assert per_node.values == [pytest.approx(4 * 7_595_176 / 1e6)]
    assert "x the paper's 8 nodes x 220,000 iterations" in total.markers[0]


def test_losses_against_a_sibling_variant_pair_the_same_setting_and_seed(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.4", "row": "SGD vs GLU", "task": "lenet-mnist", "method": "ssdsgd", "workers": "4",
         "delay_steps": "5", "variant": "sgd", "metric": "top1_loss_vs_glu", "value": "0.5"},
        {"source": "Section 4.4", "row": "SGD vs DC", "task": "lenet-mnist", "method": "ssdsgd", "workers": "4",
         "delay_steps": "5", "variant": "sgd", "metric": "top1_loss_vs_dcasgd", "value": "0.1"}])
    results = tmp_path / "results"
    rule = {"k": 5, "warmup": 499}
    for seed, (glu, sgd) in enumerate([(0.90, 0.88), (0.91, 0.87)], start=1):
        write_record(results, f"glu{seed}", method="ssdsgd", workers=4, seed=seed, top1=glu,
                     params={**rule, "local_rule": "glu", "local_lr_scale": 4.0})
        write_record(results, f"sgd{seed}", method="ssdsgd", workers=4, seed=seed, top1=sgd,
                     params={**rule, "local_rule": "sgd", "local_lr_scale": 0.25})
    write_record(results, "glu-k4", method="ssdsgd", workers=4, top1=0.5,  # another k: no partner
                 params={"k": 4, "warmup": 499, "local_rule": "glu", "local_lr_scale": 4.0})
    vs_glu, vs_dc = build("ssdsgd", results, refs)
    assert vs_glu.values == pytest.approx([2.0, 4.0]) and sorted(vs_glu.run_ids) == ["sgd1", "sgd2"]
    assert vs_dc.values == [] and vs_dc.why_missing == "no run of the same setting with the dcasgd variant"


def test_a_methods_gap_to_its_baseline_in_the_paper_and_here(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "floating", "task": "lenet-mnist", "method": "baseline", "workers": "2",
         "metric": "top1", "value": "57.33"},
        {"source": "Table 2", "row": "TernGrad", "task": "lenet-mnist", "method": "terngrad", "workers": "2",
         "metric": "top1", "value": "57.61"}])
    results = tmp_path / "results"
    for seed, (base, tern) in enumerate([(0.90, 0.91), (0.90, 0.92)], start=1):
        write_record(results, f"b{seed}", seed=seed, top1=base)
        write_record(results, f"t{seed}", seed=seed, method="terngrad", params=TERNGRAD["terngrad"], top1=tern)
    floating, terngrad = build("terngrad", results, refs)
    assert floating.paper_gap is None and floating.gap is None
    assert terngrad.paper_gap == pytest.approx(0.28) and terngrad.gap == pytest.approx(1.5)
    table = rows([floating, terngrad])
    assert (table[1]["paper gap"], table[1]["our gap"]) == ("+0.28", "+1.50")
    assert "gap: a method's top-1/top-5 minus its baseline's" in render(table, "md")


def test_the_best_delay_and_the_best_warm_up(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.3", "row": "best k", "task": "lenet-mnist", "method": "ssdsgd", "workers": "4",
         "warmup_steps": "500", "variant": "glu", "metric": "best_delay_steps", "value": "2", "unit": "steps"},
        {"source": "Section 4.2", "row": "warm-up", "task": "lenet-mnist", "method": "ssdsgd", "workers": "4",
         "delay_steps": "1", "warmup_steps": "500", "variant": "glu", "metric": "warmup_steps_chosen",
         "value": "500", "unit": "iterations"}])
    results = tmp_path / "results"
    for k, warmup, top1 in ((1, 500, 0.80), (2, 499, 0.85), (5, 499, 0.82), (5, 99, 0.70), (5, 299, 0.90)):
        write_record(results, f"k{k}w{warmup}", method="ssdsgd", workers=4, top1=top1,
                     params={"k": k, "warmup": warmup, "local_rule": "glu"})
    best_k, warm_up = build("ssdsgd", results, refs)
    assert best_k.values == [2.0] and "of k in 1, 2, 5" in best_k.markers  # warm-ups far from 500 do not count
    assert warm_up.values == [299.0] and "of warmup in 99, 299, 499" in warm_up.markers
    assert any(m.startswith("swept at k=5, not the paper's k=1") for m in warm_up.markers)
    # every choice swept, with its runs, and the paper's own (warm-up 499: the paper's 500, rounded), for the
    # verdict's paired tests
    assert best_k.chosen == 2 and sorted(best_k.choices) == [1, 2, 5]
    assert warm_up.chosen == 499 and sorted(warm_up.choices) == [99, 299, 499]
    assert [r.run_id for r in warm_up.choices[299]] == ["k5w299"]
    # a sweep without the paper's choice cannot judge it: the row stays missing and says why
    refs = write_refs(tmp_path / "paper4", "ssdsgd", [
        {"source": "Section 4.3", "row": "best k", "task": "lenet-mnist", "method": "ssdsgd", "workers": "4",
         "warmup_steps": "500", "variant": "glu", "metric": "best_delay_steps", "value": "4", "unit": "steps"}])
    [unswept] = build("ssdsgd", results, refs)
    assert not unswept.values and unswept.why_missing == "the paper's k = 4 did not run here (k in 1, 2, 5)"


def test_data_fraction_is_the_share_of_the_fp32_bytes(tmp_path):
    refs = write_refs(tmp_path / "paper", "threshold", [
        {"source": "Section 4", "row": "WGT share", "task": "lenet-mnist", "method": "wgt", "workers": "2",
         "threshold": "0.005", "variant": "paper-accounting", "metric": "data_fraction", "value": "1.75"}])
    results = tmp_path / "results"
    write_record(results, "w", method="wgt", params={"threshold": 0.005}, paper_bytes=100, bytes_sent=1000)
    [cell] = build("threshold", results, refs)
    assert cell.values == [pytest.approx(2.5)]  # 100 of 4 x 1000 bytes


def test_gains_pair_each_run_with_the_baseline_of_the_same_setting_and_seed(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 3", "row": "largest gain", "task": "lenet-mnist", "method": "terngrad",
         "variant": "momentum", "metric": "accuracy_gain_max", "value": "0.5"},
        {"source": "Table 1", "row": "gain at 2", "task": "lenet-mnist", "method": "terngrad", "workers": "2",
         "metric": "top1_gain", "value": "0.1"}])
    results = tmp_path / "results"
    for seed, (base, tern) in enumerate([(0.90, 0.91), (0.90, 0.93)], start=1):
        write_record(results, f"b2-{seed}", seed=seed, top1=base)
        write_record(results, f"t2-{seed}", seed=seed, method="terngrad", params=TERNGRAD["terngrad"], top1=tern)
    write_record(results, "b4", workers=4, top1=0.80)
    write_record(results, "t4", workers=4, method="terngrad", params=TERNGRAD["terngrad"], top1=0.85)
    write_record(results, "t8", workers=8, method="terngrad", params=TERNGRAD["terngrad"], top1=0.99)  # no baseline
    biggest, at_two = build("terngrad", results, refs)
    assert biggest.mean == pytest.approx(5.0) and biggest.run_ids == ["t4"]
    assert "at workers 4 (of 2, 4)" in biggest.markers
    assert at_two.values == pytest.approx([1.0, 3.0])


def test_rows_without_runs_stay_and_say_missing(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Table 2", "row": "k=2", "task": "resnet20-cifar10", "method": "ssdsgd", "delay_steps": "2",
         "metric": "top1", "value": "91.5"},
        {"source": "Section 4.4", "row": "speed-up", "task": "resnet50-imagenet", "method": "ssdsgd",
         "metric": "speedup", "value": "1.3", "unit": "x"}])
    (tmp_path / "empty").mkdir()
    table = rows(build("ssdsgd", tmp_path / "empty", refs))
    assert [r["reproduced"] for r in table] == ["missing", "missing"]
    assert all(r["why"] == "no matching run" and r["differs"] == "" for r in table)
    md = render(table, "md")
    assert md.count("| missing | ") == 4  # the value and the verdict of each row
    assert "0 reproduced, 0 not reproduced, 0 inconclusive, 0 untestable here, 1 missing" in md
    latex = render(table, "latex")
    assert latex.count(r"\begin{tabular}") == 2 and r"\toprule" in latex and r"\bottomrule" in latex
    assert r"top1 (\%)" in latex and " % " not in latex  # LaTeX's comment character escaped
    parsed = list(csv.DictReader(render(table, "csv").splitlines()))
    assert [p["paper value"] for p in parsed] == ["91.5", "1.3", ""]  # the last line holds the totals
    assert (parsed[-1]["paper"], parsed[-1]["source"]) == ("all", "totals") and "2 missing" in parsed[-1]["why"]
    # the markdown ends with the totals line: its three counts and what can be signed of the errors
    assert md.rstrip().endswith("so their errors are correlated (the CSV's shares baseline with).**")
    assert "the papers' settings (substitute data included), 2 rows: 0 reproduced, 0 not reproduced" in md
    assert "stand-in models, 0 rows" in md and "0 rows were called by a test at a per-row error of at most 5%" in md
    summary = json.loads(render(table, "json"))["summary"]
    settings = summary["the papers' settings (substitute data included)"]
    assert (summary["rows"], settings["missing"], settings["reproduced"]) == (2, 2, 0)


def test_bad_reference_files_are_named(tmp_path):
    folder = tmp_path / "paper"
    folder.mkdir()
    (folder / "terngrad.csv").write_text("paper,value\nterngrad,1\n")
    with pytest.raises(ConfigError, match="columns must be"):
        load_references("terngrad", folder)
    write_refs(folder, "terngrad", [{"source": "Table 1", "row": "x", "metric": "top1", "value": "ninety"}])
    with pytest.raises(ConfigError, match=r"terngrad.csv:2: value must be a number"):
        load_references("terngrad", folder)
    with pytest.raises(ConfigError, match="unknown paper"):
        load_references("imagenet-in-an-hour", folder)


def test_the_command_builds_every_paper_table_on_an_empty_results_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = commbench("table", "--paper", "all", "--results", str(tmp_path / "empty"))
    assert proc.returncode == 0, proc.stderr
    for paper in ("TernGrad", "SSD-SGD", "Thresholded"):
        assert paper in proc.stdout
    assert "| missing |" in proc.stdout and " missing\n" in proc.stdout
    latex = commbench("table", "--paper", "threshold", "--format", "latex", "--results", str(tmp_path / "empty"),
                      "--out", str(tmp_path / "t.tex"))
    assert latex.returncode == 0 and r"\toprule" in (tmp_path / "t.tex").read_text()
    bad = commbench("table", "--paper", "all", "--results", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "nowhere" in bad.stderr


GLU_K2 = {"k": 2, "warmup": 499, "local_rule": "glu"}  # Table 2's k = 2 as Algorithm 1 allows: (1 + 499) % 2 == 0


def ssdsgd_k2_row(tmp_path: Path) -> Path:
    """SSD-SGD Table 2's k = 2 row on ResNet-20, with LeNet on 4 workers as its stand-in."""
    return write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Table 2", "row": "k=2", "task": "resnet20-cifar10", "method": "ssdsgd", "delay_steps": "2",
         "warmup_steps": "500", "variant": "glu", "metric": "top1", "value": "92.2"}],
        analogues="- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist, workers: 4}}\n")


def test_a_warm_up_one_step_off_matches_and_is_marked(tmp_path):
    refs, results = ssdsgd_k2_row(tmp_path), tmp_path / "results"
    write_record(results, "ok", method="ssdsgd", workers=4, params=GLU_K2)
    write_record(results, "far", method="ssdsgd", workers=4, params={**GLU_K2, "warmup": 99})
    write_record(results, "sgd", method="ssdsgd", workers=4, params={**GLU_K2, "local_rule": "sgd"})
    write_record(results, "w2", method="ssdsgd", workers=2, params=GLU_K2)
    [cell] = build("ssdsgd", results, refs)
    assert cell.run_ids == ["ok"] and "warm-up 499 for 500" in cell.markers


def test_the_papers_own_model_wins_over_its_stand_in_once_it_has_run(tmp_path):
    refs, results = ssdsgd_k2_row(tmp_path), tmp_path / "results"
    write_record(results, "lenet", method="ssdsgd", workers=4, params=GLU_K2, top1=0.98)
    [cell] = build("ssdsgd", results, refs)
    assert cell.run_ids == ["lenet"] and "model: lenet-mnist for resnet20-cifar10" in cell.markers
    write_record(results, "resnet", task="resnet20-cifar10", method="ssdsgd", workers=4, params=GLU_K2, top1=0.80)
    [cell] = build("ssdsgd", results, refs)
    assert cell.run_ids == ["resnet"] and not any(m.startswith("model:") for m in cell.markers)


def test_a_row_the_own_models_runs_cannot_fill_falls_back_to_the_stand_in(tmp_path):
    """Figure 4's chosen warm-up needs a sweep of warm-up lengths: one ResNet-20 run at 500 is no sweep, the
    stand-in's sweep fills the row."""
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.2", "row": "warm-up chosen", "task": "resnet20-cifar10", "method": "ssdsgd",
         "delay_steps": "1", "warmup_steps": "500", "variant": "glu", "metric": "warmup_steps_chosen",
         "value": "500", "unit": "iterations"}],
        analogues="- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist, workers: 4}}\n")
    results = tmp_path / "results"
    write_record(results, "resnet", task="resnet20-cifar10", method="ssdsgd", workers=4, top1=0.8,
                 params={"k": 1, "warmup": 500, "local_rule": "glu"})
    for warmup, top1 in ((100, 0.97), (300, 0.98), (500, 0.99)):
        write_record(results, f"lenet-{warmup}", method="ssdsgd", workers=4, top1=top1,
                     params={"k": 1, "warmup": warmup, "local_rule": "glu"})
    [cell] = build("ssdsgd", results, refs)
    assert cell.values == [500.0] and "model: lenet-mnist for resnet20-cifar10" in cell.markers


def test_a_stand_in_declared_for_some_tables_fills_all_their_rows_and_none_of_the_others(tmp_path):
    """A figure's sweep is one model's: where the stand-in names its tables (``sources``), it fills every row of
    them even where the own model ran one (Figure 4's warm-up 500), and no row of another table, where the own
    model's runs alone count (Table 2's k = 2 reads missing rather than LeNet's beside ResNet-20's k = 1)."""
    k1 = {"k": 1, "warmup": 500, "local_rule": "glu"}
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.2", "row": "Fig. 4: warm-up 500", "task": "resnet20-cifar10", "method": "ssdsgd",
         "delay_steps": "1", "warmup_steps": "500", "variant": "glu", "metric": "top1", "value": "92.0"},
        {"source": "Table 2", "row": "k=1", "task": "resnet20-cifar10", "method": "ssdsgd", "delay_steps": "1",
         "warmup_steps": "500", "variant": "glu", "metric": "top1", "value": "92.1"},
        {"source": "Table 2", "row": "k=2", "task": "resnet20-cifar10", "method": "ssdsgd", "delay_steps": "2",
         "warmup_steps": "500", "variant": "glu", "metric": "top1", "value": "92.2"}],
        analogues="- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist, workers: 4},"
                  " sources: [Section 4.2]}\n")
    results = tmp_path / "results"
    write_record(results, "resnet-k1", task="resnet20-cifar10", method="ssdsgd", workers=4, params=k1, top1=0.80)
    write_record(results, "lenet-k1", method="ssdsgd", workers=4, params=k1, top1=0.98)
    write_record(results, "lenet-k2", method="ssdsgd", workers=4, params=GLU_K2, top1=0.97)
    figure, table_k1, table_k2 = build("ssdsgd", results, refs)
    assert figure.run_ids == ["lenet-k1"] and "model: lenet-mnist for resnet20-cifar10" in figure.markers
    assert table_k1.run_ids == ["resnet-k1"]
    assert table_k2.values == [] and table_k2.why_missing == (
        "no matching run of resnet20-cifar10 (lenet-mnist stands in for it in Section 4.2 only: a table is one "
        "model's)")
    # without sources, the stand-in fills any row the own model does not, as before
    refs = write_refs(tmp_path / "paper2", "ssdsgd", list(csv.DictReader((refs / "ssdsgd.csv").open())),
                      analogues="- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist, workers: 4}}\n")
    figure, table_k1, table_k2 = build("ssdsgd", results, refs)
    assert (figure.run_ids, table_k1.run_ids, table_k2.run_ids) == (["resnet-k1"], ["resnet-k1"], ["lenet-k2"])


def test_a_stand_ins_sources_must_be_a_list_of_names(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [], analogues=(
        "- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist}, sources: Section 4.2}\n"))
    with pytest.raises(ConfigError, match="entry 1: sources must be a list"):
        build("ssdsgd", tmp_path / "results", refs)
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Table 2", "row": "k=2", "task": "resnet20-cifar10", "method": "ssdsgd", "delay_steps": "2",
         "warmup_steps": "500", "variant": "glu", "metric": "top1", "value": "92.2"}], analogues=(
        "- {paper: ssdsgd, task: resnet20-cifar10, use: {task: lenet-mnist}, sources: [Section 4.2]}\n"))
    with pytest.raises(ConfigError, match="names 'Section 4.2', which is no table or section of ssdsgd's rows "
                                          r"\(Table 2\)"):
        build("ssdsgd", tmp_path / "results", refs)


def test_speeds_are_not_taken_from_a_stand_in_model(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "2",
         "variant": "performance-model", "metric": "speedup", "value": "3.04", "unit": "x"},
        {"source": "Section 4", "row": "speed", "task": "alexnet-imagenet", "method": "terngrad", "workers": "2",
         "metric": "throughput_images_per_s", "value": "100", "unit": "images/s"}],
        analogues="- {paper: terngrad, task: alexnet-imagenet, use: {task: lenet-mnist}}\n")
    results = tmp_path / "results"
    write_record(results, "b", top1=0.9)
    write_record(results, "t", method="terngrad", params=TERNGRAD["terngrad"], top1=0.9, images_per_s=300.0)
    modelled, speed = build("terngrad", results, refs)
    assert modelled.values == [] and "modelled in the paper" in modelled.why_missing
    assert speed.values == [] and "its CPU stand-in lenet-mnist says nothing" in speed.why_missing


def test_a_speed_row_over_several_models_takes_no_stand_in(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.6", "row": "all models, lowest", "method": "ssdsgd", "workers": "2", "delay_steps": "5",
         "metric": "speedup_pct_min", "value": "9.8"}],
        analogues="- {paper: ssdsgd, task: resnet50-imagenet, use: {task: lenet-mnist}}\n")
    results = tmp_path / "results"
    ssd = {"k": 5, "local_rule": "glu"}
    write_record(results, "b", top1=0.9, images_per_s=100.0)
    write_record(results, "s", method="ssdsgd", params=ssd, top1=0.9, images_per_s=50.0)
    [lenet_only] = build("ssdsgd", results, refs)
    assert lenet_only.values == []
    write_record(results, "ab", task="alexnet-imagenet", top1=0.0, images_per_s=1.0)
    write_record(results, "as", task="alexnet-imagenet", method="ssdsgd", params=ssd, top1=0.0, images_per_s=2.0)
    [alexnet] = build("ssdsgd", results, refs)  # one model's measurement fills only rows of its own model
    assert alexnet.values == [] and alexnet.why_missing.startswith("a range over several models")


def test_the_share_of_zero_trits_in_the_largest_tensor(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 4", "row": "fc6 zeros", "task": "lenet-mnist", "method": "terngrad", "workers": "2",
         "metric": "gradient_zero_fraction", "value": "71.32"}])
    results = tmp_path / "results"
    record = write_record(results, "t", method="terngrad", params=TERNGRAD["terngrad"])
    [cell] = build("terngrad", results, refs)
    assert cell.values == [] and cell.why_missing == "no matching run"  # a record from before the count
    record["metrics"].update(zero_trits_largest=300, trits_largest=400)
    (results / "runs" / "t.json").write_text(json.dumps(record))
    [cell] = build("terngrad", results, refs)
    assert cell.values == [pytest.approx(75.0)]
    assert "in the largest ternarized tensor (AlexNet's fc6 is its largest)" in cell.markers


def test_a_parameter_server_run_is_compared_with_the_baseline_on_parameter_servers(tmp_path):
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.6", "row": "SSD-SGD-5 vs SSGD", "task": "alexnet-imagenet", "method": "ssdsgd",
         "workers": "4", "delay_steps": "5", "warmup_steps": "500", "variant": "glu", "metric": "speedup_pct",
         "value": "100.7"}])
    results = tmp_path / "results"
    ps = {"topology": "ps", "servers": 4}
    write_record(results, "ssd", task="alexnet-imagenet", method="ssdsgd", workers=4, top1=0.0, images_per_s=3.0,
                 params={**ps, "k": 5, "warmup": 4, "local_rule": "glu"}, steps=15)
    write_record(results, "ssgd15", task="alexnet-imagenet", workers=4, top1=0.0, images_per_s=2.0, params=ps,
                 steps=15)
    write_record(results, "zallreduce15", task="alexnet-imagenet", workers=4, top1=0.0, images_per_s=10.0,
                 params={"topology": "allreduce", "servers": 1}, steps=15)  # the same run but its exchange
    [cell] = build("ssdsgd", results, refs)
    assert cell.values == pytest.approx([50.0]) and cell.run_ids == ["ssd"]  # 3.0 over the PS baseline's 2.0
    assert "throughput over all 15 steps, 5 of them the synchronous warm-up" in cell.markers
    assert "warm-up 4 for 500" in cell.markers  # a speed row takes the run whatever its warm-up, and says so

    # On an emulated network the speed row takes the slowest link (the most communication-bound setting) and
    # names the others with their values.
    for net, (ssgd, ssd) in {"1gbit": (4.0, 3.8), "100mbit": (0.7, 0.91)}.items():
        for method, ips, params in (("baseline", ssgd, ps), ("ssdsgd", ssd, {**ps, "k": 5, "warmup": 4,
                                                                             "local_rule": "glu"})):
            write_record(results, f"{method}-{net}", task="alexnet-imagenet", method=method, workers=4, top1=0.0,
                         images_per_s=ips, params=params, steps=15, config={"net": net})
    [cell] = build("ssdsgd", results, refs)
    assert cell.run_ids == ["ssdsgd-100mbit"] and cell.values == pytest.approx([30.0])
    assert "other settings: 1gbit -5.0, loopback +50.0" in cell.markers


def test_an_accuracy_gap_of_a_parameter_server_run_takes_the_allreduce_baseline(tmp_path):
    # Synchronous SGD computes the same weights on a PS and on an all-reduce, so an accuracy gap pairs across
    # exchanges; only a speed-up needs the baseline on the same servers.
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {"source": "Section 4.3", "row": "5-Step vs SSGD", "task": "lenet-mnist", "method": "ssdsgd",
         "workers": "4", "delay_steps": "5", "warmup_steps": "500", "variant": "glu", "metric": "top1_loss",
         "value": "0.997"}])
    results = tmp_path / "results"
    write_record(results, "ssd", method="ssdsgd", workers=4, top1=0.88,
                 params={"topology": "ps", "servers": 1, "k": 5, "warmup": 499, "local_rule": "glu"})
    write_record(results, "ssgd", workers=4, top1=0.89, params={"topology": "allreduce", "servers": 1})
    [cell] = build("ssdsgd", results, refs)
    assert cell.run_ids == ["ssd"] and cell.values == pytest.approx([1.0])


def test_a_modelled_speed_up_is_measured_on_the_emulated_network_and_only_from_real_processes(tmp_path):
    # Figure 5's 3.04x is the paper's model; the row takes the measured speed-up of the paper's own model on an
    # emulated link, with the most workers 2 cores held, and says that it was measured and at fewer workers.
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "8",
         "variant": "performance-model", "metric": "speedup", "value": "3.04", "unit": "x"}],
        analogues="- {paper: terngrad, task: alexnet-imagenet, use: {task: lenet-mnist}}\n")
    results = tmp_path / "results"
    # TernGrad all-gathers its trits, the baseline all-reduces: both exchange among the workers, so they pair
    allgather, allreduce = {**TERNGRAD["terngrad"], "topology": "allgather"}, {"topology": "allreduce"}
    for workers, (base, tern) in {2: (1.0, 3.0), 4: (2.0, 4.0)}.items():
        for method, ips in (("baseline", base), ("terngrad", tern)):
            write_record(results, f"{method}-w{workers}", task="alexnet-imagenet", method=method, workers=workers,
                         images_per_s=ips, steps=4, dataset="synthetic", config={"net": "100mbit"},
                         params=allgather if method == "terngrad" else allreduce)
    # a simulation's images/s is no speed, however good it looks; a loopback run is no emulated network
    write_record(results, "sim-b", task="alexnet-imagenet", workers=8, backend="sim", images_per_s=1.0)
    write_record(results, "sim-t", task="alexnet-imagenet", method="terngrad", workers=8, backend="sim",
                 images_per_s=100.0, params=TERNGRAD["terngrad"])
    [cell] = build("terngrad", results, refs)
    assert cell.run_ids == ["terngrad-w4"] and cell.values == pytest.approx([2.0])
    assert "measured on the emulated network, where the paper's value is its performance model's output (the row " \
           "says for which cluster)" in cell.markers
    assert "fewer workers: 4 of 8" in cell.markers and "4 workers" in cell.markers
    assert "link: 100mbit to every process (emulated)" in cell.markers
    assert "other settings: 100mbit 3" in cell.markers


def test_a_row_left_to_an_older_version_also_says_what_the_current_records_lack(tmp_path):
    """A row that only a superseded record would fill says so, and keeps the reason the current records gave
    (a re-run that pairs with no baseline must not read as a grid still to run)."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "2",
         "metric": "speedup", "value": "3.04", "unit": "x"}])
    results = tmp_path / "results"
    common = {"task": "alexnet-imagenet", "steps": 4, "dataset": "synthetic", "params": TERNGRAD["terngrad"]}
    write_record(results, "old", method="terngrad", images_per_s=3.0, config={"method_version": 1}, **common)
    write_record(results, "old-base", images_per_s=1.0, task="alexnet-imagenet", steps=4, dataset="synthetic")
    [cell] = build("terngrad", results, refs)
    assert cell.values == [] and cell.why_missing.startswith("only records of an older version of the method")
    assert "; the current records" not in cell.why_missing
    write_record(results, "new", method="terngrad", images_per_s=3.0, seed=2, **common)  # no seed-2 baseline
    [cell] = build("terngrad", results, refs)
    assert cell.values == [] and "; the current records: no baseline run of the same setting" in cell.why_missing


def test_a_speed_up_counts_only_against_a_baseline_that_overlaps_its_exchange(tmp_path):
    """A baseline that waits for the whole backward pass before its all-reduce is a strawman: the speed-up
    over it is left out, saying why; against the overlapped (DDP) one it counts, with its link and workers."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "2",
         "metric": "speedup", "value": "3.04", "unit": "x"}])
    results = tmp_path / "results"
    common = {"task": "alexnet-imagenet", "steps": 4, "dataset": "synthetic"}
    write_record(results, "t", method="terngrad", images_per_s=3.0, params=TERNGRAD["terngrad"],
                 config={"node_link": "100mbit"}, **common)
    write_record(results, "b", images_per_s=1.0, config={"node_link": "100mbit", "exchange": "after-backward"},
                 **common)
    [cell] = build("terngrad", results, refs)
    assert cell.values == [] and "overlaps its exchange with backward" in cell.why_missing
    write_record(results, "b", images_per_s=1.5, config={"node_link": "100mbit"}, **common)
    [cell] = build("terngrad", results, refs)
    assert cell.values == pytest.approx([2.0]) and cell.run_ids == ["t"]
    assert {"link: 100mbit between nodes", "2 workers", "measured over 4 steps"} <= set(cell.markers)


def test_a_paper_gap_takes_the_papers_one_baseline_of_the_setting_when_the_table_has_none(tmp_path):
    # The threshold paper states its baseline (57.9175) in Section 3.1 and its methods in Tables 1-3.
    row = {"task": "lenet-mnist", "workers": "8", "metric": "top1"}
    refs = write_refs(tmp_path / "paper", "threshold", [
        {**row, "source": "Section 3.1", "row": "baseline", "method": "baseline", "value": "57.9175"},
        {**row, "source": "Section 3.1", "row": "baseline, 4 workers", "method": "baseline", "workers": "4",
         "value": "50"},
        {**row, "source": "Table 1", "row": "WGT", "method": "wgt", "threshold": "0.005", "value": "56.4698"}])
    [_, _, wgt] = build("threshold", tmp_path / "results", refs)
    assert wgt.paper_gap == pytest.approx(-1.4477)


def test_a_baseline_row_takes_the_setting_its_tables_methods_ran_in(tmp_path):
    # Two baseline settings of the stand-in are equally far from the paper's batch 512; only one has a TernGrad
    # run beside it, so the floating row and the TernGrad row of the table describe the same experiment.
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "floating", "task": "alexnet-imagenet", "method": "baseline", "workers": "4",
         "global_batch": "512", "metric": "top1", "value": "57.32"},
        {"source": "Table 2", "row": "TernGrad", "task": "alexnet-imagenet", "method": "terngrad", "workers": "4",
         "global_batch": "512", "metric": "top1", "value": "57.28"}],
        analogues="- {paper: terngrad, task: alexnet-imagenet, use: {task: lenet-mnist}}\n")
    results = tmp_path / "results"
    for run_id, method, batch, top1 in (("b-other", "baseline", 128, 0.95), ("b-with-terngrad", "baseline", 64, 0.90),
                                        ("t", "terngrad", 64, 0.91)):
        write_record(results, run_id, method=method, workers=4, top1=top1, config={"global_batch": batch},
                     params=TERNGRAD["terngrad"] if method == "terngrad" else None)
    floating, terngrad = build("terngrad", results, refs)
    assert floating.run_ids == ["b-with-terngrad"] and terngrad.gap == pytest.approx(1.0)


def test_the_papers_own_model_at_another_total_batch_fills_no_row_that_states_one(tmp_path):
    """LeNet at 4 x 64 is no point of Figure 3, whose total batch is 64."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 3", "row": "TernGrad", "task": "lenet-mnist", "method": "terngrad", "workers": "4",
         "global_batch": "64", "metric": "top1", "value": "99.0"}])
    results = tmp_path / "results"
    write_record(results, "b256", method="terngrad", workers=4, steps=200, params=TERNGRAD["terngrad"],
                 config={"global_batch": 256})
    [cell] = build("terngrad", results, refs)
    assert cell.values == []
    write_record(results, "fig3", method="terngrad", workers=4, params=TERNGRAD["terngrad"], top1=0.99)
    [cell] = build("terngrad", results, refs)
    assert cell.run_ids == ["fig3"]


def test_runs_on_synthetic_data_or_timing_a_link_fill_no_accuracy_row(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "TernGrad", "task": "lenet-mnist", "method": "terngrad", "workers": "2",
         "metric": "top1", "value": "99.0"}])
    results = tmp_path / "results"
    for run_id, changes in (("synthetic", {"dataset": "synthetic"}), ("net", {"config": {"net": "1gbit"}}),
                            ("node-link", {"config": {"node_link": "100mbit"}})):
        write_record(results, run_id, method="terngrad", params=TERNGRAD["terngrad"], **changes)
    [cell] = build("terngrad", results, refs)
    assert cell.values == [] and cell.why_missing == "no matching run"
    write_record(results, "real", method="terngrad", params=TERNGRAD["terngrad"])
    [cell] = build("terngrad", results, refs)
    assert cell.run_ids == ["real"]


def test_a_row_over_momentum_and_vanilla_sgd_takes_its_extreme_over_both(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 3", "row": "largest loss", "task": "lenet-mnist", "method": "terngrad",
         "variant": "momentum+vanilla", "metric": "accuracy_loss_max", "value": "0.22"}])
    results = tmp_path / "results"
    for optimizer, (base, tern) in {"momentum": (0.90, 0.89), "sgd": (0.90, 0.87), "adam": (0.90, 0.10)}.items():
        write_record(results, f"b-{optimizer}", workers=16, optimizer=optimizer, top1=base)
        write_record(results, f"t-{optimizer}", workers=16, optimizer=optimizer, top1=tern, method="terngrad",
                     params=TERNGRAD["terngrad"])
    [cell] = build("terngrad", results, refs)  # Adam is neither: its 80-point loss is not this row's
    assert cell.run_ids == ["t-sgd"] and cell.values == pytest.approx([3.0])
    assert "at workers 16, sgd (of 16, with momentum and sgd)" in cell.markers


def test_a_line_of_two_extremes_says_where_each_one_is(tmp_path):
    # Figure 3's largest gain and largest loss share a line; they come from different worker counts, and each
    # says its own (a marker is never cut where it has a "; " of its own)
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 3", "row": "LeNet", "task": "lenet-mnist", "method": "terngrad",
         "variant": "momentum+vanilla", "metric": metric, "value": value}
        for metric, value in (("accuracy_gain_max", "0.15"), ("accuracy_loss_max", "0.22"))])
    results = tmp_path / "results"
    for workers, tern in ((2, 0.91), (4, 0.89)):
        for optimizer in ("momentum", "sgd"):
            write_record(results, f"b{workers}{optimizer}", workers=workers, optimizer=optimizer, top1=0.90)
            write_record(results, f"t{workers}{optimizer}", workers=workers, optimizer=optimizer,
                         top1=tern + (optimizer == "sgd") * 0.001, method="terngrad", params=TERNGRAD["terngrad"])
    md = render(rows(build("terngrad", results, refs)), "md")
    [line] = [x for x in md.splitlines() if x.startswith("| LeNet")]
    assert "accuracy_gain_max: at workers 2, sgd (of 2, 4, with momentum and sgd)" in line
    assert "accuracy_loss_max: at workers 4, momentum (of 2, 4, with momentum and sgd)" in line


def test_an_extreme_is_judged_on_the_runs_of_the_papers_length_and_the_shortened_ones_are_said(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 3", "row": "LeNet", "task": "lenet-mnist", "method": "terngrad", "iterations": "10000",
         "variant": "momentum", "metric": "accuracy_loss_max", "value": "0.22"}])
    results = tmp_path / "results"
    for workers, steps, tern in ((2, 10000, 0.899), (4, 10000, 0.898), (16, 2000, 0.85)):
        write_record(results, f"b{workers}", workers=workers, steps=steps, top1=0.90)
        write_record(results, f"t{workers}", workers=workers, steps=steps, top1=tern, method="terngrad",
                     params=TERNGRAD["terngrad"])
    [cell] = build("terngrad", results, refs)  # w16's 5-point loss is a shortened run's: not the verdict's
    assert cell.run_ids == ["t4"] and cell.values == pytest.approx([0.2])
    assert "at workers 4 (of 2, 4)" in cell.markers
    assert "not judged: workers 16 shortened to 2,000 iterations (there accuracy_loss_max +5.00 at workers 16)" \
        in cell.markers
    for name in ("b2", "t2", "b4", "t4"):  # with no run of the paper's length, the shortened ones are judged
        (results / "runs" / f"{name}.json").unlink()
    [cell] = build("terngrad", results, refs)
    assert cell.run_ids == ["t16"] and any(m.startswith("shortened: 2,000 of 10,000") for m in cell.markers)


def test_a_table_written_over_a_folder_is_refused_before_any_work(tmp_path):
    (tmp_path / "runs").mkdir(parents=True)
    proc = commbench("table", "--paper", "all", "--results", str(tmp_path), "--out", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "--out" in proc.stderr and "a folder" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # no temporary file left beside it


def test_a_paper_gap_takes_the_same_tables_baseline_whatever_its_variant(tmp_path):
    # SSD-SGD's Table 2 labels its baseline row "ssgd"; the k-step rows' gaps are to that row.
    row = {"source": "Table 2", "task": "lenet-mnist", "workers": "4", "metric": "top1"}
    refs = write_refs(tmp_path / "paper", "ssdsgd", [
        {**row, "row": "SSGD", "method": "baseline", "variant": "ssgd", "value": "92.126"},
        {**row, "row": "2-Step", "method": "ssdsgd", "delay_steps": "2", "value": "92.228"}])
    [_, two_step] = build("ssdsgd", tmp_path / "results", refs)
    assert two_step.paper_gap == pytest.approx(0.102)


def test_a_table_with_several_numbers_per_row_is_laid_out_as_the_paper_prints_it(tmp_path):
    # The threshold paper's Table 1: one line per threshold, columns accuracy | GB; a section of one number per
    # row keeps one line per number.
    refs = write_refs(tmp_path / "paper", "threshold", [
        {"source": "Table 1", "row": "T = 1e-3", "task": "lenet-mnist", "method": "wgt", "threshold": "0.001",
         "metric": "top1", "value": "57.9424"},
        {"source": "Table 1", "row": "T = 1e-3", "task": "lenet-mnist", "method": "wgt", "threshold": "0.001",
         "metric": "gb_transferred", "value": "6572.01", "unit": "GB"},
        {"source": "Table 1", "row": "T = 5e-3", "task": "lenet-mnist", "method": "wgt", "threshold": "0.005",
         "metric": "top1", "value": "56.4698"},
        {"source": "Table 1", "row": "T = 5e-3", "task": "lenet-mnist", "method": "wgt", "threshold": "0.005",
         "metric": "gb_transferred", "value": "933.35", "unit": "GB"},
        {"source": "Section 4", "row": "WGT loss", "task": "lenet-mnist", "method": "wgt", "threshold": "0.005",
         "metric": "top1_loss", "value": "1.45"}])
    results = tmp_path / "results"
    for seed, top1 in ((1, 0.90), (2, 0.92)):
        write_record(results, f"w{seed}", method="wgt", seed=seed, top1=top1, params={"threshold": 0.001})
    table = rows(build("threshold", results, refs))
    md = render(table, "md")
    header = ("| row | setting | top1 (%): paper | top1 (%): reproduced | top1 (%): delta | top1 (%): verdict | "
              "gb_transferred (GB): paper")
    assert header in md and md.count("| T = 1e-3 |") == 1
    line = next(l for l in md.splitlines() if l.startswith("| T = 1e-3 |")).split(" | ")
    assert line[2:5] == ["57.9424", "91.0000 ± 1.4142 (n=2)", "+33.0576"]
    assert "| T = 5e-3 |" in md and "| WGT loss | " in md and "| top1_loss | %" in md  # Section 4: long layout
    latex = render(table, "latex")
    assert r"\begin{tabular}{llrrrlrrrlll}" in latex and r"top1 (\%): paper" in latex


def test_the_large_batch_loss_pairs_the_same_setting_at_batch_256(tmp_path):
    # TernGrad Sec. 4.2: floating gradients lose 0.71 points at batch 1024 (8 workers) against 256 (2 workers),
    # at equal epochs: the partner differs in workers, batch, steps and learning rate, and in nothing else.
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Section 4.2", "row": "1024 vs 256", "task": "lenet-mnist", "method": "baseline",
         "workers": "8", "global_batch": "1024", "metric": "top1_loss_vs_batch_256", "value": "0.71"}])
    results = tmp_path / "results"
    for seed, (small, large) in {1: (0.90, 0.89), 2: (0.91, 0.895)}.items():
        write_record(results, f"b256-{seed}", seed=seed, top1=small, config={"global_batch": 256, "steps": 1000})
        write_record(results, f"b1024-{seed}", seed=seed, top1=large, workers=8, backend="sim",
                     config={"global_batch": 1024, "steps": 250})
    write_record(results, "other-wd", seed=1, top1=0.50, config={"global_batch": 256, "weight_decay": 0.1})
    [cell] = build("terngrad", results, refs)
    assert sorted(cell.run_ids) == ["b1024-1", "b1024-2"]
    assert cell.values == pytest.approx([1.0, 1.5])
    (tmp_path / "lone").mkdir()
    write_record(tmp_path / "lone", "b1024", workers=8, config={"global_batch": 1024})
    [lone] = build("terngrad", tmp_path / "lone", refs)
    assert not lone.values and "at batch 256" in lone.why_missing


def test_a_declared_speed_up_reads_every_declared_link_and_nothing_else(tmp_path):
    """The grid's declaration, fixed before measuring, names the workers and the links that judge the row: each
    link's launches (seeds) pair with the baseline's of the same seed; other worker counts and links take no
    part, and the row's value is the first declared link's."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "8",
         "variant": "performance-model", "metric": "speedup", "value": "3.04", "unit": "x"}])
    results = tmp_path / "results"
    for net, workers, seed, (base, tern) in (("100mbit", 4, 1, (1.0, 4.0)), ("100mbit", 4, 2, (1.0, 4.2)),
                                             ("1gbit", 4, 1, (2.0, 2.4)), ("100mbit", 2, 1, (1.0, 9.0)),
                                             ("10mbit", 4, 1, (1.0, 20.0))):
        for method, ips in (("baseline", base), ("terngrad", tern)):
            write_record(results, f"{method}-{net}-w{workers}-s{seed}", task="alexnet-imagenet", method=method,
                         workers=workers, seed=seed, images_per_s=ips, steps=4, dataset="synthetic",
                         config={"net": net}, params={**TERNGRAD["terngrad"], "topology": "allgather"}
                         if method == "terngrad" else {"topology": "allreduce"})
    declared = Declaration("terngrad", "Figure 5", "alexnet-imagenet", ("100mbit", "1gbit"), 4, "why", "g")
    [cell] = build("terngrad", results, refs, declarations=[declared])
    assert cell.declared is declared and sorted(cell.links) == ["100mbit", "1gbit"]
    assert sorted(v for v, _ in cell.links["100mbit"]) == pytest.approx([4.0, 4.2])
    assert [v for v, _ in cell.links["1gbit"]] == pytest.approx([1.2])
    assert cell.values == pytest.approx([4.0, 4.2]) or cell.values == pytest.approx([4.2, 4.0])
    [row] = rows([cell])
    assert row["verdict"] == "inconclusive" and row["why"].startswith("depends on the link")
    # a declaration for another batch of the same model: this row takes no measurement
    other = Declaration("terngrad", "Figure 5", "alexnet-imagenet", ("100mbit",), 4, "why", "g", batch_per_worker=7)
    [cell] = build("terngrad", results, refs, declarations=[other])
    assert cell.values == [] and "one measurement fills only rows of its own model and batch" in cell.why_missing


def test_a_speed_up_pairs_only_runs_timed_on_one_cpu(tmp_path):
    """A baseline timed on another machine is no baseline for a speed-up: the method's step on one CPU against the
    baseline's on another measures the machines. Such a row says so; on one CPU the launches pair."""
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "8",
         "variant": "performance-model", "metric": "speedup", "value": "3.04", "unit": "x"}])
    declared = Declaration("terngrad", "Figure 5", "alexnet-imagenet", ("100mbit",), 4, "why", "g")
    results = tmp_path / "results"

    def launch(run_id, method, ips, cpu):
        record = write_record(results, run_id, task="alexnet-imagenet", method=method, workers=4, seed=1, steps=4,
                              images_per_s=ips, dataset="synthetic", config={"net": "100mbit"},
                              params={**TERNGRAD["terngrad"], "topology": "allgather"} if method == "terngrad"
                              else {"topology": "allreduce"})
        record["env"] = {"cpu_model": cpu} if cpu else {}
        (results / "runs" / f"{run_id}.json").write_text(json.dumps(record))

    launch("base-old", "baseline", 1.0, None)
    launch("tern-new", "terngrad", 3.0, "AMD EPYC")
    [cell] = build("terngrad", results, refs, declarations=[declared])
    assert cell.values == [] and "timed on another CPU (unknown CPU, the method on AMD EPYC)" in cell.why_missing
    launch("base-old", "baseline", 1.5, "AMD EPYC")
    [cell] = build("terngrad", results, refs, declarations=[declared])
    assert cell.values == pytest.approx([2.0])


# NiN's baseline sends 1,000 GB and WGT at T=0.005 200 of them (20%), at top-1 50%; LeNet stands in for NiN
NIN_SHARE_ROWS = [
    {"source": "Section 3.1", "row": "baseline GB", "task": "nin-imagenet", "method": "baseline", "workers": "8",
     "iterations": "220000", "metric": "gb_transferred", "value": "1000", "unit": "GB"},
    {"source": "Table 1", "row": "T=0.005", "task": "nin-imagenet", "method": "wgt", "workers": "8",
     "threshold": "0.005", "metric": "gb_transferred", "value": "200", "unit": "GB"},
    {"source": "Table 1", "row": "T=0.005", "task": "nin-imagenet", "method": "wgt", "workers": "8",
     "threshold": "0.005", "metric": "top1", "value": "50"}]
NIN_ON_LENET = "- {paper: threshold, task: nin-imagenet, use: {task: lenet-mnist}}\n"


def test_a_threshold_row_on_a_stand_in_is_compared_at_the_papers_share_of_bytes(tmp_path):
    """NiN's T lets 20% of its bytes through; LeNet sends 40% at T=1e-3 and 10% at T=4e-3: the row's accuracy
    and gap are interpolated where LeNet sends 20% (log share linear in log T: half-way, T=2e-3), seed by seed."""
    refs = write_refs(tmp_path / "paper", "threshold", [
        *NIN_SHARE_ROWS,
        {"source": "Table 1", "row": "T=0.009", "task": "nin-imagenet", "method": "wgt", "workers": "8",
         "threshold": "0.009", "metric": "gb_transferred", "value": "5", "unit": "GB"},
        {"source": "Table 1", "row": "T=0.009", "task": "nin-imagenet", "method": "wgt", "workers": "8",
         "threshold": "0.009", "metric": "top1", "value": "40"}],
        analogues=NIN_ON_LENET)
    results = tmp_path / "results"
    for seed in (1, 2):
        write_record(results, f"base{seed}", workers=8, seed=seed, top1=0.98)
        for t, share, top1 in ((0.001, 0.4, 0.97 + seed / 1000), (0.004, 0.1, 0.965)):
            write_record(results, f"wgt{t}-{seed}", method="wgt", workers=8, seed=seed, top1=top1,
                         params={"threshold": t}, paper_bytes=share * 4000, bytes_sent=1000)
    _, _, accuracy, _, beyond = build("threshold", results, refs)
    # seed 1: 0.5 x 97.1 + 0.5 x 96.5 = 96.8; seed 2: 96.85; their gaps to 98: -1.2 and -1.15
    assert accuracy.values == pytest.approx([96.8, 96.85]) and accuracy.gap_values == pytest.approx([-1.2, -1.15])
    assert any(m.startswith("at the paper's share of bytes (20% of its baseline's at T=0.005): interpolated at "
                            "T=0.002 between T=0.001 (40%) and T=0.004 (10%)") for m in accuracy.markers)
    assert [w for w, _, _ in accuracy.gap_backing[0]] == pytest.approx([0.5, 0.5])
    # 0.5% of the bytes: below every share run here, so the row cannot be compared
    assert beyond.values == [] and beyond.untestable.startswith("no two thresholds run here bracket the paper's "
                                                                "share of bytes (0.5% at T=0.009)")
    assert rows([beyond])[0]["verdict"] == "untestable here"


def test_no_interpolation_across_a_collapse(tmp_path):
    """Halfway between a threshold whose runs collapsed (QGT's one-byte cap: 3 points under the baseline) and one
    that did not is neither's accuracy: the row is untestable and says why; two on the same side interpolate."""
    refs = write_refs(tmp_path / "paper", "threshold", NIN_SHARE_ROWS, analogues=NIN_ON_LENET)
    results = tmp_path / "results"
    write_record(results, "base", workers=8, top1=0.98)
    for t, share, top1 in ((0.001, 0.4, 0.975), (0.004, 0.1, 0.95)):
        write_record(results, f"wgt{t}", method="wgt", workers=8, top1=top1, params={"threshold": t},
                     paper_bytes=share * 4000, bytes_sent=1000)
    accuracy = build("threshold", results, refs)[2]
    assert accuracy.values == [] and "no interpolation across a collapse" in accuracy.untestable
    assert "T=0.004 collapsed (more than 2 points under its baseline)" in accuracy.untestable
    write_record(results, "wgt0.001", method="wgt", workers=8, top1=0.945, params={"threshold": 0.001},
                 paper_bytes=0.4 * 4000, bytes_sent=1000)  # both collapsed: the same side, a bracket
    both = build("threshold", results, refs)[2]
    assert both.values and not both.untestable


def test_an_equal_share_row_says_where_the_share_rises_with_the_threshold(tmp_path):
    """The interpolation takes one share per T, falling as T grows. QGT on LeNet sent less at T=1e-6 than at
    1e-5 (its one-byte cap throttles training at the smaller T): a row read from such a family says so; a family
    whose share falls throughout does not."""
    refs = write_refs(tmp_path / "paper", "threshold", NIN_SHARE_ROWS, analogues=NIN_ON_LENET)
    results = tmp_path / "results"
    write_record(results, "base", workers=8, top1=0.98)
    for t, share in ((0.001, 0.4), (0.004, 0.1)):
        write_record(results, f"wgt{t}", method="wgt", workers=8, top1=0.97, params={"threshold": t},
                     paper_bytes=share * 4000, bytes_sent=1000)
    rising = "the share of bytes here rises with T"
    accuracy = build("threshold", results, refs)[2]
    assert accuracy.values and not any(rising in m for m in accuracy.markers)
    write_record(results, "wgt0.008", method="wgt", workers=8, top1=0.97, params={"threshold": 0.008},
                 paper_bytes=0.15 * 4000, bytes_sent=1000)
    accuracy = build("threshold", results, refs)[2]
    assert any("between T=0.001 (40%) and T=0.004 (10%)" in m for m in accuracy.markers)
    assert f"{rising} from T=0.004 (10%) to T=0.008 (15%): not one share per T, as the interpolation assumes" \
        in accuracy.markers


def test_equal_share_reads_the_longest_runs_not_the_family_with_more_thresholds(tmp_path):
    """A short family of three thresholds and a long one of two both bracket the paper's 20%: the row reads the
    long one alone (a gap needs half the schedule), never a mix of the two."""
    refs = write_refs(tmp_path / "paper", "threshold", NIN_SHARE_ROWS, analogues=NIN_ON_LENET)
    results = tmp_path / "results"
    for steps, points in ((1000, ((0.001, 0.4, 0.90), (0.002, 0.2, 0.90), (0.004, 0.1, 0.90))),
                          (5000, ((0.001, 0.4, 0.975), (0.004, 0.1, 0.965)))):
        write_record(results, f"base-{steps}", workers=8, top1=0.98, steps=steps)
        for t, share, top1 in points:
            write_record(results, f"wgt{t}-{steps}", method="wgt", workers=8, top1=top1, steps=steps,
                         params={"threshold": t}, paper_bytes=share * 4000, bytes_sent=1000)
    _, _, accuracy = build("threshold", results, refs)
    assert {r.config.steps for r in accuracy.records} == {5000}
    assert accuracy.values == pytest.approx([97.0]) and accuracy.gap_values == pytest.approx([-1.0])
    assert any("between T=0.001 (40%) and T=0.004 (10%)" in m for m in accuracy.markers)


def test_a_paper_that_reports_the_best_accuracy_is_compared_with_ours(tmp_path):
    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Table 2", "row": "floating", "task": "lenet-mnist", "method": "baseline", "workers": "2",
         "metric": "top1", "value": "99.0", "reports": "best"}])
    results = tmp_path / "results"
    record = write_record(results, "b", top1=0.97)
    record["metrics"].update(top1_best=0.985, top1_best_step=5000)
    (results / "runs" / "b.json").write_text(json.dumps(record))
    [cell] = build("terngrad", results, refs)
    assert cell.values == pytest.approx([98.5])
    record["metrics"].pop("top1_best")  # an older record: the history's highest evaluation
    record["history"] = [{"step": 10, "top1": 0.5}, {"step": 20, "top1": 0.99}, {"step": 30, "top1": 0.97}]
    (results / "runs" / "b.json").write_text(json.dumps(record))
    assert build("terngrad", results, refs)[0].values == pytest.approx([99.0])


def test_every_shipped_declaration_names_a_speed_row_of_the_papers(tmp_path):
    """A declaration that names no row (a typo in its source or task) would leave the row it meant undeclared."""
    from commbench.analysis.papers.reference import PAPER_DIR, load_declarations

    declarations = load_declarations()
    assert {d.grid for d in declarations} >= {"network-fig5-ps", "network-ssdsgd-mxnet"}
    for d in declarations:
        refs = load_references(d.paper, PAPER_DIR)
        assert any(r.source == d.source and r.task == d.task and r.claim == "speedup" and
                   (d.batch_per_worker is None or r.batch_per_worker == d.batch_per_worker) for r in refs), d


@pytest.mark.parametrize("entry,message", [
    ("[{paper: terngrad}]", "declares entry 1: source missing"),
    ("{paper: terngrad}", "declares must be a list"),
    ("[{paper: terngrad, source: F, task: t, links: [], workers: 4, why: w}]", "links must be a non-empty list"),
    ("[{paper: terngrad, source: F, task: t, links: [1gbit], workers: four, why: w}]", "workers must be an integer"),
    ("[{paper: terngrad, source: F, task: t, links: [1gbit], workers: 4, why: w, link: x}]", "unknown key 'link'"),
])
def test_a_bad_declaration_is_named(tmp_path, entry, message):
    from commbench.config.grid import load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text(f"base: {{task: lenet-mnist, method: baseline}}\naxes: {{seed: [1]}}\ndeclares: {entry}\n")
    with pytest.raises(ConfigError, match=message):
        load_grid(grid)


def test_a_row_left_to_an_older_version_names_the_grid_that_runs_it_again(tmp_path):
    """The why names the sweep that makes the superseded records' settings again (into the folder that holds
    them), even where the method's parameters changed with its version; a grid of other settings is not named,
    and without grids to look in the why says only to re-run."""
    from commbench.config.grid import expand, load_grid

    refs = write_refs(tmp_path / "paper", "terngrad", [
        {"source": "Figure 5", "row": "3.04x", "task": "alexnet-imagenet", "method": "terngrad", "workers": "2",
         "metric": "speedup", "value": "3.04", "unit": "x"}])
    grids = tmp_path / "grids"
    (grids / "campaign").mkdir(parents=True)
    (grids / "campaign" / "fig5-again.yaml").write_text(
        "base: {task: alexnet-imagenet, dataset: synthetic, steps: 4, workers: 2, backend: dist}\n"
        "axes: {method: [baseline, terngrad]}\n")
    (grids / "other-steps.yaml").write_text(
        "base: {task: alexnet-imagenet, dataset: synthetic, steps: 8, workers: 2, backend: dist}\n"
        "axes: {method: [baseline, terngrad]}\n")
    (grids / "other-task.yaml").write_text("base: {task: lenet-mnist, method: terngrad, steps: 4}\n")
    configs = {c.method: c.to_dict() for c in expand(load_grid(grids / "campaign" / "fig5-again.yaml"))}
    results = tmp_path / "results" / "campaign"
    old = {**configs["terngrad"], "method_version": 1,
           "method_params": {**configs["terngrad"]["method_params"], "clip": 3.5}}  # v1's parameters differed
    write_record(results, "old", method="terngrad", images_per_s=3.0, config=old)
    write_record(results, "old-base", images_per_s=1.0, config=configs["baseline"])

    [cell] = build("terngrad", tmp_path / "results", refs, grids=grids)
    assert cell.values == [] and cell.why_missing.startswith("only records of an older version of the method")
    assert f"left out: commbench sweep fig5-again --out {results} runs them again" in cell.why_missing
    assert "other-steps" not in cell.why_missing and "other-task" not in cell.why_missing
    [cell] = build("terngrad", tmp_path / "results", refs)
    assert "left out: re-run the grid that made them" in cell.why_missing
