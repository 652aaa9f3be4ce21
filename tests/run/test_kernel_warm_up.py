"""The fused codecs' numba kernels are compiled (or loaded from numba's cache) before the training clock starts:
a TernGrad run's first step once carried 11.5 s of compilation in its train_s, images/s and time to target. The
warm-up changes no computed number: it draws from no generator and throws its results away."""
from __future__ import annotations

import gc

import pytest

from commbench.config import resolve
from commbench.methods.codecs import fused_ternary, fused_threshold
from commbench.methods.comm import SimCommunicator
from commbench.run import train as train_module
from commbench.config.resolve import server_count
from commbench.run.train import Trainer, train

numba = pytest.importorskip("numba")
from numba.core.dispatcher import Dispatcher  # noqa: E402 (after the skip: numba may be missing)

STEPS = 3


def config(method: str, **params):
    return resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": method, "backend": "sim",
                    "workers": 2, "global_batch": 16, "steps": STEPS, "threads": 1, "eval.every": STEPS,
                    **{f"method.{k}": v for k, v in params.items()}})


def forget_compiled_kernels() -> None:
    """Every fused codec kernel as in a fresh process: its next call compiles it or loads it from the cache
    (both go through ``add_overload``). Other tests in this process have compiled them long ago."""
    modules = {fused_ternary.__name__, fused_threshold.__name__}
    # type(), not isinstance: isinstance asks every object its __class__, and a deprecated torch alias warns
    for kernel in [o for o in gc.get_objects() if issubclass(type(o), Dispatcher)]:
        if getattr(kernel.py_func, "__module__", None) in modules:
            kernel._reset_overloads()


def kernels_added(monkeypatch, cfg) -> tuple[int, int, str]:
    """Train ``cfg`` with fresh kernels: (kernels compiled or loaded outside the timed steps, inside them, the
    final weights' digest)."""
    forget_compiled_kernels()
    added = {"outside": 0, "inside": 0}
    timing = {"on": False}
    original_add, original_step = Dispatcher.add_overload, Trainer.step

    def add_overload(self, cres):
        added["inside" if timing["on"] else "outside"] += 1
        return original_add(self, cres)

    def timed_step(self, step):
        timing["on"] = True
        try:
            return original_step(self, step)
        finally:
            timing["on"] = False

    monkeypatch.setattr(Dispatcher, "add_overload", add_overload)
    monkeypatch.setattr(Trainer, "step", timed_step)
    outcome = train(cfg, SimCommunicator(cfg.workers, num_servers=server_count(cfg)))
    return added["outside"], added["inside"], outcome.metrics["final_weights"]["sha256"]


@pytest.mark.parametrize("method, params", [("terngrad", {}), ("terngrad", {"packing": "base3"}), ("qgt", {}),
                                            ("bgt", {})])
def test_no_kernel_is_compiled_inside_a_timed_step(monkeypatch, method, params):
    outside, inside, _ = kernels_added(monkeypatch, config(method, **params))
    assert outside > 0, "the warm-up compiled nothing: the kernels were not fresh"
    assert inside == 0, f"{inside} kernels compiled inside the timed steps"


def test_without_the_warm_up_the_first_step_compiles(monkeypatch):
    """The control: the count above can fail (the timed steps compile when nothing warmed the kernels up)."""
    monkeypatch.setattr(train_module, "warm_up_kernels", lambda method, device: None)
    _, inside, _ = kernels_added(monkeypatch, config("terngrad"))
    assert inside > 0


@pytest.mark.parametrize("method", ["terngrad", "qgt"])
def test_the_warm_up_changes_no_computed_number(monkeypatch, method):
    """The same final weights, bit for bit, with and without the warm-up."""
    cfg = config(method)
    _, _, warmed = kernels_added(monkeypatch, cfg)
    monkeypatch.setattr(train_module, "warm_up_kernels", lambda method, device: None)
    _, _, cold = kernels_added(monkeypatch, cfg)
    assert warmed == cold


def test_the_warm_up_touches_no_generator():
    import numpy as np
    import torch

    before = torch.get_rng_state(), np.random.get_state()[1].copy()
    fused_ternary.warm_up()
    fused_threshold.warm_up()
    assert torch.equal(torch.get_rng_state(), before[0]) and (np.random.get_state()[1] == before[1]).all()
