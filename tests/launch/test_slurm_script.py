"""The batch script for the example GPU profile, compared with a reviewed golden copy (no cluster needed).

A change to the profile, to the resource arithmetic or to submitit shows up here as a diff to review;
regenerate with COMMBENCH_UPDATE_GOLDEN=1 after checking that the new script is what a cluster should get.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from commbench.config import ConfigError, resolve
from commbench.launch.profile import load_profile, run_shape, sbatch_script
from commbench.launch.slurm import setup_lines
from commbench.launch.snapshot import CodeSnapshot

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "sbatch-example-gpu-2x4.sh"
CODE = CodeSnapshot(Path("/scratch/sweeps/out/slurm/code/0123456789ab"), "0123456789abcdef0123456789abcdef01234567",
                    False)


def eight_worker_run():
    return resolve({"task": "cifarnet-cifar10", "method": "terngrad", "backend": "dist", "workers": 8})


def test_eight_gpu_dist_run_takes_two_nodes_of_four():
    shape = run_shape(eight_worker_run(), load_profile("example-gpu"))
    assert (shape.nodes, shape.tasks_per_node, shape.tasks, shape.gpus_per_node) == (2, 4, 8, 4)


def test_example_gpu_sbatch_script_matches_golden():
    profile = load_profile("example-gpu")
    script = sbatch_script(profile, run_shape(eight_worker_run(), profile), "commbench-example", setup_lines(CODE),
                           chdir=CODE.path, folder=Path("/scratch/sweeps/out/slurm/batches/b1/%j"), runs=3)
    if os.environ.get("COMMBENCH_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(script)
    assert script == GOLDEN.read_text()
    # the lines a multi-node NCCL job cannot do without, stated once more so a regenerated golden keeps them
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=4", "#SBATCH --gpus-per-node=4",
                 "#SBATCH --array=0-2%3", "#SBATCH --signal=USR2@180", "#SBATCH --requeue",
                 "#SBATCH --partition=gpu", "#SBATCH --account=my-project", "#SBATCH --exclusive",
                 "module load cuda/12.4", "--kill-on-bad-exit=1"):
        assert line in script, line


def test_grid_overrides_win_over_the_profile_and_bad_keys_are_named():
    profile = load_profile("example-gpu", {"gpus_per_node": 8, "time_min": 30})
    assert run_shape(eight_worker_run(), profile).nodes == 1 and profile.time_min == 30
    with pytest.raises(ConfigError, match="gpus_per_nod"):
        load_profile("example-gpu", {"gpus_per_nod": 8})
    with pytest.raises(ConfigError, match="no such file"):
        load_profile("no-such-cluster")


def test_the_setup_lines_quote_a_hostile_results_path(tmp_path):
    """A results folder whose path holds $(...), a space and a quote: the batch script's setup section, run by
    the shell, executes nothing and puts exactly that path first on PYTHONPATH."""
    import subprocess

    from commbench.launch.slurm import setup_lines
    from commbench.launch.snapshot import CodeSnapshot

    marker = tmp_path / "ran"
    hostile = tmp_path / f"res $(touch {marker}) it's `touch {marker}`" / "slurm" / "code" / "abc"
    lines = setup_lines(CodeSnapshot(hostile, "0" * 40, False))
    script = "\n".join([*lines, 'printf %s "$PYTHONPATH"'])
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and not marker.exists()
    assert done.stdout == str(hostile)


@pytest.mark.parametrize("control", ["\n", "\r", "\x00", "\x1b"])
def test_a_control_character_in_the_results_path_is_refused_before_anything_is_written(tmp_path, capsys, control):
    """submitit quotes a value on one line; a line break in the results path would end the quoted line of the batch
    script (``#SBATCH --chdir='...``) and run what follows. Refused in one line, exit 2, before any file is made."""
    from commbench.cli import main

    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, dataset: synthetic, method: baseline, steps: 1}\naxes: {seed: [1]}\n")
    results = tmp_path / f"out{control}touch PWNED #"
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", str(grid), "--launcher", "slurm", "--profile", "example-gpu", "--results", str(results)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and "control character" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.yaml"]


def test_a_line_break_never_reaches_the_submission(tmp_path):
    """The submission itself checks the path it writes into the script, whoever calls it."""
    from commbench.launch.profile import load_profile
    from commbench.launch.slurm import submit

    out = tmp_path / "a\nb"
    with pytest.raises(ConfigError, match="control character"):
        submit([eight_worker_run()], out, load_profile("example-gpu"), "g")
    assert list(tmp_path.iterdir()) == []
