"""SSD-SGD against a line-by-line transcription of Algorithm 1 (and Algorithm 2 for GLU) on a tiny model.

The transcription below is written from the paper alone, independently of ``methods/ssdsgd.py``: every worker
keeps the weights on its devices (``device``, what it computes gradients on) and its local copy w' (``local``);
after warm-up it pushes, moves w' with the local rule, broadcasts w' to the devices and only then, on a pull
iteration, copies the pulled global weights into w' (lines 15-25). The servers run momentum SGD on the mean of
the pushes (Eq. 6). The method must compute the same weights, for every local rule, on both topologies, in one
process (sim) and on real gloo processes (dist); and k = 1 must not be synchronous SGD.
"""
from __future__ import annotations

import os
import traceback

import pytest
import torch

from commbench.methods import Worker
from commbench.methods.comm import SimCommunicator, make_dist_communicator
from commbench.methods.ssdsgd import SSDSGD, SSDSGDParams

from ..gloo import spawn

WORKERS, STEPS, LR, MOMENTUM = 2, 14, 0.05, 0.9
BATCH = 8  # a worker's images: MXNet hands the local optimizer their summed gradient
DECAY = {"a": 0.01, "b": 0.0}
INIT = {"a": torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64), "b": torch.tensor([1.5, 0.25], dtype=torch.float64)}
RULES = ("glu", "glu_code", "sgd", "dcasgd", "none")


def gradient(weights: dict, rank: int, step: int) -> dict:
    """A worker's data gradient at ``weights``: that of a least-squares loss whose target moves with the
    worker and the step, so that every weight a gradient is computed on leaves its mark."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    return {n: 0.8 * w - torch.randn(w.shape, generator=g, dtype=torch.float64) for n, w in weights.items()}


# -- the transcription -------------------------------------------------------------------------------------
class Server:
    """Eq. 6 with momentum SGD as torch computes it: g = mean + wd w; buf = m buf + g; w = w - lr buf."""

    def __init__(self):
        self.w = {n: t.clone() for n, t in INIT.items()}
        self.buf = None

    def update(self, pushes: list[dict]) -> None:
        mean = {n: sum(p[n] for p in pushes) / len(pushes) for n in self.w}
        g = {n: mean[n] + DECAY[n] * self.w[n] for n in self.w}
        self.buf = g if self.buf is None else {n: MOMENTUM * self.buf[n] + g[n] for n in self.w}
        self.w = {n: self.w[n] - LR * self.buf[n] for n in self.w}


class LocalRule:
    """Algorithm 2 (GLU) and the other local rules, one worker's state, as the paper and Sec. 4.1 state them."""

    def __init__(self, rule: str, params: SSDSGDParams):
        self.rule, self.p = rule, params
        self.loc_update = 0
        self.pre = None  # GLU's pre_weight; the previous weights for glu_code and dcasgd
        self.ms = None

    def __call__(self, w: dict, g: dict) -> dict:
        p, loc_lr = self.p, self.p.local_lr_scale * LR
        if self.rule == "none":
            return w
        if p.local_grad_scale == "code":
            # the authors' code (MXNet): the local updater gets the gradient summed over the worker's images
            # (kvstore_dist.h: Reduce into comm_buf) and multiplies it by rescale_grad = 1 / (batch x workers)
            # (module.py init_optimizer under dist_sync), before the rule uses it (optimizer.py: grad *= rescale)
            summed = {n: BATCH * t for n, t in g.items()}
            g = {n: t * (1.0 / (BATCH * WORKERS)) for n, t in summed.items()}
        if self.pre is None:  # Algorithm 2 line 2
            self.pre = {n: t.clone() for n, t in w.items()}
        out = {}
        if self.rule == "glu":
            sync = {n: (self.pre[n] - w[n]) * ((1 - MOMENTUM) / (LR * p.k)) for n in w}  # line 3, Sec. 3.3
            if self.loc_update > 0 and self.loc_update % p.k == 0:  # lines 4-6
                self.pre = {n: t.clone() for n, t in w.items()}
            out = {n: w[n] - loc_lr * (p.alpha * g[n] + DECAY[n] * w[n] + p.beta * sync[n]) for n in w}  # Eq. 8
        elif self.rule == "glu_code":
            for n in w:
                sync = ((1 - loc_lr * DECAY[n]) * self.pre[n] - w[n]) / 8.0
                out[n] = w[n] - loc_lr * (p.alpha * g[n] + DECAY[n] * w[n] + p.beta * sync)
            self.pre = {n: t.clone() for n, t in w.items()}
        elif self.rule == "sgd":
            out = {n: w[n] - loc_lr * (g[n] + DECAY[n] * w[n]) for n in w}
        elif self.rule == "dcasgd":
            if self.ms is None:
                self.ms = {n: torch.zeros_like(t) for n, t in w.items()}
            for n in w:
                self.ms[n] = p.dc_ms_decay * self.ms[n] + (1 - p.dc_ms_decay) * g[n] * g[n] + 1e-7
                comp = p.dc_lambda / self.ms[n].sqrt() * g[n] * g[n] * (w[n] - self.pre[n])
                out[n] = w[n] - loc_lr * (g[n] + DECAY[n] * w[n] + comp)
            self.pre = {n: t.clone() for n, t in w.items()}
        self.loc_update += 1
        return out


def algorithm1(params: SSDSGDParams, steps: int = STEPS) -> tuple[list[list[dict]], dict]:
    """Every worker's device weights after each iteration, and the servers' final weights."""
    server, wp, k = Server(), params.warmup, params.k
    device = [{n: t.clone() for n, t in INIT.items()} for _ in range(WORKERS)]  # line 2: pull w_0
    local: list[dict | None] = [None] * WORKERS
    rules = [LocalRule(params.local_rule, params) for _ in range(WORKERS)]
    history, num = [], 0
    while num <= wp and num < steps:  # lines 3-14
        grads = [gradient(device[i], i, num) for i in range(WORKERS)]  # lines 4-5
        server.update(grads)  # line 6 (the servers step once all pushes are in)
        for i in range(WORKERS):
            device[i] = {n: t.clone() for n, t in server.w.items()}  # line 8, broadcast for the next iteration
            if num == wp:  # lines 9-11
                local[i] = {n: t.clone() for n, t in server.w.items()}
        history.append([{n: t.clone() for n, t in d.items()} for d in device])
        num += 1
    while num < steps:  # lines 15-27
        grads = [gradient(device[i], i, num) for i in range(WORKERS)]  # line 16
        server.update(grads)  # line 17
        for i in range(WORKERS):
            local[i] = rules[i](local[i], grads[i])  # line 18
            device[i] = {n: t.clone() for n, t in local[i].items()}  # line 21 / 24: broadcast w'
            if num % k == k - 1:  # line 20
                local[i] = {n: t.clone() for n, t in server.w.items()}  # line 22: pull and copy into w'
        history.append([{n: t.clone() for n, t in d.items()} for d in device])
        num += 1
    return history, server.w


def synchronous_sgd(steps: int = STEPS) -> list[dict]:
    """SSGD: everyone computes on the global weights of the previous step."""
    server, history = Server(), []
    device = [{n: t.clone() for n, t in INIT.items()} for _ in range(WORKERS)]
    for step in range(steps):
        server.update([gradient(device[i], i, step) for i in range(WORKERS)])
        device = [{n: t.clone() for n, t in server.w.items()} for _ in range(WORKERS)]
        history.append(device)
    return history


# -- the method ---------------------------------------------------------------------------------------------
def make_workers(ranks) -> list[Worker]:
    out = []
    for rank in ranks:
        tensors = {n: torch.nn.Parameter(t.clone()) for n, t in INIT.items()}
        out.append(Worker(rank, tensors, torch.optim.SGD(tensors.values(), lr=0.0, momentum=MOMENTUM)))
    return out


def drive(method: SSDSGD, steps: int = STEPS) -> list[dict[int, dict]]:
    """The harness's part: gradients on each local worker's parameters, then one method step."""
    history = []
    for step in range(steps):
        grads = [gradient({n: t.detach() for n, t in w.params.items()}, w.rank, step) for w in method.workers]
        method.step(grads, LR, step)
        history.append({w.rank: {n: t.detach().clone() for n, t in w.params.items()} for w in method.workers})
    return history


def sim_method(params: SSDSGDParams) -> SSDSGD:
    comm = SimCommunicator(WORKERS, num_servers=params.servers if params.topology == "ps" else 0)
    return SSDSGD(comm, make_workers(range(WORKERS)), params, DECAY)


def close(a: dict, b: dict) -> bool:
    return all(torch.allclose(a[n], b[n], rtol=1e-12, atol=1e-14) for n in a)


CASES = [(rule, k, topology, scale) for rule in RULES for k in (1, 3) for topology in ("ps", "allreduce")
         for scale in ("code", "paper")]


@pytest.mark.parametrize("rule,k,topology,scale", CASES, ids=[f"{r}-k{k}-{t}-{s}" for r, k, t, s in CASES])
def test_method_is_algorithm_1(rule, k, topology, scale):
    """Every rule at the paper's scale (its text) and at the authors' (glu_code at ``code`` is COSDCASGD as their
    CIFAR-10 script runs it, rescale_grad included), step by step."""
    params = SSDSGDParams(k=k, warmup=2, local_rule=rule, topology=topology, servers=1, local_grad_scale=scale)
    expected, global_w = algorithm1(params)
    method = sim_method(params)
    got = drive(method)
    for step, (want, have) in enumerate(zip(expected, got)):
        for rank in range(WORKERS):
            assert close(have[rank], want[rank]), f"step {step}, worker {rank}"
    assert close(method.eval_weights(), global_w)


@pytest.mark.parametrize("rule", RULES)
def test_k1_is_not_synchronous_sgd(rule):
    """k = 1 still computes on locally updated weights (Eq. 7 saves T_f + T_b at k = 1): after warm-up, the
    device weights leave synchronous SGD's at once, for every rule (``none`` computes one pull late)."""
    params = SSDSGDParams(k=1, warmup=2, local_rule=rule, topology="ps")
    got, ssgd = drive(sim_method(params)), synchronous_sgd()
    for step in range(3):  # warm-up 0..2: synchronous SGD
        assert close(got[step][0], ssgd[step][0])
    assert not close(got[3][0], ssgd[3][0])
    assert not close(got[-1][0], ssgd[-1][0])


def test_two_servers_compute_what_one_does():
    one, two = (sim_method(SSDSGDParams(k=3, warmup=2, topology="ps", servers=s)) for s in (1, 2))
    for a, b in zip(drive(one), drive(two)):
        assert all(close(a[r], b[r]) for r in range(WORKERS))


# -- sim == dist, on real gloo processes --------------------------------------------------------------------
def _dist_rules(rank: int, port: int, queue, topology: str) -> None:
    servers = 1 if topology == "ps" else 0
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORKERS + servers))
    try:
        comm = make_dist_communicator(backend="gloo", timeout_s=60, num_servers=servers)
        out = {}
        for rule in RULES:
            params = SSDSGDParams(k=3, warmup=2, local_rule=rule, topology=topology, servers=1)
            if comm.local_ranks:
                method = SSDSGD(comm, make_workers(comm.local_ranks), params, DECAY)
                out[rule] = (drive(method)[-1][rank], comm.ledger.sent[rank], comm.ledger.received[rank])
            else:  # the server process: the servers' side of every step
                role = SSDSGD.make_server(comm, params, make_workers([-1])[0], DECAY)
                for step in range(STEPS):
                    role.step(step, LR)
                role.close()
                out[rule] = (None, comm.ledger.sent[rank], comm.ledger.received[rank])
        queue.put((rank, out))
        comm.close()
    except BaseException:
        queue.put((rank, traceback.format_exc()))
        raise


def _dist_ps(rank, port, queue):
    _dist_rules(rank, port, queue, "ps")


def _dist_allreduce(rank, port, queue):
    _dist_rules(rank, port, queue, "allreduce")


@pytest.mark.parametrize("topology,target", [("ps", _dist_ps), ("allreduce", _dist_allreduce)])
def test_dist_equals_sim_bit_for_bit(topology, target):
    results = spawn(target, WORKERS + (topology == "ps"), timeout_s=180)
    comm = SimCommunicator(WORKERS, num_servers=1 if topology == "ps" else 0)
    for rule in RULES:  # the same communicator throughout, so the ledger accumulates as in the processes
        params = SSDSGDParams(k=3, warmup=2, local_rule=rule, topology=topology, servers=1)
        last = drive(SSDSGD(comm, make_workers(range(WORKERS)), params, DECAY))[-1]
        for rank in range(WORKERS):
            weights, sent, received = results[rank][rule]
            assert all(torch.equal(weights[n], last[rank][n]) for n in INIT), (rule, rank)
            assert (sent, received) == (comm.ledger.sent[rank], comm.ledger.received[rank]), (rule, rank)
        if topology == "ps":
            _, sent, received = results[WORKERS][rule]
            assert (sent, received) == (comm.ledger.sent[WORKERS], comm.ledger.received[WORKERS]), rule
