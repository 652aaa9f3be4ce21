"""The training loop: ``train`` reads top to bottom, a :class:`Trainer` holds the phases of a step.

The same code runs every local worker of a process: all N under ``sim``, one under ``dist``. Each step draws
one global batch; worker i reads slice i of it; each worker computes its gradient; the method exchanges and
updates. Worker i's dropout comes from its own generator seeded by (seed, i) in both transports, and a
sample's augmentation from (seed, step, sample index) alone (``commbench.tasks.data``), so a sim run and a dist run of
one configuration compute the same thing.
"""
from __future__ import annotations

import copy
import hashlib
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from commbench.methods import Worker, registry
from commbench.methods.buckets import MIB, BucketTracker, bucket_layout
from commbench.methods.comm import Communicator
from commbench.tasks import TASKS

from commbench.run.checkpoint import Checkpoints, capture_rng, on_device, restore_rng
from commbench.run.devices import describe_device, pick_device, set_threads
from commbench.run.evaluation import eval_steps, evaluate, recompute_batch_norm, share_parameters
from commbench.config import RunConfig
from commbench.run.optim import EMA, lr_at, make_optimizer
from commbench.run.precision import compute_context, for_methods, uses_channels_last
from commbench.run.rhythm import final_totals, is_log_point, log_stride
from commbench.store.correctness import pack_correct
from commbench.store.records import Status, one_device

Reporter = Callable[[int, int, float], None]  # (steps done, total steps, mean train loss)
REPORT_EVERY_S = 1.0  # progress between history points, so long runs show life from the first second


@dataclass
class Outcome:
    """What a run produced, held by the process of worker 0."""

    status: str  # done | diverged | interrupted (a stop signal: checkpoint saved, the run resumes from it)
    metrics: dict
    history: list[dict]
    data: dict
    weights: dict | None = field(default=None, repr=False)
    stopped_by: str | None = None  # interrupted: the signal
    resumed_at: list[int] = field(default_factory=list)  # steps this run was resumed from
    devices: list[str | None] = field(default_factory=list)  # what each stretch trained on (Loop.devices)


@dataclass
class Loop:
    """The training loop's own running state: what a checkpoint keeps beside models and method."""

    done: int = 0
    history: list[dict] = field(default_factory=list)
    train_s: float = 0.0
    top1: float | None = None
    top5: float | None = None
    correct: dict | None = None  # the last evaluation's per-image top-1 correctness (store.correctness)
    best: dict | None = None     # the evaluation with the highest top-1: {"top1", "step", "correct"}
    top1_global: float | None = None  # a method with global weights: theirs (BatchNorm recomputed)
    top5_global: float | None = None
    mean_loss: float = float("nan")
    loss_sum: float = 0.0  # since the last log point, this process's workers
    loss_count: int = 0
    resumed_at: list[int] = field(default_factory=list)
    # the device of each stretch of training, the first and then one per resume ("cpu", "cuda (<GPU name>)"): a
    # run resumed on other hardware says so, and its seconds (on two machines) give no images/s. None where a
    # checkpoint older than this field did not say.
    devices: list[str | None] = field(default_factory=list)
    times: dict = field(default_factory=dict)         # seconds in forward+backward, summed over steps
    method_times: dict = field(default_factory=dict)  # the method's phases (encode, wait, ...) at the checkpoint


def derive_seed(*parts: int) -> int:
    """A well-mixed 63-bit seed from integers (so (seed, rank) streams do not overlap)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:8], "little") >> 1


class GlobalBatches:
    """Sample indices of each step's global batch: a fresh permutation per epoch, seeded by (seed, epoch).
    The incomplete last batch of an epoch is dropped, so every step has exactly ``global_batch`` samples."""

    def __init__(self, dataset_size: int, global_batch: int, seed: int):
        if dataset_size < global_batch:
            raise ValueError(f"data set of {dataset_size} samples is smaller than one global batch ({global_batch})")
        self.size, self.batch, self.seed = dataset_size, global_batch, seed
        self.per_epoch = dataset_size // global_batch
        self._epoch, self._perm = -1, None

    def indices(self, step: int) -> torch.Tensor:
        epoch, j = divmod(step, self.per_epoch)
        if epoch != self._epoch:
            g = torch.Generator().manual_seed(derive_seed(self.seed, epoch))
            self._epoch, self._perm = epoch, torch.randperm(self.size, generator=g)
        return self._perm[j * self.batch:(j + 1) * self.batch]


class Exchange:
    """How one step's gradients travel: per bucket while backward runs (``exchange=overlapped``, DDP's way:
    a gradient hook on every parameter starts its bucket's exchange as soon as the bucket is complete), or the
    whole gradient after backward (``after-backward``, or a method that needs the whole gradient first).

    Under ``sim`` the local workers' backward passes run one after another, so the buckets are exchanged after
    the last of them, in the same order as ``dist`` exchanges them: the same values and the same bytes."""

    def __init__(self, cfg: RunConfig, method, workers: list[Worker]):
        self.method, self.pending, self.step = method, [], 0
        self.bucketed = cfg.exchange == "overlapped" and method.can_bucket(method.params)
        self.layout = bucket_layout(workers[0].params, cfg.bucket_mb * MIB) if self.bucketed else []
        self.tracker = None
        if self.bucketed and len(workers) == 1:  # one worker in this process: exchange during its backward
            worker = workers[0]
            self.tracker = BucketTracker(self.layout, self._launch)
            for name, p in worker.params.items():
                p.register_post_accumulate_grad_hook(lambda _p, name=name: self.tracker.ready(name))
            self.worker = worker

    def _launch(self, index: int) -> None:
        names = self.layout[index]
        grads = {n: for_methods(self.worker.params[n].grad) for n in names}
        self.pending.append(self.method.begin_bucket(names, [grads], self.step))

    def start(self, step: int) -> None:
        self.step, self.pending = step, []
        if self.tracker is not None:
            self.tracker.reset()

    def finish(self, grads, lr: float, step: int) -> None:
        if not self.bucketed:
            self.method.step(grads, lr, step)
            return
        if self.tracker is not None:
            self.tracker.flush()  # buckets whose parameters got no gradient this step
        else:
            self.pending = [self.method.begin_bucket(names, grads, step) for names in self.layout]
        self.method.finish_step(self.pending, grads, lr, step)
        self.pending = []


PHASES = ("encode", "wait", "decode", "update")


def time_breakdown(loop_times: dict, method_times: dict, train_s: float) -> dict:
    """Where the training time went, in seconds summed over steps (of the process holding worker 0, all its
    local workers together): forward+backward (without the exchange's work inside backward's hooks), encode,
    communication not hidden behind computation (waiting), decode, optimizer update, and the rest (data,
    other exchange work, the harness). Cheap clocks only: nothing is synchronised to measure it."""
    compute = max(0.0, loop_times.get("compute", 0.0))
    out = {"forward_backward_s": compute, **{f"{p}_s": method_times.get(p, 0.0) for p in PHASES}}
    out["other_s"] = max(0.0, train_s - sum(out.values()))
    return out


class Trainer:
    """The local workers of one process (all N under sim, one under dist) and what they train with. ``train``
    drives it step by step through its phases: local gradients, exchange and update, log point, checkpoint."""

    def __init__(self, cfg: RunConfig, comm: Communicator, checkpoints: Checkpoints | None):
        set_threads(cfg)
        self.cfg, self.comm, self.checkpoints = cfg, comm, checkpoints
        self.device = pick_device(cfg, comm)
        self.task = TASKS[cfg.task]
        self.data = self.task.load_data(cfg.dataset, Path(cfg.data_root or "data"), cfg.model_variant)
        self.holds_rank0 = comm.local_ranks[0] == 0
        template = self._build_models()
        self._build_method(template)
        self.grad_elements = sum(p.numel() for p in template.parameters())
        del template
        self.rng_states = self._seed_worker_streams()
        self.swap_rng = len(comm.local_ranks) > 1
        self._build_evaluated_models()
        self.evals, self.stride = eval_steps(cfg), log_stride(cfg)
        self.loop = Loop()
        self.resume()
        self._note_device()
        self.streams = {r: self.data.train_stream(self.worker_batches(r), cfg.seed) for r in comm.local_ranks}
        self.loss_sum = torch.tensor(self.loop.loss_sum, dtype=torch.float64, device=self.device)
        self.exchange = Exchange(cfg, self.method, self.workers)
        self.last_report = time.monotonic()

    # -- set-up ------------------------------------------------------------------------------------------------
    def _build_models(self) -> torch.nn.Module:
        """One model per local worker, on the device; returns the template they were copied from."""
        cfg = self.cfg
        # Identical initial weights everywhere: one seed, one construction, copies for local workers.
        torch.manual_seed(cfg.seed)
        template = self.task.make_model(cfg.model_variant, self.data.num_classes, self.data.input_shape[0],
                                        cfg.model_options)
        self.channels_last = uses_channels_last(template, cfg.precision)
        self.models = [copy.deepcopy(template).to(self.device).train() for _ in self.comm.local_ranks]
        if self.channels_last:  # the layout bfloat16 convolutions want; the methods still see standard gradients
            self.models = [m.to(memory_format=torch.channels_last) for m in self.models]
        return template

    def _build_method(self, template: torch.nn.Module) -> None:
        """The workers (parameters, optimizer, own seed) and the method that exchanges their gradients."""
        cfg, comm = self.cfg, self.comm
        self.method_cls = registry.get(cfg.method)
        method_params = registry.params_for(cfg.method, cfg.method_params)
        # Simulated workers of a synchronous method hold one set of parameters and one optimizer (their values
        # agree by construction); each keeps its own buffers (BatchNorm statistics) and its own gradients.
        self.shared = len(self.models) > 1 and self.method_cls.replicas_agree(method_params)
        if self.shared:
            for model in self.models[1:]:
                share_parameters(self.models[0], model)
        optimizers = [make_optimizer(cfg.optimizer, m.parameters()) for m in (self.models[:1] if self.shared
                                                                              else self.models)]
        self.workers = [Worker(rank, dict(m.named_parameters()), optimizers[0 if self.shared else i],
                               seed=derive_seed(cfg.seed, rank, 2),
                               shares=comm.local_ranks[0] if self.shared and i else None)
                        for i, (rank, m) in enumerate(zip(comm.local_ranks, self.models))]
        self.method = self.method_cls(comm, self.workers, method_params,
                                      self.task.weight_decay_map(template, cfg.weight_decay), ema=cfg.ema,
                                      shared_seed=derive_seed(cfg.seed, -1, 2))  # as a worker's, for no rank

    def _seed_worker_streams(self) -> dict:
        """Worker i's own random stream (dropout), the same in sim and dist: its generators' states, by rank."""
        states = {}
        for rank in self.comm.local_ranks:
            torch.manual_seed(derive_seed(self.cfg.seed, rank))  # seeds the CUDA generators too
            states[rank] = self.get_rng()
        return states

    def _build_evaluated_models(self) -> None:
        # Worker 0's model is evaluated (averaged here where the recipe averages), as a worker's own model is what
        # a training framework scores (MXNet's fit scores SSD-SGD's local weights). A method with global weights of
        # its own (a parameter server's, averaged by the method) is scored on them too, as top1_global.
        cfg, rank0 = self.cfg, self.holds_rank0
        self.ema = EMA(self.models[0], cfg.ema) if cfg.ema and rank0 else None
        self.eval_model = copy.deepcopy(self.models[0]) if self.ema and rank0 else None
        self.global_model = copy.deepcopy(self.models[0]) if self.method.has_global_weights and rank0 else None

    def _note_device(self) -> None:
        """This stretch's device in the loop's list, after one None for each earlier stretch a checkpoint older
        than the list left undescribed."""
        self.loop.devices += [None] * (len(self.loop.resumed_at) - len(self.loop.devices))
        self.loop.devices.append(describe_device(self.device))

    def get_rng(self):
        cuda = self.device.type == "cuda"
        return torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if cuda else None

    def set_rng(self, state) -> None:
        torch.set_rng_state(state[0])
        # dropout on CUDA draws from the device's generator; a checkpoint saved on another kind of device has
        # none of this one's (a GPU run resumed on the CPU, or the other way round)
        if state[1] is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(state[1], self.device)

    def resume(self) -> None:
        """Take up the checkpoint in force, if any: models, optimizers, method, EMA, ledger, generators, loop."""
        saved = self.checkpoints.load() if self.checkpoints else None
        if saved is None:
            return
        for model, worker, state in zip(self.models, self.workers, saved["workers"]):
            model.load_state_dict(state["model"])
            worker.optimizer.load_state_dict(state["optimizer"])
        self.method.load_state_dict(on_device(saved["method"], self.device))
        if self.ema:
            self.ema.load_state_dict(saved["ema"])
        self.comm.ledger.load_state_dict(saved["ledger"])
        self.rng_states = restore_rng(saved["rng"])
        self.loop = Loop(**saved["loop"])
        self.loop.resumed_at.append(self.loop.done)
        self.method.times.update(self.loop.method_times)

    def snapshot(self) -> dict:
        return {"workers": [{"model": m.state_dict(), "optimizer": w.optimizer.state_dict()}
                            for m, w in zip(self.models, self.workers)],
                "method": self.method.state_dict(), "ema": self.ema.state_dict() if self.ema else None,
                "ledger": self.comm.ledger.state_dict(), "rng": capture_rng(self.rng_states), "loop": vars(self.loop)}

    def worker_batches(self, rank: int):
        """Worker ``rank``'s slice of each step's global batch. Each stream has its own GlobalBatches, so streams
        that read ahead do not evict each other's epoch permutation. A resumed run starts the streams at its
        step: indices and augmentation depend on (seed, step, sample) alone."""
        cfg, per_worker = self.cfg, self.cfg.batch_per_worker
        batches = GlobalBatches(self.data.train_size, cfg.global_batch, cfg.seed)
        return ((step, batches.indices(step)[rank * per_worker:(rank + 1) * per_worker])
                for step in range(self.loop.done, cfg.steps))

    # -- the phases of a step ----------------------------------------------------------------------------------
    def local_gradients(self) -> list[dict]:
        """Forward and backward on each local worker's batch; buckets start their exchange inside backward."""
        grads, loop, method = [], self.loop, self.method
        for worker, model in zip(self.workers, self.models):
            x, y = next(self.streams[worker.rank])
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            if self.channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            if self.swap_rng:
                self.set_rng(self.rng_states[worker.rank])
            t_compute, exchanged = time.perf_counter(), sum(method.times.values())
            model.zero_grad(set_to_none=True)
            with compute_context(self.device, self.cfg.precision):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            # forward+backward, less what the exchange did inside backward's hooks (counted in its phases)
            inside = sum(method.times.values()) - exchanged
            loop.times["compute"] = loop.times.get("compute", 0.0) + time.perf_counter() - t_compute - inside
            if self.swap_rng:
                self.rng_states[worker.rank] = self.get_rng()
            grads.append({n: for_methods(p.grad) for n, p in worker.params.items()})
            self.loss_sum += loss.detach()
            loop.loss_count += 1
        return grads

    def step(self, step: int) -> None:
        """One training step: local gradients, then the exchange and the update (and the EMA)."""
        self.exchange.start(step)
        grads = self.local_gradients()
        self.exchange.finish(grads, lr_at(self.cfg.lr_schedule, step, self.cfg.steps), step)
        if self.ema:
            self.ema.update(self.models[0])

    def log_point(self, step: int, report: Reporter | None) -> bool:
        """At a history point: agree across processes on loss and bytes, evaluate where due, report. False when
        the run diverged (the point is recorded; the loop stops)."""
        cfg, comm, loop = self.cfg, self.comm, self.loop
        done = loop.done
        if not is_log_point(done, self.stride, self.evals):
            if report and time.monotonic() - self.last_report >= REPORT_EVERY_S:  # this process's loss, no sync
                self.last_report = time.monotonic()
                report(done, cfg.steps, self.loss_sum.item() / max(1, loop.loss_count))
            return True
        # Agree across processes on the loss, divergence and bytes (uncounted control channel).
        totals = comm.control_sum(torch.tensor([self.loss_sum.item(), loop.loss_count,
                                                comm.ledger.total_sent(cfg.workers),
                                                comm.ledger.total_received(cfg.workers)], dtype=torch.float64))
        loop.mean_loss = totals[0].item() / max(1.0, totals[1].item())
        self.loss_sum.zero_()
        loop.loss_count = 0
        # the bytes so far, both ways: a method whose bytes change over the run (PowerSGD's start_iter, SSD-SGD's
        # warm-up and its pulls every k steps) is timed stretch by stretch from them (the time-to-accuracy model)
        point = {"step": done, "train_loss": loop.mean_loss, "top1": None, "bytes_sent": int(totals[2].item()),
                 "bytes_received": int(totals[3].item()), "lr": lr_at(cfg.lr_schedule, step, cfg.steps),
                 "train_s": loop.train_s}
        if not math.isfinite(loop.mean_loss):
            loop.history.append(point)
            return False
        if done in self.evals and self.holds_rank0:
            loop.top1, loop.top5, hits = evaluate(self.evaluation_model(), self.data, cfg.eval["batch_size"],
                                                  self.device)
            point["top1"], point["top5"] = loop.top1, loop.top5
            loop.correct = pack_correct(hits)
            if loop.best is None or loop.top1 > loop.best["top1"]:  # the first of equal bests
                loop.best = {"top1": loop.top1, "step": done, "correct": loop.correct}
            if self.global_model is not None:
                loop.top1_global, loop.top5_global, _ = evaluate(self.global_evaluation_model(), self.data,
                                                                 cfg.eval["batch_size"], self.device)
                point["top1_global"], point["top5_global"] = loop.top1_global, loop.top5_global
        loop.history.append(point)
        if report:
            report(done, cfg.steps, loop.mean_loss)
        return True

    def evaluation_model(self) -> torch.nn.Module:
        """Worker 0's model, or its moving average."""
        if self.ema:
            self.eval_model.load_state_dict(self.models[0].state_dict())
            self.ema.apply_to(self.eval_model)
            return self.eval_model
        return self.models[0]

    def global_evaluation_model(self) -> torch.nn.Module:
        """The method's global weights (the servers', averaged by the method where the recipe averages), with
        BatchNorm statistics recomputed for them: worker 0's were gathered on other weights."""
        self.global_model.load_state_dict({**self.models[0].state_dict(), **self.method.eval_weights()})
        cfg, per_worker = self.cfg, self.cfg.batch_per_worker
        rank = self.comm.local_ranks[0]
        batches = GlobalBatches(self.data.train_size, cfg.global_batch, cfg.seed)
        recompute_batch_norm(self.global_model, (
            self.data.plain_train_batch(batches.indices(step)[rank * per_worker:(rank + 1) * per_worker])
            for step in range(cfg.eval["bn_batches"])), self.device)
        return self.global_model

    def checkpoint(self) -> str | None:
        """At a sync point: save if due or asked; the stop signal that ends the run, if one came."""
        done = self.loop.done
        if not (self.checkpoints and self.checkpoints.sync_point(done, self.cfg.steps)):
            return None
        save, stopped_by = self.checkpoints.decide(done, self.comm)
        if save:
            self.loop.loss_sum = self.loss_sum.item()
            self.loop.method_times = dict(self.method.times)
            self.checkpoints.save(done, self.snapshot(), self.comm)
        return stopped_by

    # -- the end -----------------------------------------------------------------------------------------------
    def outcome(self, status: str, stopped_by: str | None, keep_weights: bool) -> Outcome | None:
        """Close the streams, agree on the final byte counts; where worker 0 lives, the run's outcome."""
        cfg, comm, loop = self.cfg, self.comm, self.loop
        for stream in self.streams.values():  # stops loader worker processes, if any
            getattr(stream, "close", lambda: None)()
        totals = final_totals(cfg, comm)
        if not self.holds_rank0:
            return None
        done, train_s = loop.done, loop.train_s
        metrics = {
            "top1": loop.top1 if status == Status.DONE else None, "top5": loop.top5 if status == Status.DONE else None,
            "final_train_loss": loop.mean_loss, "steps": done, "samples_seen": done * cfg.global_batch,
            "train_s": train_s, "images_per_s": (done * cfg.global_batch / train_s
                                                 if train_s > 0 and one_device(loop.devices) else None),
            "bytes_sent": int(totals[0].item()), "bytes_received": int(totals[1].item()),
            **({"server_bytes_sent": int(totals[2].item()), "server_bytes_received": int(totals[3].item())}
               if comm.num_servers else {}),
            "bytes_fp32_equiv": 4 * self.grad_elements * cfg.workers * done, "wire_bytes_measured": None,
            "parameters": self.grad_elements, "threads_per_worker": torch.get_num_threads(),
            **{e: totals[4 + i].item() for i, e in enumerate(self.method_cls.extra_metrics)},
        }
        if self.global_model is not None:
            metrics["top1_global"] = loop.top1_global if status == Status.DONE else None
            metrics["top5_global"] = loop.top5_global if status == Status.DONE else None
        if status == Status.DONE and loop.correct is not None:  # for paired intervals (docs/record-format.md)
            metrics["eval_correct"] = loop.correct
            metrics["top1_best"], metrics["top1_best_step"] = loop.best["top1"], loop.best["step"]
            metrics["eval_correct_best"] = loop.best["correct"]
        metrics["time_breakdown"] = time_breakdown(loop.times, self.method.times, train_s)
        final_model = self.models[0]
        metrics["final_weights"] = {"sha256": weights_digest(final_model.state_dict())}
        weights = ({k: v.detach().cpu().clone() for k, v in final_model.state_dict().items()}
                   if keep_weights else None)
        provenance = {"dataset": cfg.dataset, "synthetic": cfg.dataset == "synthetic",
                      "substitute_for": self.task.paper_dataset if cfg.dataset != self.task.paper_dataset else None,
                      **self.data.provenance}
        return Outcome(status, metrics, loop.history, provenance, weights, stopped_by, loop.resumed_at,
                       loop.devices)


def weights_digest(state: dict) -> str:
    """SHA-256 of a model's final weights and buffers (names, dtypes, shapes, bytes, in name order): two runs
    that end with the same digest computed the same model bit for bit, whatever transport or cluster ran them."""
    h = hashlib.sha256()
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def with_test_aids(cfg: RunConfig, comm: Communicator, step: Callable[[int], None]) -> Callable[[int], None]:
    """``step``, or, where a test asked for it, ``step`` with its aids: the last worker fails at
    ``fail_at_step``; every step sleeps ``step_sleep_s`` (a run long enough to meet a time limit)."""
    fails = cfg.fail_at_step is not None and cfg.workers - 1 in comm.local_ranks
    if not fails and not cfg.step_sleep_s:
        return step

    def aided(i: int) -> None:
        if fails and i == cfg.fail_at_step:
            raise RuntimeError(f"fail_at_step={i}: worker {cfg.workers - 1} fails on purpose")
        step(i)
        if cfg.step_sleep_s:
            time.sleep(cfg.step_sleep_s)
    return aided


def warm_up_kernels(method, device: torch.device) -> None:
    """Compile the numba kernels of the method's codec (or load them from numba's cache) before the training
    clock starts. numba compiles a kernel at its first call: without this, a TernGrad run's first step carried
    some 11.5 s of compilation, counted in its train_s, images/s and time to target. The warm-up draws from no
    generator and its results are thrown away, so the run computes the same numbers. The kernels run on CPU
    tensors only (a GPU's take the torch paths): a method's ``warm_up`` (the kit's) knows which it runs on."""
    warm_up = getattr(method, "warm_up", None)
    if device.type == "cpu" and warm_up is not None:
        warm_up()


def train(cfg: RunConfig, comm: Communicator, report: Reporter | None = None,
          keep_weights: bool = False, checkpoints: Checkpoints | None = None) -> Outcome | None:
    """Run ``cfg`` for the local workers of ``comm``. Returns the outcome where worker 0 lives, else None.

    With ``checkpoints``, resume from the checkpoint in force (if any), save every ``checkpoints.every``
    steps, and on a stop signal save and return an ``interrupted`` outcome."""
    trainer = Trainer(cfg, comm, checkpoints)
    warm_up_kernels(trainer.method, trainer.device)  # before the clock: compilation is no training time
    loop, step_once = trainer.loop, with_test_aids(cfg, comm, trainer.step)
    status, stopped_by = Status.DONE, None
    for step in range(loop.done, cfg.steps):
        t0 = time.perf_counter()
        step_once(step)
        loop.train_s += time.perf_counter() - t0
        loop.done = step + 1
        if not trainer.log_point(step, report):
            status = Status.DIVERGED
            break
        stopped_by = trainer.checkpoint()
        if stopped_by:
            status = Status.INTERRUPTED
            break
    return trainer.outcome(status, stopped_by, keep_weights)
