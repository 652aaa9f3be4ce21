"""The tables ``commbench model`` prints: each model's rows and the notes that say where every number came
from, computed from values the command line has already read and checked (``cli/model.py`` only parses)."""
from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
import platform
import socket
from dataclasses import dataclass
from typing import Any

from commbench.analysis.perfmodel import alphabeta, ssdsgd, terngrad
from commbench.analysis.perfmodel.gradient_bytes import gradient_bytes, layer_groups
from commbench.config import ConfigError
from commbench.config.resolve import method_class
from commbench.methods import registry


@dataclass(frozen=True)
class Network:
    bytes_per_s: float
    latency_s: float
    described: str  # where the two numbers came from, for the notes


@dataclass(frozen=True)
class StepTime:
    """One worker's computation per step, and where it came from (--step-time, a record)."""
    seconds: float | None
    batch: int | None
    source: str


def method_overrides(settings: dict[str, Any], methods: list[str]) -> dict[str, dict]:
    """``--set method.x=v`` applied to each listed method that has parameter x."""
    from commbench.methods import param_fields

    out: dict[str, dict] = {m: {} for m in methods}
    for key, value in settings.items():
        if not key.startswith("method."):
            raise ConfigError(f"--set {key}: only method.<param> settings apply to the model")
        name = key.split(".", 1)[1]
        takers = [m for m in methods if name in param_fields(method_class(m).Params)]
        if not takers:
            raise ConfigError(f"--set {key}: none of {', '.join(methods)} has parameter {name!r}")
        for m in takers:
            out[m][name] = value
    return out


def paper_batch(task: str) -> int:
    """Samples per worker in the task's default recipe (global batch / workers)."""
    from commbench.tasks import TASKS

    recipe = next(iter(TASKS[task].recipes.values()))
    workers = recipe["workers"].value if "workers" in recipe else 1
    return recipe["global_batch"].value // workers


def terngrad_table(task: str, methods: list[str], step: StepTime, net: Network, *, gpus_per_node: int,
                   nodes: list[int], gpu_gpu: float | None, cpu_gpu: float | None, scaling: str,
                   fraction_sent: float | None, overrides: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """Throughput per (method, nodes) from TernGrad's model (supp. Eq. 6-9), and its speed-up over the baseline."""
    threshold_methods = registry.members(registry.THRESHOLD)
    if fraction_sent is not None and not set(methods) & set(threshold_methods):
        raise ConfigError(f"--fraction-sent: only for the threshold methods {', '.join(threshold_methods)}")
    batch = step.batch or paper_batch(task)
    gwd, cwd = gpu_gpu or terngrad.PCIE3_X16.value, cpu_gpu or terngrad.PCIE3_X16.value
    rows, per = [], {}
    for method in methods:
        g = gradient_bytes(task, method, overrides[method],
                           fraction_sent=fraction_sent if method in threshold_methods else None)
        for j in nodes:
            p = terngrad.predict(task, method, gpus_per_node * j, net.bytes_per_s, step_time_s=step.seconds,
                                 batch=batch, gpus_per_node=gpus_per_node, latency_s=net.latency_s,
                                 gpu_gpu_bytes_per_s=gwd, cpu_gpu_bytes_per_s=cwd, scaling=scaling,
                                 grad_bytes=g.sent)
            per[(method, j)] = p.images_per_s
            rows.append({"method": method, "gpus_per_node": gpus_per_node, "nodes": j, "workers": p.workers,
                         "grad_bytes": int(g.sent), "iteration_s": p.iteration_s, "comm_s": p.comm_s,
                         "images_per_s": p.images_per_s})
    reference = "baseline" if "baseline" in methods else methods[0]
    for r in rows:
        r[f"speedup_vs_{reference}"] = r["images_per_s"] / per[(reference, r["nodes"])]
    notes = [f"TernGrad performance model (supp. Eq. {'6-7' if scaling == 'strong' else '8-9'}, "
             f"{scaling} scaling), task {task}, K = {batch} samples {'in all' if scaling == 'strong' else 'per worker'}",
             f"step time {step.seconds:.4g} s from {step.source}; T(1,1,K,|g|) = step + |g| / C_cwd",
             f"network C_nwd/C_ncost: {net.described}",
             f"C_gwd {gwd:.4g} B/s, C_cwd {cwd:.4g} B/s" + ("" if gpu_gpu and cpu_gpu
                                                             else f" (default: {terngrad.PCIE3_X16.source})"),
             "|g| = bytes one worker sends per step, from one ledgered step of the method (paper parameters of "
             "the task, then --set)"]
    return rows, notes


def figure5_table(utilization: float) -> tuple[list[dict], list[str], dict]:
    """TernGrad's Figure 5 from the model, every parameter with its source, and the 3.04x check."""
    if not 0 < utilization <= 1:
        raise ConfigError(f"--utilization: must be in (0, 1], got {utilization}")
    curves = terngrad.figure5(utilization=utilization)
    by = {(c.cluster, c.task, c.method): c for c in curves}
    rows = [{"cluster": c.cluster, "task": c.task, "gpus": n, "baseline_images_per_s": base_v,
             "terngrad_images_per_s": tern_v, "speedup": tern_v / base_v}
            for c in curves if c.method == "baseline"
            for n, base_v, tern_v in zip(c.gpus, c.images_per_s, by[(c.cluster, c.task, "terngrad")].images_per_s)]
    check = terngrad.figure5_speedup(utilization=utilization)
    notes = ["TernGrad Figure 5 from the model (weak scaling, supp. Eq. 8-9); every parameter with its source:"]
    for cl in terngrad.FIGURE5_CLUSTERS.values():
        for name in ("gpus_per_node", "max_nodes", "network_bw", "network_latency_s", "gpu_gpu_bw", "cpu_gpu_bw",
                     "gpu_peak_flops"):
            v = getattr(cl, name)
            notes.append(f"({cl.name}) {name} = {v.value:.4g}: {v.source}")
    for task, b in terngrad.FIGURE5_BATCH.items():
        compute = next(c.compute_s for c in curves if c.task == task and c.cluster == "a")
        notes.append(f"{task}: batch {b.value} per GPU ({b.source}); compute on (a) {compute:.4g} s")
    notes.append(f"utilization {utilization} ({terngrad.FIGURE5_UTILIZATION.source})")
    notes += [_figure5_check_note(label, v, check) for label, v in check["variants"].items()]
    return rows, notes, {"speedup_check": check}


def _figure5_check_note(label: str, v: dict, check: dict) -> str:
    implied = v["compute_s_for_paper_speedup"]
    return (f"AlexNet, 8 GPUs (4 x 2 nodes), 1 Gbps: model {v['speedup']:.2f}x vs paper {check['paper_speedup']}x "
            f"-> {'reproduced' if abs(v['speedup'] - check['paper_speedup']) < 0.05 else 'NOT reproduced'} "
            f"(TernGrad {label}: |g| {v['terngrad_grad_bytes']:.0f} B vs baseline "
            f"{check['baseline_grad_bytes']:.0f} B); "
            f"3.04x would need a single-GPU compute of {implied:.3g} s per {check['batch_per_gpu']} images"
            + (f" ({v['images_per_s_per_gpu_for_paper_speedup']:.0f} images/s per GPU, utilization "
               f"{v['utilization_for_paper_speedup']:.3f})" if implied > 0 else " (none: above the bound)"))


def ssdsgd_costs(task: str, step: StepTime, net: Network | None, direct: dict[str, float | None],
                 backward_share: float | None, overrides: dict) -> tuple[ssdsgd.IterationCosts, list[str]]:
    """SSD-SGD's per-iteration costs: T_f, T_b, T_c as given, else estimated from the step time, the network and
    the bytes the method sends; then any cost given directly."""
    notes = [f"SSD-SGD iteration-time model (Eq. 2, 4, 7), task {task}"]
    if backward_share is not None and not 0 < backward_share < 1:
        raise ConfigError(f"--backward-share: must be in (0, 1), got {backward_share}")
    if all(direct[k] is not None for k in ("tf", "tb", "tc")):
        if step.seconds is not None:
            raise ConfigError("--step-time/--record: not with --tf, --tb and --tc (they give the costs)")
        costs = ssdsgd.IterationCosts(t_f=direct["tf"], t_b=direct["tb"], t_c=direct["tc"],
                                      h_b_last=direct["tb"] / len(layer_groups(task)))
        notes.append(f"T_f, T_b, T_c as given; h_b^L = T_b / L ({ssdsgd.LAYER_BACKWARD})")
    else:
        if step.seconds is None:
            raise ConfigError("step time: give --step-time SECONDS or --record PATH (or --tf, --tb and --tc)")
        costs = ssdsgd.task_costs(task, step.seconds, net.latency_s, 1.0 / net.bytes_per_s, overrides,
                                  backward_share)
        share = "given" if backward_share is not None else "from counted FLOPs"
        notes += [f"T_f + T_b = {step.seconds:.4g} s from {step.source}; backward share "
                  f"{costs.t_b / step.seconds:.3f} ({share})",
                  f"network: {net.described}; T_c = push + pull ({ssdsgd.SYNC_AND_UPDATE_S.source})",
                  ssdsgd.PUSH_TIME, ssdsgd.LAYER_BACKWARD, ssdsgd.LAYER_COMM, ssdsgd.LOCAL_UPDATE_FIRST_S.source]
    names = {"tf": "t_f", "tb": "t_b", "tc": "t_c", "hb_last": "h_b_last", "hc_first": "h_c_first",
             "hloc_first": "h_loc_first", "hs": "h_s_total"}
    changes = {names[k]: v for k, v in direct.items() if v is not None}
    if changes:
        costs = dataclasses.replace(costs, **changes)
        notes.append("given directly: " + ", ".join(f"{k} = {v:.4g} s" for k, v in changes.items()))
    return costs, notes


def ssdsgd_table(task: str, ks: list[int], step: StepTime, costs: ssdsgd.IterationCosts,
                 notes: list[str]) -> tuple[list[dict], list[str]]:
    """The iteration time for each number of delay steps k, beside synchronous SGD's."""
    batch = step.batch or paper_batch(task)
    notes = [*notes, f"costs (s): T_f {costs.t_f:.4g}, T_b {costs.t_b:.4g}, T_c {costs.t_c:.4g}, "
                     f"h_b^L {costs.h_b_last:.4g}, h_c^1 {costs.h_c_first:.4g}, h_loc^1 {costs.h_loc_first:.4g}, "
                     f"S {costs.s:.4g}; batch {batch} per worker",
             "Eq. 4 case 3 = the compute-bound floor T_f + T_b + h_loc^1; Eq. 7 is printed as in the paper "
             "(S = T_c / 2), which ignores case 3"]
    rows = [{"k": r.k, "case": r.case, "t_avg_s": r.t_avg_s, "ssgd_s": r.ssgd_s, "ssgd_case": r.ssgd_case,
             "speedup_vs_ssgd": r.speedup_vs_ssgd, "speedup_vs_k1": r.speedup_vs_k1, "saved_s_eq7": r.saved_s_eq7,
             "images_per_s_per_worker": r.images_per_s}
            for r in ssdsgd.table(costs, ks, batch)]
    return rows, notes


def calibration(ops: list[str], sizes: list[int], world_size: int, repeats: int, warmup: int,
                weighting: str) -> dict:
    """Collectives timed on gloo and fitted (alpha-beta), with the machine and method of the measurement."""
    import torch

    samples = alphabeta.measure_many(ops, sizes, world_size, repeats, warmup)
    fits = {op: {**alphabeta.fit(s, weighting).to_dict(), "samples": [[b, t] for b, t in s]}
            for op, s in samples.items()}
    return {
        "transport": "torch.distributed gloo, CPU, tcp://127.0.0.1 (one thread per process)",
        "world_size": world_size, "hostname": socket.gethostname(), "torch": torch.__version__,
        "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "repeats": repeats, "warmup": warmup, "statistic": "median over repeats of rank 0's time",
        "bytes": "per worker: the tensor each rank passes to all_reduce, or contributes to all_gather",
        "model": "t = alpha_s + beta_s_per_byte * bytes, least squares"
                 + (" of relative residuals (t - fit) / t" if weighting == "relative" else ""),
        "fits": fits,
    }


def render(rows: list[dict], notes: list[str], fmt: str, extra: dict | None = None) -> str:
    """The rows and notes as markdown (notes, then a table), CSV (the rows) or JSON (everything)."""
    if fmt == "json":
        return json.dumps({"notes": notes, **(extra or {}), "rows": rows}, indent=2, default=str) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()

    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return "—" if v is None else str(v)

    lines = [f"- {n}" for n in notes]
    if rows:
        head = list(rows[0])
        lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cell(r[k]) for k in head) + " |" for r in rows]
    return "\n".join(lines) + "\n"
