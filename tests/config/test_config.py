"""Configuration: recipe layering, sources, run ids, --set parsing, grids."""
from __future__ import annotations

import pytest

from commbench.config import ConfigError, parse_set, resolve
from commbench.config.grid import expand, load_grid


def lenet(**kw):
    return resolve({"task": "lenet-mnist", "method": "baseline", **kw})


def test_recipe_values_and_their_sources():
    cfg = lenet()
    assert cfg.steps == 10_000 and cfg.global_batch == 64
    assert cfg.optimizer["name"] == "momentum" and cfg.optimizer["momentum"] == 0.9
    assert cfg.lr_schedule == {**cfg.lr_schedule, "kind": "poly", "base_lr": 0.01, "power": 0.5, "end_lr": 0.0}
    assert cfg.weight_decay == 5e-4 and cfg.ema == 0.9999
    assert cfg.sources["lr_schedule.base_lr"].startswith("TernGrad Sec. 4.1")
    assert cfg.dataset == "mnist" and cfg.overrides == {}


def test_vanilla_recipe_and_user_override_are_recorded():
    cfg = lenet(recipe="vanilla", steps=300, dataset="fashion-mnist")
    assert cfg.optimizer["name"] == "sgd" and cfg.lr_schedule["base_lr"] == 0.1
    assert cfg.overrides["steps"] == {"paper": 10_000, "used": 300, "by": "set by user"}
    assert cfg.overrides["dataset"]["paper"] == "mnist"


def test_tier_shortens_and_says_so():
    cfg = lenet(tier="smoke")
    assert cfg.steps == 300
    assert cfg.overrides["steps"]["by"].startswith("tier smoke")


def test_epochs_become_steps():
    assert lenet(epochs=1).steps == 60_000 // 64 + 1  # ceil(60000 / 64)


def test_batch_splits_over_workers():
    assert lenet(workers=4).batch_per_worker == 16
    with pytest.raises(ConfigError, match="global_batch"):
        lenet(workers=3)


def test_run_id_is_deterministic_and_ignores_where_data_lives():
    a, b = lenet(steps=10), lenet(steps=10, data_root="/elsewhere", threads=1)
    assert a.run_id == b.run_id
    assert a.run_id != lenet(steps=11).run_id
    assert a.run_id.startswith("lenet-mnist_baseline_w1_")


@pytest.mark.parametrize("settings, item", [
    ({"task": "nope"}, "task"),
    ({"method": "nope"}, "method"),
    ({"dataset": "cifar10"}, "dataset"),
    ({"workers": 0}, "workers"),
    ({"bogus.key": 1}, "bogus.key"),
    ({"method.clip": 2.5}, "method.clip"),
    ({"optimizer.name": "lamb"}, "optimizer.name"),
    ({"lr_schedule.kind": "step"}, "lr_schedule.step_size"),
    ({"steps": 1.5}, "steps"),
])
def test_bad_settings_name_the_item(settings, item):
    with pytest.raises(ConfigError) as err:
        resolve({"task": "lenet-mnist", "method": "baseline", **settings})
    assert item in str(err.value)


def test_exponent_without_dot_is_a_number():
    assert lenet(**parse_set(["lr_schedule.base_lr=1e-4", "weight_decay=4e-5"])).lr_schedule["base_lr"] == 1e-4


@pytest.mark.parametrize("method, key, value", [("terngrad", "packing", "4bit"), ("terngrad", "clip", -1),
                                                ("terngrad", "scaler", "mean"), ("wgt", "threshold", 0)])
def test_bad_method_values_name_the_key(method, key, value):
    with pytest.raises(ConfigError, match=rf"^method\.{key} must"):
        resolve({"task": "lenet-mnist", "method": method, f"method.{key}": value})


def test_parse_set_reads_yaml_scalars():
    assert parse_set(["a=0", "b=true", "c=[80, 120]", "d=0.5", "e=tf"]) == \
        {"a": 0, "b": True, "c": [80, 120], "d": 0.5, "e": "tf"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_set(["novalue"])


def write(tmp_path, text):
    p = tmp_path / "grid.yaml"
    p.write_text(text)
    return p


def test_grid_cartesian_product_with_exclusion(tmp_path):
    grid = load_grid(write(tmp_path, """
base: {task: lenet-mnist, method: baseline, steps: 10}
axes: {workers: [1, 2, 4], seed: [1, 2]}
exclude: [{workers: 4, seed: 2}]
"""))
    runs = expand(grid)
    assert sorted((r.workers, r.seed) for r in runs) == [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1)]
    assert len({r.run_id for r in runs}) == 5


def test_method_param_axis_applies_only_to_methods_that_have_it(tmp_path, request):
    from dataclasses import dataclass

    from commbench.methods import registry
    from commbench.methods.baseline import Baseline

    @dataclass(frozen=True)
    class P:
        clip: float = 2.5

    class WithClip(Baseline):
        name, Params = "withclip", P

    registry.register(WithClip)  # a user's method, for this test only
    request.addfinalizer(lambda: registry.unregister("withclip"))
    runs = expand(load_grid(write(tmp_path, """
base: {task: lenet-mnist, steps: 10}
axes: {method: [baseline, withclip], method.clip: [0, 2.5]}
""")))
    # baseline ignores the clip axis: its two combinations are one run
    assert sorted((r.method, r.method_params.get("clip")) for r in runs) == \
        [("baseline", None), ("withclip", 0.0), ("withclip", 2.5)]


@pytest.mark.parametrize("text, item", [
    ("base: [oops", "not valid YAML"),
    ("base: {task: lenet-mnist}\naxes: {workers: 2}", "axis 'workers'"),
    ("bases: {}", "unknown top-level key 'bases'"),
    ("base: {task: lenet-mnist, method: baseline}\naxes: {method.clip: [0]}", "method.clip"),
    ("base: {task: lenet-mnist}\naxes: {method: [baseline, zip]}", "zip"),
])
def test_malformed_grids(tmp_path, text, item):
    with pytest.raises(ConfigError) as err:
        expand(load_grid(write(tmp_path, text)))
    assert item in str(err.value)


def test_every_config_field_comes_from_one_declaration():
    """A RunConfig field is a declared setting's, bookkeeping, or derived from settings: a new field cannot
    enter the record (and the run id) without a declaration saying whether it is in the id."""
    import dataclasses

    from commbench.config import BOOKKEEPING, DERIVED, SETTINGS, RunConfig, Setting
    from commbench.config.parsers import integer
    from commbench.config.runconfig import config_fields

    fields = {f.name for f in dataclasses.fields(RunConfig)}
    assert fields == {s.config_field for s in SETTINGS} | set(BOOKKEEPING) | set(DERIVED)
    assert len({s.key for s in SETTINGS}) == len(SETTINGS)
    knob = Setting("knob", integer(0), "int", implicit=3)
    grown = [name for name, _type, _field in config_fields(SETTINGS + (knob,))]
    assert set(grown) - fields == {"knob"}  # a new declaration is a new field, with its implicit as its default
    old = {f.name: f.default for f in dataclasses.fields(RunConfig) if f.default is not dataclasses.MISSING}
    assert old == {"method_version": 1, "checkpoint_every": 0, "step_sleep_s": 0.0, "net": None, "node_link": None,
                   "exchange": "after-backward", "bucket_mb": 25.0, "precision": "fp32",
                   "eval_target": None}  # what older records read as


@pytest.mark.parametrize("setting", [s.key for s in __import__("commbench.config").config.SETTINGS])
def test_every_declared_setting_is_checked_and_sourced(setting):
    """From each declaration come its check (a bad value is refused, naming the key) and its source (where
    --dry-run says its value came from)."""
    from commbench.config import describe

    base = {"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic"}
    with pytest.raises(ConfigError) as err:
        resolve({**base, setting: object()})
    assert str(err.value).startswith(f"{setting}: "), err.value
    cfg = resolve(base)
    if setting != "epochs":  # resolved into steps
        assert cfg.sources[setting], setting
        assert any(line.startswith(f"{setting} ") for line in describe(cfg).splitlines())


@pytest.mark.parametrize("key,value", [("data_root", "/elsewhere"), ("threads", 1), ("checkpoint.every", 50),
                                       ("step_sleep_s", 0.5)])
def test_settings_declared_out_of_the_id_leave_it_alone(key, value):
    from commbench.config import SETTING

    base = {"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic"}
    assert not SETTING[key].in_id
    assert resolve({**base, key: value}).run_id == resolve(base).run_id


@pytest.mark.parametrize("key,value", [("seed", 2), ("workers", 2), ("lr_schedule.base_lr", 0.5), ("device", "cpu"),
                                       ("eval.every", 7)])
def test_settings_declared_in_the_id_change_it(key, value):
    base = {"task": "lenet-mnist", "method": "baseline", "dataset": "synthetic", "device": "auto"}
    assert resolve({**base, key: value}).run_id != resolve(base).run_id


def test_a_method_parameter_in_base_applies_to_the_methods_that_have_it(tmp_path):
    from commbench.config.grid import expand, load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, dataset: synthetic, method.threshold: 0.01, method.clip: 0}\n"
                    "axes: {method: [baseline, bgt, terngrad]}\n")
    runs = {c.method: c for c in expand(load_grid(grid))}
    assert runs["bgt"].method_params["threshold"] == 0.01 and runs["terngrad"].method_params["clip"] == 0
    assert "threshold" not in runs["baseline"].method_params
    grid.write_text("base: {task: lenet-mnist, dataset: synthetic, method.k: 3}\naxes: {method: [baseline, bgt]}\n")
    with pytest.raises(ConfigError, match="base setting 'method.k': no method of this grid has that parameter"):
        expand(load_grid(grid))


def test_node_link_is_part_of_the_run_id_and_needs_dist_without_net():
    base = {"task": "lenet-mnist", "dataset": "synthetic", "method": "baseline", "workers": 4, "backend": "dist"}
    plain, limited = resolve(base), resolve({**base, "node_link": "100Mbit"})
    assert limited.node_link == "100mbit" and plain.node_link is None
    assert limited.run_id != plain.run_id and plain.run_id == resolve(base).run_id
    for bad, message in (({"node_link": "fast"}, "node_link: 'fast' is not a link rate"),
                         ({"node_link": "1gbit", "backend": "sim"}, "node_link: .* not backend sim"),
                         ({"node_link": "1gbit", "net": "1gbit"}, "node_link: .* not net=1gbit")):
        with pytest.raises(ConfigError, match=message):
            resolve({**base, **bad})


def test_a_process_on_links_other_than_node_link_refuses_to_start(monkeypatch):
    from commbench.run import node_link
    from commbench.store import provenance

    monkeypatch.setattr(provenance, "link_limits", lambda: {"eth0": 1e9})
    node_link.check_node_link("1gbit")  # as asked: no error
    with pytest.raises(ConfigError, match=r"links of 100mbit, but .*'s are eth0 at 1000 Mbit/s"):
        node_link.check_node_link("100mbit")
    monkeypatch.setattr(provenance, "link_limits", lambda: {})
    with pytest.raises(ConfigError, match="are none limited"):
        node_link.check_node_link("100mbit")


def _node_link_worker(rank: int, port: int, queue) -> None:
    import os

    from commbench.config import ConfigError
    from commbench.methods.comm import make_dist_communicator
    from commbench.run import node_link
    from commbench.store import provenance

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE="2")
    provenance.link_limits = lambda: {"eth0": 1e8 if rank == 0 else 1e9}  # rank 1's node is not limited to 100mbit
    comm = make_dist_communicator(backend="gloo", timeout_s=60)
    try:
        node_link.agree_on_node_link("100mbit", comm)
        queue.put((rank, {"error": None}))
    except ConfigError as exc:
        queue.put((rank, {"error": str(exc)}))
    finally:
        comm.close()


def test_every_process_fails_when_one_nodes_link_is_not_node_link():
    """Two gloo processes, the second on a node whose link is 1 Gbit/s: both fail at once, the one whose link is
    right saying that another process's is not, instead of waiting in its first exchange for a peer that left."""
    from ..gloo import spawn

    results = spawn(_node_link_worker, 2, timeout_s=60)
    assert "1 other process(es) found their node's links other than 100mbit" in results[0]["error"]
    assert "eth0 at 1000 Mbit/s" in results[1]["error"]
