"""SSD-SGD (Xu, Dong et al.): steps delay with local updates, Sections 2.3-3.5, Eq. 5, 6, 8, Algorithms 1-2.

Iterations ``0 .. warmup`` are plain synchronous SGD (Algorithm 1 lines 3-14: push, pull, every iteration).
At the last of them every worker copies the pulled global weights into its *local copy* w' (lines 9-11;
MXNet's ``comm_buf_copy``). After that (lines 15-25) every worker, each iteration:

1. computes its gradient on the *computing weights* (the model's parameters: what was last broadcast to the
   devices, line 16) and pushes it (line 17); the servers apply the average with momentum SGD (Eq. 6);
2. moves w' with the local rule (line 18; Eq. 5 / Eq. 8);
3. broadcasts w' to the devices: the computing weights take w' (lines 21 and 24);
4. on a pull iteration (``num % k == k - 1``, line 20) only *then* pulls the global weights into w' (line 22):
   they become the base of the next local update, while the next gradient is still computed on the locally
   updated weights (Section 2.2: "the retrieved parameters will be used for the local update operations in
   iteration n+k"; the authors' ``PullImpl`` broadcasts the local copy, pulls, then copies into it).

So k = 1 is not synchronous SGD: it still computes on locally updated weights (Eq. 7 saves T_f + T_b at
k = 1, and Table 2's 1-Step differs from SSGD). Algorithm 1 needs ``(1 + warmup) % k == 0``, so the first
delay iteration starts a k-cycle.

Local rules (``local_rule``), all moving w' (g below is the worker's gradient times ``local_grad_scale``):

* ``glu_code`` (the default): the authors' ``COSDCASGD``, the local optimizer of their CIFAR-10 script, which
  is what the paper's ResNet-20 experiments ran: w' <- w' - loc_lr (alpha g + wd w' + beta grad_sync) with
  grad_sync = ((1 - loc_lr wd) prev - w') / 8, prev the weights before the previous local update.
* ``glu`` (the paper's text, Eq. 8 and Algorithm 2): w' <- w' - loc_lr (alpha g + wd w' + beta grad_sync),
  grad_sync = (pre_weight - w') (1 - m) / (lr k); pre_weight starts as w' and is refreshed every k local
  updates, i.e. to the weights just pulled into w' (Sec. 3.3). alpha 2, beta 0.5, loc_lr = 4 lr (Sec. 4.1).
* ``sgd``: w' <- w' - loc_lr (g + wd w') (Fig. 5 uses loc_lr = lr / 4: set local_lr_scale=0.25).
* ``dcasgd``: DC-ASGD-a as a local rule (Fig. 5; loc_lr = lr there: local_lr_scale=1): w' <- w' - loc_lr
  (g + wd w' + lambda_t g*g*(w' - w_prev)), lambda_t = lambda0 / sqrt(MS), MS = 0.95 MS + 0.05 g^2 + 1e-7.
* ``none``: no local update (w' is the last pulled global weights; the workers compute on them one pull late).

The local gradient's scale (``local_grad_scale``): MXNet gives the local optimizer the same ``rescale_grad`` as
the servers', 1 / (batch x workers) under dist_sync (``Module.init_optimizer``), and hands it the worker's
gradient summed over its devices' images; so the local rules see the worker's mean gradient over W, the number
of workers (``code``, the default: what the authors ran). The paper's text states no such factor (``paper``: the
worker's mean gradient). The scale multiplies the gradient wherever a rule uses it (MXNet rescales ``grad``
first), not the weight decay or grad_sync, and is independent of ``alpha`` and ``local_lr_scale``.

Topologies: ``ps`` (the paper's: W workers and S servers, push/pull as point-to-point messages, a skipped
pull is a message never sent) and ``allreduce`` (every worker keeps the global state; the push is an
asynchronous allreduce, waited for and applied only at pull time, so it overlaps k steps of computation).

Version 3: the local gradient at the authors' scale by default (``local_grad_scale``), the authors' COSDCASGD
as the default rule, and the harness evaluates a worker's local model (what MXNet's fit scores; the servers'
weights beside it as ``top1_global``). Version 2: the pulled weights go to the local copy w', not to the
computing weights (version 1 overwrote the computing weights at every pull, which made k = 1 synchronous SGD
and threw each pull iteration's local update away).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .base import Method
from .ps import ParameterServer, Piece, ServerRole, ServerShard, scatter_pieces

LOCAL_RULES = ("glu", "glu_code", "sgd", "dcasgd", "none")
GRAD_SCALES = ("code", "paper")  # the local gradient over W (MXNet's rescale_grad), or as it is (the paper's text)
TOPOLOGIES = ("ps", "allreduce")


def pulls_at(step: int, warmup: int, k: int) -> bool:
    """Algorithm 1: every warm-up iteration (num <= wp) pulls; afterwards those with num % k == k - 1."""
    return step <= warmup or step % k == k - 1


@dataclass(frozen=True)
class SSDSGDParams:
    k: int = 3                  # delay steps; 3 divides 1 + 500, the default warm-up (Algorithm 1's check)
    warmup: int = 500           # wp of Algorithm 1: iterations 0..wp are synchronous (Sec. 4.2: 500)
    local_rule: str = "glu_code"  # glu_code (the authors' COSDCASGD) | glu (the paper's Eq. 8) | sgd | dcasgd | none
    local_grad_scale: str = "code"  # code: the gradient term at 1/W (MXNet's rescale_grad) | paper: unscaled
    alpha: float = 2.0          # Eq. 8 weight of the local gradient (Sec. 4.1)
    beta: float = 0.5           # Eq. 8 weight of grad_sync (Sec. 4.1)
    local_lr_scale: float = 4.0  # loc_lr = scale x global lr (Sec. 4.1: 1.6 for 0.4)
    dc_lambda: float = 2.0      # lambda0 of DC-ASGD-a (the authors' CPPADCASGD default)
    dc_ms_decay: float = 0.95   # mean-square decay of DC-ASGD-a (MXNet's ms_update default)
    topology: str = "ps"        # ps | allreduce
    servers: int = 1            # parameter servers (ps topology)

    def __post_init__(self):
        if self.k < 1:
            raise ValueError(f"k must be >= 1, got {self.k}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if (1 + self.warmup) % self.k:
            below = self.warmup - (1 + self.warmup) % self.k
            options = " or ".join(str(w) for w in (below, below + self.k) if w >= 0)
            raise ValueError(f"warmup: Algorithm 1 needs (1 + warmup) % k == 0; warmup={self.warmup} with "
                             f"k={self.k} does not (try warmup={options})")
        if self.local_grad_scale not in GRAD_SCALES:
            raise ValueError(f"local_grad_scale must be one of {', '.join(GRAD_SCALES)}, got {self.local_grad_scale!r}")
        if self.local_rule not in LOCAL_RULES:
            raise ValueError(f"local_rule must be one of {', '.join(LOCAL_RULES)}, got {self.local_rule!r}")
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if self.servers < 1:
            raise ValueError(f"servers must be >= 1, got {self.servers}")
        if self.local_lr_scale < 0:
            raise ValueError(f"local_lr_scale must be >= 0, got {self.local_lr_scale}")


@dataclass
class LocalState:
    """One worker's local-rule state (Algorithm 2's counter and pre_weight; DC-ASGD-a's w_prev and MS)."""

    updates: int = 0
    previous: dict[str, torch.Tensor] | None = None
    mean_square: dict[str, torch.Tensor] = field(default_factory=dict)


class SSDSGD(Method):
    name = "ssdsgd"
    summary = "SSD-SGD: push every step, pull every k steps, local GLU updates between pulls"
    Params = SSDSGDParams
    # 3: the local gradient at the authors' scale, COSDCASGD by default, the local model evaluated (top1) and the
    # servers' weights beside it (top1_global); 2: pulls go to the local copy w' (Algorithm 1 line 22); 1
    # overwrote the computing weights
    version = 3
    has_global_weights = True
    param_sources = {
        "local_rule": "ssdsgd default: the authors' COSDCASGD, the local optimizer of their CIFAR-10 script "
                      "(cifar10-dis.sh, MXNet optimizer.py), which the paper's ResNet-20 runs used; the paper's "
                      "Eq. 8 is local_rule=glu",
        "local_grad_scale": "ssdsgd default: MXNet's rescale_grad = 1/(batch x workers) for the local optimizer too "
                            "(module.py init_optimizer, dist_sync): the gradient term at 1/W of the worker's mean "
                            "gradient, independent of alpha and local_lr_scale; the paper's text: paper (1)",
    }

    def __init__(self, comm, workers, params, weight_decay, **kwargs):
        super().__init__(comm, workers, params, weight_decay, **kwargs)
        template = self.workers[0]
        self.momentum = template.optimizer.defaults.get("momentum", 0.0)
        self.local = {w.rank: LocalState() for w in self.workers}
        self.copy: dict[int, dict[str, torch.Tensor]] = {}  # rank -> w', the local copy (from the last warm-up step)
        if params.topology == "ps":
            self.ps = ParameterServer(comm, template.params, template.optimizer, self.weight_decay,
                                      params.servers, self.ema)
        else:
            self.ps = None
            # Each worker's replica of the servers' state: one server shard holding every tensor whole, so
            # the replica updates with the servers' own arithmetic. Worker 0's also keeps the eval average.
            whole = [Piece(n, 0, t.numel()) for n, t in template.params.items()]
            self.replicas = {w.rank: ServerShard(w.rank, whole, w.params, w.optimizer, self.weight_decay,
                                                 comm.world_size, self.ema if i == 0 else 0.0)
                             for i, w in enumerate(self.workers)}
            self.pending: list[tuple] = []  # (allreduce handle, lr) of pushes not yet applied

    @classmethod
    def servers_needed(cls, params):
        return params.servers if params.topology == "ps" else 0

    @classmethod
    def make_server(cls, comm, params, template, weight_decay, ema=0.0):
        ps = ParameterServer(comm, template.params, template.optimizer, weight_decay, params.servers, ema)
        return ServerRole(ps, lambda step: pulls_at(step, params.warmup, params.k), answers_eval=True)

    # -- one iteration (Algorithm 1, lines 3-26) --------------------------------------------------------
    def step(self, grads, lr, step):
        p = self.params
        pull = pulls_at(step, p.warmup, p.k)
        # The push and every pull are timed as wait: a dist worker blocks in them on the link (under sim the
        # servers' work runs inside them too), as TernGrad's parameter-server exchange is timed.
        if self.ps is not None:  # line 6 / 17: push
            with self.timed("wait"):
                self.ps.push_all(self.workers, grads, lr, answer_pull=pull)
        else:
            self.pending.append((self.comm.allreduce_async([self.flatten(g) for g in grads]), lr))
        if step <= p.warmup:  # lines 3-14: synchronous SGD; the pulled weights are the computing weights
            for worker in self.workers:
                with self.timed("wait"):
                    self.pull_into(worker.rank, worker.params)
                if step == p.warmup:  # lines 9-11: w' = w_t
                    self.copy[worker.rank] = {n: t.detach().clone() for n, t in worker.params.items()}
            return
        for worker, g in zip(self.workers, grads):
            local = self.copy[worker.rank]
            if p.local_rule != "none":  # line 18
                with self.timed("update"):
                    self.local_update(worker.rank, local, g, lr)
            with torch.no_grad():  # lines 21 / 24: broadcast w' to the devices
                for n, t in worker.params.items():
                    t.copy_(local[n])
            if pull:  # line 22: pull w_t and copy it into w' (the base of the next local update)
                with self.timed("wait"):
                    self.pull_into(worker.rank, local)

    def pull_into(self, rank: int, into: dict[str, torch.Tensor]) -> None:
        """Line 8 / 22: the global weights into ``into`` (a message from the servers, or the local replica)."""
        if self.ps is not None:
            self.ps.pull(rank, into)
        else:
            self.apply_pending()
            replica = self.replicas[rank]
            scatter_pieces(replica.message(), replica.pieces, into)

    def apply_pending(self) -> None:
        """Allreduce topology: wait for the pushes in flight and apply them, in order, to every replica (the
        allreduce already summed them: the replica averages one "push", the sum)."""
        for handle, lr in self.pending:
            for worker, total in zip(self.workers, handle.wait()):
                self.replicas[worker.rank].apply([total], lr)
        self.pending.clear()

    # -- local rules ------------------------------------------------------------------------------------
    @torch.no_grad()
    def local_update(self, rank: int, w: dict[str, torch.Tensor], grads, lr: float) -> None:
        """One local update of worker ``rank``'s local copy ``w`` (w', in place) with its gradient ``grads``."""
        p, state = self.params, self.local[rank]
        loc_lr = p.local_lr_scale * lr
        if p.local_grad_scale == "code":  # MXNet's rescale_grad: the worker's mean gradient over W
            grads = {n: g / self.comm.world_size for n, g in grads.items()}
        if state.previous is None:  # Algorithm 2 line 2: pre_weight starts as w'
            state.previous = {n: t.clone() for n, t in w.items()}
        if p.local_rule == "glu":
            sync = glu_grad_sync(state.previous, w, self.momentum, lr, p.k)
            if state.updates > 0 and state.updates % p.k == 0:  # Algorithm 2 lines 4-6
                for n, t in w.items():
                    state.previous[n].copy_(t)
            for n, t in w.items():
                wd = self.weight_decay.get(n, 0.0)
                t.sub_(loc_lr * (p.alpha * grads[n] + wd * t + p.beta * sync[n]))
        elif p.local_rule == "glu_code":
            for n, t in w.items():
                wd = self.weight_decay.get(n, 0.0)
                sync = ((1 - loc_lr * wd) * state.previous[n] - t) / 8.0
                state.previous[n].copy_(t)  # the weights before this update
                t.sub_(loc_lr * (p.alpha * grads[n] + wd * t + p.beta * sync))
        elif p.local_rule == "sgd":
            for n, t in w.items():
                wd = self.weight_decay.get(n, 0.0)
                t.sub_(loc_lr * (grads[n] + wd * t))
        elif p.local_rule == "dcasgd":
            for n, t in w.items():
                g, wd = grads[n], self.weight_decay.get(n, 0.0)
                ms = state.mean_square.setdefault(n, torch.zeros_like(t))
                ms.mul_(p.dc_ms_decay).add_(g * g, alpha=1 - p.dc_ms_decay).add_(1e-7)
                compensation = p.dc_lambda / ms.sqrt() * g * g * (t - state.previous[n])
                state.previous[n].copy_(t)
                t.sub_(loc_lr * (g + wd * t + compensation))
        state.updates += 1

    # -- evaluation and checkpoints ---------------------------------------------------------------------
    def eval_weights(self):
        if self.ps is not None:
            return self.ps.fetch_global(self.workers[0].rank)
        self.apply_pending()  # what the servers would hold now; the local weights are not touched
        replica = self.replicas[self.workers[0].rank]
        out = {n: torch.empty_like(t) for n, t in self.workers[0].params.items()}
        scatter_pieces(replica.message(averaged=True), replica.pieces, out)
        return out

    def state_dict(self):
        def copy(tensors):
            return None if tensors is None else {n: t.clone() for n, t in tensors.items()}

        state = {"local": {r: {"updates": s.updates, "previous": copy(s.previous), "mean_square": copy(s.mean_square)}
                           for r, s in self.local.items()},
                 "copy": {r: copy(c) for r, c in self.copy.items()}}
        if self.ps is not None:
            state["servers"] = self.ps.state_dict()
        else:
            self.apply_pending()  # the pushes in flight are part of the replicas' state
            state["replicas"] = {r: c.state_dict() for r, c in self.replicas.items()}
        return state

    def load_state_dict(self, state):
        for rank, saved in state["local"].items():
            self.local[int(rank)] = LocalState(saved["updates"], saved["previous"], dict(saved["mean_square"]))
        self.copy = {int(rank): dict(c) for rank, c in state.get("copy", {}).items()}
        if self.ps is not None:
            self.ps.load_state_dict(state["servers"])
        else:
            for rank, saved in state["replicas"].items():
                self.replicas[int(rank)].load_state_dict(saved)


def glu_grad_sync(previous: dict, weights: dict, momentum: float, lr: float, k: int) -> dict:
    """Sec. 3.3: grad_sync = (pre_weight - w') (1 - m) / (lr k), the global gradient the servers' momentum
    SGD implies between two pulls k iterations apart. Zero while the learning rate is zero."""
    if lr == 0:
        return {n: torch.zeros_like(t) for n, t in weights.items()}
    scale = (1 - momentum) / (lr * k)
    return {n: (previous[n] - t) * scale for n, t in weights.items()}
