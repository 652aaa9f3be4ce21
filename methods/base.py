"""What every method is: a gradient exchange plus an update, over named tensors (never models).

The harness computes each local worker's gradient of the data loss (weight decay excluded) and calls
:meth:`Method.step` once per iteration with the list of those gradients, one dict per local worker. The
method exchanges what it chooses over its communicator and updates every local worker's parameters.
"""
from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Mapping, Sequence

import torch

from .comm import Communicator

Grads = dict[str, torch.Tensor]


@dataclass
class Worker:
    """One logical worker's view: its rank, its named parameter tensors, and its optimizer over them."""

    rank: int
    params: dict[str, torch.Tensor]
    optimizer: torch.optim.Optimizer
    seed: int = 0  # this worker's own seed for a method's randomness (the harness mixes in the rank)
    # Simulated workers of a method whose replicas agree (:meth:`Method.replicas_agree`) hold one set of
    # parameters and one optimizer: this worker's are those of local worker ``shares`` (a rank), identical by
    # construction, so the method updates them once, through that worker. None: its own.
    shares: int | None = None


@dataclass(frozen=True)
class NoParams:
    """A method without tunable parameters."""


class Method(ABC):
    """Base class. Subclasses set ``name``, ``summary``, optionally ``Params`` (a frozen dataclass whose
    fields are the ``method.<field>`` settings) and implement :meth:`step`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    # Bumped whenever what the method computes changes (not its speed or its code's shape): the version enters
    # the run id, so a sweep re-runs the method instead of skipping it as "already done" on an old record, and
    # the paper tables leave records of an older version out. Version 1 is implicit: records made before
    # versions existed are version 1.
    version: ClassVar[int] = 1
    # The family the harness asks about (commbench.methods.registry.members): "threshold" (WGT, BGT, QGT),
    # "all-reduce baseline" (fp32, fp16, bf16: what counts as the strongest baseline), or None.
    family: ClassVar[str | None] = None
    Params: ClassVar[type] = NoParams
    extra_metrics: ClassVar[tuple[str, ...]] = ()  # ledger extras the run record reports (e.g. paper_bytes)
    # where a parameter's default comes from, where it is more than the method's choice (a paper, the authors'
    # code): --dry-run prints it beside the value
    param_sources: ClassVar[dict[str, str]] = {}
    # the method applies heavy-ball momentum itself, before compression (DGC's momentum correction, Signum), from
    # its parameter ``momentum``, which resolving a run takes from the recipe's optimizer (then plain SGD)
    owns_momentum: ClassVar[bool] = False

    def __init__(self, comm: Communicator, workers: Sequence[Worker], params, weight_decay: Mapping[str, float],
                 ema: float = 0.0, shared_seed: int = 0):
        if [w.rank for w in workers] != comm.local_ranks:
            raise ValueError("workers must match the communicator's local ranks, in order")
        self.comm = comm
        self.workers = list(workers)
        self.params = params
        self.weight_decay = dict(weight_decay)
        self.names = list(self.workers[0].params)
        # one seed every worker of the run knows (its workers' own seeds differ): what all of them must draw
        # alike, such as random-k's coordinates, is drawn from it
        self.shared_seed = shared_seed
        self.ema = ema  # averaging decay for methods that evaluate their own global weights (see eval_weights)
        self.times: dict[str, float] = {}  # seconds per phase of the exchange, summed over steps (see timed)

    def __init_subclass__(cls, **kwargs):
        """A built-in method's class (``commbench.methods.catalog`` names it) takes the metadata its body leaves
        unset (version, family, summary) from the catalog, which holds them without torch."""
        super().__init_subclass__(**kwargs)
        from .catalog import FIELDS, by_source

        entry = by_source(f"{cls.__module__}:{cls.__qualname__}")
        if entry is not None:
            for attr in FIELDS:
                owner = next((k for k in cls.__mro__ if attr in vars(k)), None)
                if owner is None or owner is Method:
                    setattr(cls, attr, getattr(entry, attr))

    @classmethod
    def params_from(cls, method_params: Mapping[str, object]):
        """This method's ``Params`` from a configuration's ``method_params`` (name -> value): the one way a
        method's parameters are built from a config (``registry.params_for(name, method_params)``)."""
        return cls.Params(**dict(method_params))

    # -- parameter servers and global weights (methods whose workers' weights are not the global ones) -------
    has_global_weights: bool = False  # True: evaluate eval_weights(), which the method averages itself

    @classmethod
    def computes_as(cls, version: int, workers: int, params: dict) -> bool:
        """Whether a record made by ``version`` of this method, with ``workers`` and method ``params``, computed
        what the current version computes (so it still counts in the tables). A method whose change leaves some
        configurations untouched says which."""
        return version == cls.version

    @classmethod
    def replicas_agree(cls, params) -> bool:
        """True when every worker applies the same update from the same weights (a synchronous exchange: each
        worker's update is the same function of all the workers' gradients), so that simulated workers can hold
        one set of parameters and one optimizer state. Per-worker method state (residuals, error feedback) and
        per-worker buffers (BatchNorm statistics) stay per worker either way."""
        return False

    @classmethod
    def run_defaults(cls, steps: int) -> dict[str, tuple[object, str]]:
        """Defaults that depend on the run (its length): parameter -> (value, where it comes from). They take
        the place of the class's defaults where neither the recipe nor the user set the parameter."""
        return {}

    @classmethod
    def never_acts(cls, params, steps: int) -> str | None:
        """Why a run of ``steps`` with ``params`` never does what the method is for (one line), or None."""
        return None

    @classmethod
    def servers_needed(cls, params) -> int:
        """Parameter-server processes a dist run of this configuration starts beside its workers."""
        return 0

    @classmethod
    def make_server(cls, comm: Communicator, params, template: Worker, weight_decay: Mapping[str, float],
                    ema: float = 0.0):
        """The server role of a dist server process: an object with ``step(step, lr)`` and ``send_global()``.
        ``template`` carries the initial weights and the optimizer the servers copy."""
        raise TypeError(f"method {cls.name} has no parameter-server role (servers_needed() is 0)")

    def eval_weights(self) -> dict[str, torch.Tensor] | None:
        """The weights worker 0 should be evaluated with (global, averaged if ``ema``), or None for its
        model's own. Under dist with servers this fetches them: the harness calls it at evaluation steps
        only, when the server processes send them (``make_server(...).send_global()``)."""
        return None

    @abstractmethod
    def step(self, grads: Sequence[Grads], lr: float, step: int) -> None:
        """Exchange one iteration's gradients and update every local worker (lr in the optimizer's units)."""

    # -- the exchange overlapped with backward, per bucket (DDP's way) ---------------------------------------
    @classmethod
    def can_bucket(cls, params) -> bool:
        """Whether this configuration can exchange per bucket while backward runs: its math is per tensor (no
        global scaler, no parameter server's push/pull of the whole model). Such a method implements
        :meth:`begin_bucket` and :meth:`finish_step`; the others keep :meth:`step` (after backward)."""
        return False

    @classmethod
    def why_not_bucketed(cls, params) -> str:
        """Why :meth:`can_bucket` is false, for the record's ``config.sources``."""
        return f"{cls.name} exchanges the whole gradient at once"

    def begin_bucket(self, names: Sequence[str], grads: Sequence[Grads], step: int):
        """Encode the tensors ``names`` of every local worker's gradient and start their exchange (asynchronous);
        returns the pending exchange, which :meth:`finish_step` completes. Called in bucket order, and only for
        a configuration whose :meth:`can_bucket` is true."""
        raise TypeError(f"method {self.name} does not exchange per bucket ({self.why_not_bucketed(self.params)}); "
                        f"the harness calls step() after backward for it")

    def finish_step(self, pending: Sequence, grads: Sequence[Grads], lr: float, step: int) -> None:
        """Complete every bucket's exchange (in order), decode, and update every local worker."""
        raise TypeError(f"method {self.name} does not exchange per bucket ({self.why_not_bucketed(self.params)}); "
                        f"the harness calls step() after backward for it")

    def finish_allreduce(self, pending: Sequence, grads: Sequence[Grads], lr: float, mean_of) -> None:
        """:meth:`finish_step` for methods whose buckets travel in one all-reduce each: wait for each bucket in
        order, turn every local worker's sum into its mean with ``mean_of(total, own)`` (``own``: the tensor is
        this worker's alone and may be changed in place; under sim one sum is shared by every local worker),
        then add weight decay and update."""
        means = [{} for _ in self.workers]
        for names, handle in pending:
            with self.timed("wait"):
                summed = handle.wait()
            with self.timed("decode"):
                for mean, total, g in zip(means, summed, grads):
                    mean.update(self.unflatten(mean_of(total, len(summed) == 1), g, names))
        with self.timed("update"):
            for worker, mean in zip(self.workers, means):
                if worker.shares is None:  # a worker that shares another's parameters was updated with them
                    self.apply_update(worker, self.add_weight_decay(worker, mean, in_place=True), lr)

    # -- where the time goes -----------------------------------------------------------------------------
    def timed(self, phase: str):
        """``with self.timed("wait"):`` adds the block's wall time to ``self.times[phase]`` (encode, wait,
        decode, update): cheap clocks, no synchronisation."""
        return _Timed(self.times, phase)

    # -- shared pieces --------------------------------------------------------------------------------
    def add_weight_decay(self, worker: Worker, grads: Mapping[str, torch.Tensor], in_place: bool = False) -> Grads:
        """g + wd * w for the parameters the task decays (L2 in the loss, as the papers' frameworks do).
        ``in_place``: into ``grads``' own tensors (buffers the method made and nothing else reads)."""
        out = {}
        for name, g in grads.items():
            wd = self.weight_decay.get(name, 0.0)
            if not wd:
                out[name] = g
            elif in_place:
                out[name] = g.add_(worker.params[name].detach(), alpha=wd)
            else:
                out[name] = g.add(worker.params[name].detach(), alpha=wd)
        return out

    @staticmethod
    def apply_update(worker: Worker, grads: Mapping[str, torch.Tensor], lr: float) -> None:
        """Hand the final gradient to the worker's optimizer at learning rate ``lr``; nothing for a worker that
        shares another's parameters and optimizer (that worker's update is its own)."""
        if worker.shares is not None:
            return
        for name, p in worker.params.items():
            p.grad = grads[name]
        for group in worker.optimizer.param_groups:
            group["lr"] = lr
        worker.optimizer.step()

    def flatten(self, grads: Mapping[str, torch.Tensor], names: Sequence[str] | None = None) -> torch.Tensor:
        """The named tensors (all parameters by default) as one flat vector, in parameter order."""
        return torch.cat([grads[n].reshape(-1) for n in (self.names if names is None else names)])

    def unflatten(self, flat: torch.Tensor, like: Mapping[str, torch.Tensor],
                  names: Sequence[str] | None = None) -> Grads:
        """Inverse of :meth:`flatten`: views into ``flat`` shaped like ``like[name]``."""
        out, offset = {}, 0
        for n in (self.names if names is None else names):
            numel = like[n].numel()
            out[n] = flat[offset:offset + numel].view_as(like[n])
            offset += numel
        return out

    def state_dict(self) -> dict:
        """Method state that a checkpoint must keep (residuals, delayed weights, ...)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class _Timed:
    __slots__ = ("times", "phase", "start")

    def __init__(self, times: dict, phase: str):
        self.times, self.phase = times, phase

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.times[self.phase] = self.times.get(self.phase, 0.0) + time.perf_counter() - self.start
        return False


def param_fields(params_cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(params_cls)}
