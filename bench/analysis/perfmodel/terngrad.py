"""TernGrad's performance model: supplementary material Sec. 2, Eq. 6-9 (arXiv appendix B, Eq. 27-29).

A cluster of ``j`` machines with ``i`` GPUs each (N = i j workers) trains a mini-batch of K samples.
Communication (the text before Eq. 6, all-reduce model within and across machines):

    T_comm = |g| / C_gwd * log2(i) + |g| / C_cwd + (C_ncost + |g| / C_nwd) * log2(j)

Strong scaling (the same K spread over N workers), Eq. 6 and 7:

    T_strong = (T(1,1,K,|g|) - |g| / C_cwd) / N + T_comm           Tput_strong = K / T_strong

Weak scaling (K per worker, N K per iteration), Eq. 8 and 9:

    T_weak = T(1,1,K,|g|) + |g| / C_gwd * log2(i) + (C_ncost + |g| / C_nwd) * log2(j)
                                                                    Tput_weak = N K / T_weak

``T(1,1,K,|g|)`` is the profiled time of one mini-batch of K samples on one CPU + one GPU, *including* the
GPU-to-CPU copy of |g| (that is why Eq. 6 subtracts |g| / C_cwd before dividing by N). Units throughout:
bytes, bytes/s, seconds, samples.

Readings of the text (the paper does not say more):

* |g| is "the communication data size" of one gradient exchange. We take it to be the bytes one worker
  hands to the network in one step as the byte ledger counts them (``gradient_bytes``): for TernGrad the
  packed trits plus scalers plus any tensors kept in float32. The model prices every method as an
  all-reduce of |g| bytes; TernGrad's real exchange is an all-gather, whose received volume grows with N,
  which the paper's model does not represent.
* T(1,1,K,|g|) is indexed by |g|: the profile of a method includes the CPU-GPU copy of *that method's*
  gradient. :func:`profiled_time` builds it from a method-independent compute time as
  ``compute + |g| / C_cwd``; with that convention the weak-scaling time is compute + |g|/C_cwd + ... and the
  strong-scaling compute is compute / N, as the paper's derivation intends.
* log2 of a worker count that is not a power of two is used as is (a fractional number of rounds).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from commbench.tasks import Cited, assumed

from commbench.config import ConfigError

SCALINGS = ("strong", "weak")


@dataclass(frozen=True)
class Cluster:
    """One setting of the model (supplementary Sec. 2). Paper symbols in brackets.

    ``gpus_per_node`` [i], ``nodes`` [j]; ``gpu_gpu_bw`` [C_gwd], ``cpu_gpu_bw`` [C_cwd] and ``network_bw``
    [C_nwd] in bytes/s; ``network_latency_s`` [C_ncost] in seconds; ``batch`` [K] in samples (the whole
    mini-batch under strong scaling, per worker under weak scaling); ``profiled_s`` [T(1,1,K,|g|)] in seconds;
    ``grad_bytes`` [|g|] in bytes.
    """

    gpus_per_node: int
    nodes: int
    gpu_gpu_bw: float
    cpu_gpu_bw: float
    network_bw: float
    network_latency_s: float
    batch: int
    profiled_s: float
    grad_bytes: float

    def __post_init__(self):
        for name in ("gpus_per_node", "nodes", "batch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name}: must be a positive integer, got {value!r}")
        for name in ("gpu_gpu_bw", "cpu_gpu_bw", "network_bw", "profiled_s", "grad_bytes"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"{name}: must be a positive number, got {value!r}")
        if not (math.isfinite(self.network_latency_s) and self.network_latency_s >= 0):
            raise ConfigError(f"network_latency_s: must be >= 0, got {self.network_latency_s!r}")

    @property
    def workers(self) -> int:
        """N = i * j."""
        return self.gpus_per_node * self.nodes


def profiled_time(compute_s: float, grad_bytes: float, cpu_gpu_bw: float) -> float:
    """T(1,1,K,|g|) from a compute time that excludes the GPU-to-CPU copy: compute + |g| / C_cwd (seconds)."""
    if not compute_s > 0:
        raise ConfigError(f"step time: must be > 0 seconds, got {compute_s!r}")
    return compute_s + grad_bytes / cpu_gpu_bw


def t_intra(c: Cluster) -> float:
    """Within a machine: |g| / C_gwd * log2(i) + |g| / C_cwd (seconds)."""
    return c.grad_bytes / c.gpu_gpu_bw * math.log2(c.gpus_per_node) + c.grad_bytes / c.cpu_gpu_bw


def t_inter(c: Cluster) -> float:
    """Between machines: (C_ncost + |g| / C_nwd) * log2(j) (seconds)."""
    return (c.network_latency_s + c.grad_bytes / c.network_bw) * math.log2(c.nodes)


def t_comm(c: Cluster) -> float:
    """T_comm(i, j, K, |g|), the sum of the two above (seconds)."""
    return t_intra(c) + t_inter(c)


def t_comp_strong(c: Cluster) -> float:
    """T_comp(i, j, K, |g|) = (T(1,1,K,|g|) - |g| / C_cwd) / N (seconds)."""
    compute = c.profiled_s - c.grad_bytes / c.cpu_gpu_bw
    if compute < 0:
        raise ConfigError(f"profiled_s: {c.profiled_s} s is shorter than the GPU-to-CPU copy it includes "
                          f"(|g| / C_cwd = {c.grad_bytes / c.cpu_gpu_bw} s)")
    return compute / c.workers


def t_strong(c: Cluster) -> float:
    """Eq. 6: seconds per mini-batch of K samples under strong scaling."""
    return t_comp_strong(c) + t_comm(c)


def throughput_strong(c: Cluster) -> float:
    """Eq. 7: K / T_strong (samples/s)."""
    return c.batch / t_strong(c)


def t_weak(c: Cluster) -> float:
    """Eq. 8 (last line): T(1,1,K,|g|) + |g| / C_gwd * log2(i) + (C_ncost + |g| / C_nwd) * log2(j)."""
    return (c.profiled_s + c.grad_bytes / c.gpu_gpu_bw * math.log2(c.gpus_per_node) + t_inter(c))


def throughput_weak(c: Cluster) -> float:
    """Eq. 9: N K / T_weak (samples/s)."""
    return c.workers * c.batch / t_weak(c)


def iteration_time(c: Cluster, scaling: str) -> float:
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling: must be strong or weak, got {scaling!r}")
    return t_strong(c) if scaling == "strong" else t_weak(c)


def throughput(c: Cluster, scaling: str) -> float:
    """Samples/s under ``scaling`` (Eq. 7 or Eq. 9)."""
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling: must be strong or weak, got {scaling!r}")
    return throughput_strong(c) if scaling == "strong" else throughput_weak(c)


def compute_for_speedup(target: float, comm_base_s: float, comm_other_s: float) -> float:
    """Weak scaling only: the compute time C at which (C + comm_base) / (C + comm_other) equals ``target``.

    Used to say what single-GPU time a reported speed-up implies; negative means no compute time gives it
    (the speed-up is above the communication-only bound)."""
    return (comm_base_s - target * comm_other_s) / (target - 1.0)


# -- from a task and a method to a prediction ------------------------------------------------------------
# Bandwidths and latencies the paper does not state. Each is named with its source or marked assumed.
PCIE3_X16 = assumed(15.75e9, "PCIe 3.0 x16 per direction: 8 GT/s x 16 lanes x 128/130 / 8 bits = 15.75e9 "
                             "bytes/s (PCI-SIG); TernGrad gives no intra-node bandwidth (supp. Sec. 2)")
LATENCY_1GBE = assumed(50e-6, "small-message latency of TCP over 1 Gb Ethernet, tens of microseconds; "
                              "TernGrad gives no C_ncost (supp. Sec. 2)")


@dataclass(frozen=True)
class Prediction:
    """One (task, method, cluster) point of the model. Seconds, bytes, samples/s."""

    task: str
    method: str
    scaling: str
    gpus_per_node: int
    nodes: int
    workers: int
    batch: int                # K: per worker (weak) or in all (strong)
    grad_bytes: float         # |g|: bytes one worker sends per step (byte ledger)
    compute_s: float          # the step time given, without the CPU-GPU copy
    iteration_s: float        # Eq. 6 or Eq. 8
    comm_s: float             # T_comm (strong) / the communication part of Eq. 8 (weak)
    images_per_s: float       # Eq. 7 or Eq. 9


def predict(task: str, method: str, workers: int, network_bytes_per_s: float, *, step_time_s: float, batch: int,
            gpus_per_node: int = 1, latency_s: float = LATENCY_1GBE.value,
            gpu_gpu_bytes_per_s: float = PCIE3_X16.value, cpu_gpu_bytes_per_s: float = PCIE3_X16.value,
            scaling: str = "weak", method_params: dict | None = None, fraction_sent: float | None = None,
            grad_bytes: float | None = None) -> Prediction:
    """The model for ``workers`` GPUs, ``gpus_per_node`` per machine (``workers`` must be a multiple).

    ``step_time_s``: one GPU's compute time for ``batch`` samples without the CPU-GPU copy; T(1,1,K,|g|)
    is that plus |g| / C_cwd (:func:`profiled_time`). |g| comes from the byte ledger
    (:func:`gradient_bytes`) unless ``grad_bytes`` is given."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers: must be a positive integer, got {workers!r}")
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ConfigError(f"gpus_per_node: must be a positive integer, got {gpus_per_node!r}")
    if workers % gpus_per_node:
        raise ConfigError(f"workers: {workers} GPUs do not fill nodes of {gpus_per_node}")
    if scaling not in SCALINGS:
        raise ConfigError(f"scaling: must be strong or weak, got {scaling!r}")
    if grad_bytes is None:
        from commbench.analysis.perfmodel.gradient_bytes import gradient_bytes

        grad_bytes = gradient_bytes(task, method, method_params, fraction_sent=fraction_sent).sent
    if not (isinstance(cpu_gpu_bytes_per_s, (int, float)) and cpu_gpu_bytes_per_s > 0):
        raise ConfigError(f"cpu_gpu_bw: must be a positive number, got {cpu_gpu_bytes_per_s!r}")
    c = Cluster(gpus_per_node=gpus_per_node, nodes=workers // gpus_per_node, gpu_gpu_bw=gpu_gpu_bytes_per_s,
                cpu_gpu_bw=cpu_gpu_bytes_per_s, network_bw=network_bytes_per_s, network_latency_s=latency_s,
                batch=batch, profiled_s=profiled_time(step_time_s, grad_bytes, cpu_gpu_bytes_per_s),
                grad_bytes=grad_bytes)
    t = iteration_time(c, scaling)
    comm = t_comm(c) if scaling == "strong" else t - step_time_s
    return Prediction(task, method, scaling, c.gpus_per_node, c.nodes, c.workers, batch, grad_bytes, step_time_s,
                      t, comm, throughput(c, scaling))


def predict_throughput(task: str, method: str, workers: int, network_bytes_per_s: float, *, step_time_s: float,
                       batch: int, **options) -> float:
    """Images/s of ``method`` on ``task`` over ``workers`` GPUs (see :func:`predict` for the options)."""
    return predict(task, method, workers, network_bytes_per_s, step_time_s=step_time_s, batch=batch,
                   **options).images_per_s


# -- Figure 5 -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Figure5Cluster:
    name: str
    description: str
    gpus_per_node: Cited
    max_nodes: Cited
    network_bw: Cited        # bytes/s
    network_latency_s: Cited
    gpu_gpu_bw: Cited        # bytes/s
    cpu_gpu_bw: Cited        # bytes/s
    gpu_peak_flops: Cited    # FLOP/s, FP32


FIGURE5_CLUSTERS = {
    "a": Figure5Cluster(
        "a", "128 nodes x 4 GTX 1080, one PCI switch per node, 1 Gbps Ethernet",
        gpus_per_node=Cited(4, "TernGrad Fig. 5(a) caption: each node has 4 NVIDIA GTX 1080 GPUs"),
        max_nodes=Cited(128, "TernGrad Fig. 5(a) caption: 128-node GPU cluster"),
        network_bw=Cited(1e9 / 8, "TernGrad Fig. 5(a) caption: 1Gbps Ethernet"),
        network_latency_s=LATENCY_1GBE,
        gpu_gpu_bw=assumed(PCIE3_X16.value, "Fig. 5(a) says 'one PCI switch' and no bandwidth: GPU-GPU through "
                                            "the switch at PCIe 3.0 x16, dedicated (supp. footnote 2)"),
        cpu_gpu_bw=PCIE3_X16,
        gpu_peak_flops=assumed(8.873e12, "GTX 1080 spec sheet: 2560 CUDA cores x 1733 MHz boost x 2 FLOP "
                                         "(FP32); the paper profiles T(1,1,K) and does not report it")),
    "b": Figure5Cluster(
        "b", "128 nodes x 4 Tesla P100 over NVLink, 100 Gbps InfiniBand",
        gpus_per_node=Cited(4, "TernGrad Fig. 5(b) caption: each node has 4 NVIDIA Tesla P100 GPUs"),
        max_nodes=Cited(128, "TernGrad Fig. 5(b) caption: 128-node GPU cluster"),
        network_bw=Cited(100e9 / 8, "TernGrad Fig. 5(b) caption: 100 Gbps InfiniBand"),
        network_latency_s=assumed(1e-6, "InfiniBand EDR small-message latency, about a microsecond; "
                                        "the paper gives none"),
        gpu_gpu_bw=assumed(20e9, "Fig. 5(b) says 'connected via NVLink': one NVLink 1.0 link per GPU pair, "
                                 "20 GB/s per direction (NVIDIA P100 whitepaper)"),
        cpu_gpu_bw=assumed(PCIE3_X16.value, "P100 to host over PCIe 3.0 x16"),
        gpu_peak_flops=assumed(10.6e12, "Tesla P100 SXM2 datasheet: 10.6 TFLOPS FP32")),
}
FIGURE5_BATCH = {  # samples per GPU: weak scaling (supp. Eq. 8-9)
    "alexnet-imagenet": Cited(128, "TernGrad Fig. 5 caption: mini-batch size per GPU of AlexNet is 128"),
    "googlenet-imagenet": Cited(64, "TernGrad Fig. 5 caption: GoogLeNet 64 per GPU"),
    "vgg11-imagenet": Cited(32, "TernGrad Fig. 5 caption: VggNet-A (VGG-11, configuration A) 32 per GPU"),
}
FIGURE5_SCALING = Cited("weak", "TernGrad Fig. 5 caption fixes the mini-batch size per GPU: weak scaling, "
                                "supp. Eq. 8-9")
FIGURE5_UTILIZATION = assumed(0.5, "fraction of FP32 peak a GPU sustains on forward+backward; the paper's "
                                   "profiled T(1,1,K) is not reported, so compute = FLOPs x K / (peak x 0.5)")
FIGURE5_SPEEDUP = Cited(3.04, "TernGrad Sec. 5: 3.04x training speedup for AlexNet on 8 GPUs, Fig. 5(a)")
FIGURE5_GPUS = tuple(2 ** e for e in range(10))  # 1 .. 512 GPUs (Sec. 5: "up to 512 GPUs")


def figure5_shape(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(i, j) for a GPU count: fill nodes of ``gpus_per_node`` (fewer GPUs: one partly filled node)."""
    i = min(gpus, gpus_per_node)
    if gpus % i:
        raise ConfigError(f"gpus: {gpus} GPUs do not fill nodes of {gpus_per_node}")
    return i, gpus // i


def figure5_compute_s(task: str, batch: int, cluster: Figure5Cluster,
                      utilization: float = FIGURE5_UTILIZATION.value) -> float:
    """Assumed single-GPU compute time of ``batch`` samples: counted FLOPs / (peak x utilization)."""
    from commbench.analysis.perfmodel.gradient_bytes import flops_per_sample

    if not 0 < utilization <= 1:
        raise ConfigError(f"utilization: must be in (0, 1], got {utilization!r}")
    forward, backward = flops_per_sample(task)
    return (forward + backward) * batch / (cluster.gpu_peak_flops.value * utilization)


@dataclass(frozen=True)
class Curve:
    """Throughput against GPU count for one (cluster, task, method)."""

    cluster: str
    task: str
    method: str
    method_params: dict
    batch: int
    grad_bytes: float
    compute_s: float
    gpus: tuple[int, ...]
    images_per_s: tuple[float, ...]


def figure5(clusters: tuple[str, ...] = ("a", "b"), tasks: tuple[str, ...] = tuple(FIGURE5_BATCH),
            methods: tuple[str, ...] = ("baseline", "terngrad"), gpus: tuple[int, ...] = FIGURE5_GPUS,
            utilization: float = FIGURE5_UTILIZATION.value, method_params: dict | None = None,
            compute_s: dict | None = None) -> list[Curve]:
    """TernGrad Figure 5 from the model: throughput (images/s) against GPUs (1 .. 512), weak scaling, for
    each cluster of the caption and each of AlexNet, GoogLeNet and VggNet-A, baseline and TernGrad.

    Every cluster parameter is in ``FIGURE5_CLUSTERS`` with its source. |g| is the ledger's per-worker bytes
    with the task's paper parameters for the method (``method_params`` = {method: overrides} changes them).
    Compute times default to :func:`figure5_compute_s`; ``compute_s`` = {(cluster, task): seconds} overrides.
    Returns one :class:`Curve` per (cluster, task, method)."""
    from commbench.analysis.perfmodel.gradient_bytes import gradient_bytes

    curves = []
    for name in clusters:
        if name not in FIGURE5_CLUSTERS:
            raise ConfigError(f"cluster: Figure 5 has clusters a and b, not {name!r}")
        cl = FIGURE5_CLUSTERS[name]
        for task in tasks:
            if task not in FIGURE5_BATCH:
                raise ConfigError(f"task: Figure 5 models {', '.join(FIGURE5_BATCH)}, not {task!r}")
            batch = FIGURE5_BATCH[task].value
            compute = (compute_s or {}).get((name, task)) or figure5_compute_s(task, batch, cl, utilization)
            for method in methods:
                params = (method_params or {}).get(method)
                g = gradient_bytes(task, method, params)
                values = []
                for n in gpus:
                    i, j = figure5_shape(n, cl.gpus_per_node.value)
                    c = Cluster(i, j, cl.gpu_gpu_bw.value, cl.cpu_gpu_bw.value, cl.network_bw.value,
                                cl.network_latency_s.value, batch, profiled_time(compute, g.sent, cl.cpu_gpu_bw.value),
                                g.sent)
                    values.append(throughput(c, FIGURE5_SCALING.value))
                curves.append(Curve(name, task, method, g.method_params, batch, g.sent, compute, tuple(gpus),
                                    tuple(values)))
    return curves


def figure5_speedup(utilization: float = FIGURE5_UTILIZATION.value, gpus: int = 8,
                    task: str = "alexnet-imagenet", cluster: str = "a") -> dict:
    """The paper's 3.04x check: TernGrad / baseline throughput for AlexNet on 8 GPUs of cluster (a).

    Reports the model's speed-up with TernGrad as the task's paper recipe runs it (AlexNet: last layer and
    tensors under 9217 elements in float32) and with every tensor ternarized, and for each the single-GPU
    compute time (and images/s per GPU) at which the model would give exactly 3.04x."""
    from commbench.analysis.perfmodel.gradient_bytes import gradient_bytes

    cl = FIGURE5_CLUSTERS[cluster]
    batch = FIGURE5_BATCH[task].value
    compute = figure5_compute_s(task, batch, cl, utilization)
    i, j = figure5_shape(gpus, cl.gpus_per_node.value)
    base = gradient_bytes(task, "baseline").sent
    out = {"task": task, "cluster": cluster, "gpus": gpus, "gpus_per_node": i, "nodes": j, "batch_per_gpu": batch,
           "compute_s": compute, "utilization": utilization, "paper_speedup": FIGURE5_SPEEDUP.value,
           "baseline_grad_bytes": base, "variants": {}}
    for label, params in (("paper recipe", None), ("all tensors ternarized", {"float_last_layer": False,
                                                                              "min_size": 1})):
        g = gradient_bytes(task, "terngrad", params)

        def weak(nbytes: float, compute_s: float) -> float:
            c = Cluster(i, j, cl.gpu_gpu_bw.value, cl.cpu_gpu_bw.value, cl.network_bw.value,
                        cl.network_latency_s.value, batch, profiled_time(compute_s, nbytes, cl.cpu_gpu_bw.value),
                        nbytes)
            return t_weak(c)

        comm_base, comm_tern = weak(base, 1.0) - 1.0, weak(g.sent, 1.0) - 1.0
        implied = compute_for_speedup(FIGURE5_SPEEDUP.value, comm_base, comm_tern)
        out["variants"][label] = {
            "method_params": g.method_params, "terngrad_grad_bytes": g.sent,
            "speedup": weak(base, compute) / weak(g.sent, compute),
            "compute_s_for_paper_speedup": implied,
            "images_per_s_per_gpu_for_paper_speedup": batch / implied if implied > 0 else None,
            "utilization_for_paper_speedup": compute * utilization / implied if implied > 0 else None,
        }
    return out
