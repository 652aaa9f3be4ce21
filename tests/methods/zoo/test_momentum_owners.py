"""Methods that apply momentum themselves (DGC's momentum correction, Signum): resolving a run hands them the
recipe's momentum and gives the optimizer plain SGD, or refuses an optimizer they cannot honour (exit 2)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from commbench.config import ConfigError, resolve

BASE = {"task": "lenet-mnist", "dataset": "synthetic", "workers": 2, "backend": "sim", "steps": 4}


@pytest.mark.parametrize("method", ["dgc", "signum"])
def test_the_recipes_momentum_moves_into_the_method_and_the_optimizer_steps_plain_sgd(method):
    cfg = resolve({**BASE, "method": method, "optimizer.name": "momentum", "optimizer.momentum": 0.8})
    assert cfg.optimizer["name"] == "sgd" and cfg.optimizer["momentum"] == 0.0
    assert cfg.method_params["momentum"] == 0.8
    assert "applied by" in cfg.sources["method.momentum"] and "optimizer.name" in cfg.overrides


def test_a_recipe_without_momentum_gives_the_method_none_and_a_users_value_stands():
    assert resolve({**BASE, "method": "dgc", "optimizer.name": "sgd"}).method_params["momentum"] == 0.0
    cfg = resolve({**BASE, "method": "dgc", "optimizer.name": "momentum", "optimizer.momentum": 0.9,
                   "method.momentum": 0.5})
    assert cfg.method_params["momentum"] == 0.5 and cfg.optimizer["name"] == "sgd"


def test_other_methods_keep_their_optimizer():
    cfg = resolve({**BASE, "method": "topk", "optimizer.name": "momentum", "optimizer.momentum": 0.9})
    assert cfg.optimizer["name"] == "momentum" and cfg.optimizer["momentum"] == 0.9


@pytest.mark.parametrize("settings, message", [
    ({"optimizer.name": "adam"}, "optimizer.name: dgc applies heavy-ball momentum itself"),
    ({"optimizer.name": "momentum", "optimizer.momentum": 0.9, "optimizer.nesterov": True},
     "optimizer.nesterov: dgc applies heavy-ball momentum itself")])
def test_an_optimizer_the_method_cannot_honour_is_refused(settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve({**BASE, "method": "dgc", **settings})


def test_the_cli_refuses_adam_for_dgc_with_one_line_and_exit_2(tmp_path):
    done = subprocess.run([sys.executable, "-m", "commbench", "run", "--task", "lenet-mnist", "--dataset", "synthetic",
                           "--method", "dgc", "--set", "optimizer.name=adam", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "cannot run with adam" in done.stderr and not (tmp_path / "out").exists()
