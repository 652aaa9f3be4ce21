"""The results folder's layout is named in one place (bench/store/results_folder.py): its paths are the ones the
writers produce and the committed results read from, every command that reads a results folder refuses a missing
one alike, and no other module joins the layout's folder names onto a path (the layout cannot spread again)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from commbench.cli import build_parser, main
from commbench.config import resolve
from commbench.launch.owner import claim
from commbench.launch.queue import note_submission, submissions
from commbench.run.checkpoint import Checkpoints
from commbench.store.records import (EMPTY_METRICS, checkpointed_part_way, iter_records, make_record, read_record,
                                     set_aside, write_record)
from commbench.store.results_folder import ReportFolder, ResultsFolder

from ..test_layering import MODULES, REPO

THE_LAYOUT = "commbench.store.results_folder"


def a_config():
    return resolve({"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic", "workers": 1,
                    "backend": "sim", "steps": 2})


def store_record(out: Path, run_id: str, status: str = "done") -> Path:
    metrics = {**EMPTY_METRICS, "steps": 2, "top1": 0.5, "bytes_sent": 1000, "bytes_received": 1000,
               "bytes_fp32_equiv": 4000}
    return write_record(out, make_record(run_id, status, None, a_config().to_dict(), {}, metrics, []))


# -- the paths: exactly those every results folder already has ----------------------------------------------
def test_the_paths_are_the_layout_results_folders_already_have(tmp_path):
    folder = ResultsFolder(tmp_path)
    assert folder.record("r1") == tmp_path / "runs" / "r1.json" and folder.runs == tmp_path / "runs"
    assert folder.checkpoints("r1") == tmp_path / "checkpoints" / "r1"
    assert folder.checkpoint_index("r1") == tmp_path / "checkpoints" / "r1" / "latest.json"
    assert folder.claims == tmp_path / "claims" and folder.progress("r1") == tmp_path / "claims" / "r1.progress"
    assert folder.logs("r1") == tmp_path / "logs" / "r1" and folder.weights("r1") == tmp_path / "weights" / "r1.pt"
    assert folder.slurm_code == tmp_path / "slurm" / "code"
    assert folder.slurm_batch("b") == tmp_path / "slurm" / "batches" / "b"
    assert folder.slurm_jobs == tmp_path / "slurm" / "jobs" and folder.job_note("r1") == tmp_path / "slurm/jobs/r1.json"
    assert folder.figures == tmp_path / "figures" and folder.campaign.runs == tmp_path / "campaign" / "runs"
    report = folder.report
    assert report == ReportFolder(tmp_path / "report") and report.figures == tmp_path / "report" / "figures"
    assert (report.markdown, report.page) == (tmp_path / "report" / "report.md", tmp_path / "report" / "report.html")


def test_a_folder_is_a_value_made_from_a_path_or_a_string(tmp_path):
    assert ResultsFolder(str(tmp_path)) == ResultsFolder(tmp_path) == ResultsFolder.of(str(tmp_path))
    assert ResultsFolder.of(ResultsFolder(tmp_path)).root == tmp_path
    with pytest.raises(AttributeError):
        ResultsFolder(tmp_path).root = Path("elsewhere")  # frozen: a folder's paths cannot change under a reader


def test_a_run_entry_names_the_folder_it_lies_in(tmp_path):
    folder = ResultsFolder(tmp_path)
    for entry in (folder.record("r"), folder.checkpoints("r"), folder.progress("r"), folder.logs("r"),
                  folder.weights("r")):
        assert ResultsFolder.holding(entry) == folder, entry
    assert Checkpoints(folder.checkpoints("r")).root == tmp_path  # the checkpoints' root for safe writes


# -- the writers write where the folder says ---------------------------------------------------------------
def test_a_record_is_written_and_read_where_the_folder_says(tmp_path):
    folder = ResultsFolder(tmp_path)
    assert store_record(tmp_path, "r1") == folder.record("r1") and folder.record("r1").is_file()
    assert read_record(tmp_path, "r1")["run_id"] == "r1"
    assert set_aside(tmp_path, "r1").parent == folder.runs and not folder.record("r1").exists()


def test_records_and_checkpoints_are_found_below_any_folder_of_results_folders(tmp_path):
    inner = ResultsFolder(tmp_path / "grid-a")
    store_record(inner.root, "r1")
    index = inner.checkpoint_index("r2")
    index.parent.mkdir(parents=True)
    index.write_text(json.dumps({"step": 7, "folder": "step-000000007", "files": []}))
    assert [r["run_id"] for r in iter_records(tmp_path)] == ["r1"]
    assert list(ResultsFolder(tmp_path).checkpoint_indexes()) == [index]
    assert checkpointed_part_way(tmp_path) == [("r2", 7)]


def test_a_job_note_and_a_claim_are_where_the_folder_says(tmp_path):
    folder = ResultsFolder(tmp_path)
    config = {"task": "lenet-mnist", "method": "baseline", "workers": 1, "steps": 2}
    note_submission(tmp_path, {"run_id": "r1", "job_id": "12", "submitted_at": "t", "config": config})
    assert folder.job_note("r1").is_file() and list(submissions(tmp_path)) == ["r1"]
    with claim(folder.claims, "r1"):
        assert (folder.claims / "r1.lock").is_file()


def test_a_run_leaves_its_record_and_weights_where_the_folder_says(tmp_path):
    from commbench.launch.runner import execute

    cfg = a_config()
    result = execute(cfg, tmp_path, save_weights=True, show_progress=False)
    folder = ResultsFolder(tmp_path)
    assert result.record["status"] == "done", result.record["error"]
    assert result.path == folder.record(cfg.run_id) and folder.record(cfg.run_id).is_file()
    assert folder.weights(cfg.run_id).is_file()
    assert folder.claims.is_dir() and not folder.progress(cfg.run_id).exists()  # the claim's room, left tidy
    again = execute(cfg, tmp_path, show_progress=False)
    assert again.skipped and again.path == folder.record(cfg.run_id)


def test_the_committed_results_read_through_the_folder():
    campaign = ResultsFolder(REPO / "results").campaign
    files = list(campaign.record_files())
    assert files and all(path.parent == campaign.runs for path in files)
    assert read_record(campaign.root, files[0].stem)["run_id"] == files[0].stem


# -- every reading command refuses a missing folder alike ----------------------------------------------------
READING = {  # each command that reads --results, with what else it needs to get as far as reading
    "table": [], "compare": ["--factor", "precision", "--reference", "fp32"], "plot": [], "report": [],
    "status": [], "model tta": [],
}
WRITING = {"run", "sweep"}  # --results is where they write: a missing folder is made


def commands_taking_results() -> set[str]:
    """Every command (and model's subcommands) with a --results option, from the parser itself."""
    found = set()

    def walk(parser, prefix: str) -> None:
        for action in parser._actions:
            if "--results" in action.option_strings:
                found.add(prefix.strip())
            for name, sub in (getattr(action, "choices", None) or {}).items() if action.dest in (
                    "command", "model_command") else ():
                walk(sub, f"{prefix} {name}")

    walk(build_parser(), "")
    return found


def test_every_command_taking_results_is_checked_here():
    assert commands_taking_results() == set(READING) | WRITING


@pytest.mark.parametrize("command", sorted(READING))
@pytest.mark.parametrize("missing", ["nowhere", "a-file"])
def test_a_reading_command_refuses_a_missing_folder_in_one_line(command, missing, tmp_path, capsys):
    (tmp_path / "a-file").write_text("not a folder")
    where = str(tmp_path / missing)
    with pytest.raises(SystemExit) as stopped:
        main([*command.split(), "--results", where, *READING[command]])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"commbench: error: --results {where}: no such folder"]


# -- nowhere else is the layout spelled out ----------------------------------------------------------------
FOLDER_NAMES = {"runs", "checkpoints", "claims", "logs", "weights", "slurm", "figures", "report", "campaign"}
PATH_CALLS = {"Path", "PurePath", "joinpath", "glob", "rglob", "join", "with_name", "mkdir"}


def _texts(node: ast.AST) -> list[str]:
    """The literal text of a string or of an f-string's fixed parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return []


def _names_a_layout_folder(node: ast.AST) -> bool:
    return any(part in FOLDER_NAMES for text in _texts(node) for part in text.split("/"))


def layout_joins(source: str) -> list[int]:
    """The lines where a layout folder's name is joined onto a path: an operand of ``/`` or an argument of a
    path call (``Path("runs")``, ``.rglob("runs/*.json")``). Names in messages, dict keys and columns are text."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            operands = node.args if name in PATH_CALLS else []
        else:
            continue
        lines += [node.lineno for operand in operands if _names_a_layout_folder(operand)]
    return sorted(lines)


def test_the_pattern_finds_the_joins_and_only_them():
    joins = ('out / "runs" / f"{i}.json"\nPath(out, "checkpoints")\nroot.rglob("runs/*.json")\n'
             'f(root / f"claims/{i}.lock")\nos.path.join(out, "logs")\n')
    assert sorted(layout_joins(joins)) == [1, 2, 3, 4, 5]
    text = ('row["runs"] = 1\nd.get("claims")\nprint(f"{out}: runs/ (records), logs/")\nwriter(["runs"])\n'
            '"""OUT/runs/<run_id>.json"""\nn / "runs_per_s"\n')
    assert layout_joins(text) == []


def test_no_module_but_the_layout_joins_its_folder_names():
    spread = [f"{path.relative_to(REPO)}:{line}" for module, path in sorted(MODULES.items()) if module != THE_LAYOUT
              for line in layout_joins(path.read_text())]
    assert not spread, ("the results folder's layout joined outside bench/store/results_folder.py (ask "
                        "ResultsFolder for the path):\n" + "\n".join(spread))
