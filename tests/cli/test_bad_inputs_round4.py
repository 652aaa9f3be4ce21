"""The fourth torture round's bad inputs (the hardening issue): each exits 2 with one stderr line
``commbench: error: ...`` naming the bad item, prints nothing on stdout and writes nothing anywhere, run in this
process (each ``commbench`` child would cost seconds of imports)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from commbench.cli import main

from ..analysis.test_tta_projection import _runs

GRID = "base: {task: lenet-mnist, dataset: synthetic, method: baseline, backend: sim, steps: 1}\naxes: {seed: [1]}\n"
RUN = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--method", "baseline", "--backend", "sim",
       "--steps", "1", "--results", "out"]
TWO_GB = 2 ** 31
TTA = ["model", "tta", "--results", "R", "--calibrate-on", "1gbit", "--cluster", "terngrad-fig5"]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A working folder holding what the cases name: a grid, a file where a folder is expected, an empty results
    folder; temporary files go below it too, so that a stray one would be seen."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "g.yaml").write_text(GRID)
    (tmp_path / "afile").write_text("a file, not a folder\n")
    (tmp_path / "R" / "runs").mkdir(parents=True)
    return tmp_path


def everything(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_size) for p in root.rglob("*"))


def refused(folder: Path, capsys, argv: list[str]) -> str:
    """The one error line of ``commbench ARGV``, having checked the bad-input contract."""
    before = everything(folder)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capsys.readouterr()
    assert stopped.value.code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("commbench: error: "), err
    assert everything(folder) == before  # no record, no claims/, no temporary file, no figure
    return lines[0]


def sparse(path: Path, size: int = TWO_GB) -> None:
    """A file of ``size`` bytes that takes no disk space (a hole)."""
    path.touch()
    os.truncate(path, size)


def write(folder: Path, name: str, text: str) -> None:
    (folder / name).write_text(text)


@pytest.mark.parametrize("argv, named", [
    pytest.param(RUN + ["--set", "threads=10000000000"], "threads: must be <= 4,096", id="1-threads"),
    pytest.param(["sweep", "g.yaml", "--results", "out"], "threads: must be <= 4,096", id="1-threads-axis"),
    pytest.param(["model", "terngrad", "--step-time", "0.1", "--nodes", "1..1000000000"], "--nodes", id="5-nodes"),
    pytest.param(["model", "ssdsgd", "--step-time", "0.1", "--k", "1..1000000000"], "--k", id="6-k"),
    pytest.param(["model", "terngrad", "--step-time", "0.1", "--nodes", "9" * 400], "--nodes: 999", id="7-digits"),
    pytest.param(["model", "calibrate", "--sizes", "1000GiB", "--repeats", "1", "--warmup", "0"], "--sizes: '1000GiB'",
                 id="8-sizes"),
    pytest.param(["model", "calibrate", "--world-size", "1000000000"], "--world-size", id="8-world-size"),
    pytest.param(["model", "calibrate", "--world-size", "64", "--sizes", "256MiB"], "GiB at once", id="8-memory"),
    pytest.param(TTA + ["--sweep-bandwidth", "x.xyz"], "--sweep-bandwidth x.xyz", id="9-format"),
    pytest.param(TTA + ["--sweep-bandwidth", "."], "--sweep-bandwidth .: not a file name", id="10-dot"),
    pytest.param(TTA + ["--sweep-bandwidth", ".png"], "--sweep-bandwidth .png", id="10-hidden"),
    pytest.param(TTA + ["--sweep-bandwidth", "/proc/self/map.png"], "/proc/self/map.png", id="10-proc"),
    pytest.param(TTA + ["--sweep-bandwidth", "afile/map.png"], "afile/map.png", id="10-below-a-file"),
    pytest.param(TTA + ["--sweep-bandwidth", "map.png", "--figures", "afile"], "--figures afile", id="10-figures"),
    pytest.param(["model", "tta", "--results", "R", "--latency-us", "-1"], "--latency-us", id="11-negative"),
    pytest.param(["model", "tta", "--results", "R", "--latency-us", "1e999"], "--latency-us", id="12-inf"),
    pytest.param(["model", "tta", "--results", "R", "--latency-us", "1e300"], "--latency-us", id="13-huge"),
    pytest.param(["table", "--results", "R", "--out", "/proc/self/x"], "--out /proc/self/x", id="14-table-proc"),
    pytest.param(["table", "--results", "R", "--out", "afile/t.md"], "--out afile/t.md", id="15-table-below-a-file"),
    pytest.param(["plot", "--results", "R", "--out", "/proc/self/figs"], "--out /proc/self/figs", id="16-plot"),
    pytest.param(["report", "--results", "R", "--out", "/proc/self/rep"], "--out /proc/self/rep", id="17-report"),
    pytest.param(["model", "terngrad", "--step-time", "0.1", "--out", "afile/m.md"], "--out afile/m.md",
                 id="model-out"),
    pytest.param(["data", "mnist", "--data-root", "afile/x"], "afile/x", id="19-data-root"),
    pytest.param(["model", "terngrad", "--step-time", "0.1", "--method", "bgt", "--fraction-sent", "0"],
                 "--fraction-sent", id="fraction-sent-0"),
    pytest.param(RUN + ["--set", "a" * 100_000 + "=1"], "unknown key 'aaa", id="long-key"),
    pytest.param(["sweep", "g.yaml", "--dry-run", "--max-runs", "0"], "--max-runs: at least 1", id="max-runs-0"),
    pytest.param(["status", "--results", "R", "--only", "seed=1"], "--only: only with --grid", id="status-only"),
    pytest.param(["status", "--results", "R", "--max-runs", "-1"], "--max-runs: only with --grid",
                 id="status-max-runs"),
])
def test_round_four_bad_inputs(folder, capsys, argv, named):
    if argv[:2] == ["sweep", "g.yaml"]:
        write(folder, "g.yaml", GRID.replace("seed: [1]", "threads: [10000000000]"))
    line = refused(folder, capsys, argv)
    assert named in line and ".tmp" not in line
    assert len(line) < 300  # a value echoed in full would make a page of one line


@pytest.mark.timeout(60)  # each once hung for good
@pytest.mark.parametrize("argv, big", [
    (["sweep", "big.yaml", "--dry-run"], "big.yaml"),
    (["sweep", "g.yaml", "--launcher", "slurm", "--profile", "p.yaml", "--dry-run"], "p.yaml"),
    (TTA[:4] + ["--cluster", "c.yaml"], "c.yaml"),
    (["model", "terngrad", "--step-time", "0.1", "--calibration", "cal.json"], "cal.json"),
])
def test_a_two_gigabyte_user_file_is_refused_unread(folder, capsys, argv, big):
    sparse(folder / big)
    line = refused(folder, capsys, argv)
    assert big in line and "2,147,483,648 bytes" in line


def test_a_fifo_given_as_a_calibration_is_refused_without_waiting_for_a_writer(folder, capsys):
    os.mkfifo(folder / "cal.json")
    assert "a FIFO" in refused(folder, capsys, ["model", "terngrad", "--step-time", "0.1", "--calibration", "cal.json"])


@pytest.mark.parametrize("grid, named", [
    pytest.param(GRID.replace("axes: {seed: [1]}", "axes: {method: [{a: 1}]}"), "method: unknown method {'a': 1}",
                 id="4-dict-value"),
    pytest.param(GRID.replace("axes: {seed: [1]}", "axes: {recipe: [[1]]}"), "recipe", id="4-list-recipe"),
    pytest.param(GRID.replace("seed: [1]", '"seed, seed": [[1, 2]]'), "names 'seed' twice", id="tied-twice"),
    pytest.param(GRID.replace("seed: [1]", 'seed: [1], "seed, workers": [[2, 1]]'), "and so does axis 'seed'",
                 id="two-axes"),
    pytest.param(GRID.replace("seed: [1]", "seed: [1], seed: [2]"), "key 'seed' appears twice", id="duplicate-key"),
    pytest.param(GRID + "exclude: [{seed: 1}]\n", "exclude removes every one of its 1 runs", id="exclude-all"),
])
def test_a_questionable_grid_is_refused_by_name(folder, capsys, grid, named):
    write(folder, "g.yaml", grid)
    for argv in (["sweep", "g.yaml", "--dry-run"], ["sweep", "g.yaml", "--results", "out"]):
        line = refused(folder, capsys, argv)
        assert "g.yaml" in line and named in line


def test_brackets_inside_a_quoted_description_are_text_not_nesting(folder, capsys):
    write(folder, "g.yaml", f"description: '{'[' * 150} and a \"quote\"'  # {'{' * 150}\n" + GRID)
    assert main(["sweep", "g.yaml", "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith("lenet-mnist_baseline_w1_")


def test_a_bare_crossover_name_goes_into_the_results_folder_and_the_numbers_read_as_numbers(folder, capsys):
    """A bare --sweep-bandwidth name lands in RESULTS/figures (never the folder the command ran in), or in
    --figures; the markdown says yes/no, 0.54x and percentages rather than True and raw floats."""
    _runs(folder / "R", "1gbit", 1.25e8)
    _runs(folder / "R", "100mbit", 1.25e7)
    tta = TTA + ["--validate-on", "100mbit"]
    assert main(tta + ["--sweep-bandwidth", "map.png"]) == 0
    out = capsys.readouterr().out
    assert (folder / "R" / "figures" / "map.png").stat().st_size > 10_000 and not (folder / "map.png").exists()
    assert "crossover map: R/figures/map.png" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| 100mbit")]
    assert rows and all(row[-2] in ("yes", "no") and row[-1].endswith("x |") for row in rows)
    assert all(row[-3].endswith("%") for row in rows) and "True" not in out
    assert main(tta + ["--sweep-bandwidth", "map.svg", "--figures", "figs"]) == 0
    assert (folder / "figs" / "map.svg").read_text().lstrip().startswith("<?xml")
