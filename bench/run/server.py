"""A parameter-server process of a dist run: the servers' side of every step, in the workers' rhythm."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from commbench.config import RunConfig
from commbench.methods import Worker, registry
from commbench.methods.comm import Communicator
from commbench.run.checkpoint import Checkpoints, on_device
from commbench.run.devices import pick_device, set_threads
from commbench.run.evaluation import eval_steps
from commbench.run.optim import lr_at, make_optimizer
from commbench.run.rhythm import final_totals, is_log_point, log_stride
from commbench.tasks import TASKS


def serve(cfg: RunConfig, comm: Communicator, checkpoints: Checkpoints | None = None) -> None:
    """A parameter-server process of a dist run: the servers' side of every step, in the workers' rhythm.

    It meets the workers on the control channel at the same log points (so it stops with them when a run
    diverges) and sync points (so it saves its shard with their checkpoint), and sends worker 0 the global
    weights at each evaluation."""
    set_threads(cfg)
    task = TASKS[cfg.task]
    data = task.load_data(cfg.dataset, Path(cfg.data_root or "data"), cfg.model_variant)
    torch.manual_seed(cfg.seed)  # the workers' initial weights: the same seed, the same construction
    template = task.make_model(cfg.model_variant, data.num_classes, data.input_shape[0], cfg.model_options)
    template_device = pick_device(cfg, comm)
    template = template.to(template_device)
    method_cls, params = registry.get(cfg.method), registry.params_for(cfg.method, cfg.method_params)
    holder = Worker(-1, dict(template.named_parameters()), make_optimizer(cfg.optimizer, template.parameters()))
    role = method_cls.make_server(comm, params, holder, task.weight_decay_map(template, cfg.weight_decay),
                                  ema=cfg.ema)
    del data
    start = 0
    saved = checkpoints.load() if checkpoints else None
    if saved is not None:
        role.load_state_dict(on_device(saved["role"], template_device))
        comm.ledger.load_state_dict(saved["ledger"])
        start = saved["step"]
    evals, stride = eval_steps(cfg), log_stride(cfg)
    for step in range(start, cfg.steps):
        role.step(step, lr_at(cfg.lr_schedule, step, cfg.steps))
        done = step + 1
        if is_log_point(done, stride, evals):
            totals = comm.control_sum(torch.zeros(4, dtype=torch.float64))
            if not math.isfinite(totals[0].item() / max(1.0, totals[1].item())):
                break
            if done in evals:
                role.send_global()
        if checkpoints and checkpoints.sync_point(done, cfg.steps):
            save, stopped_by = checkpoints.decide(done, comm)
            if save:
                checkpoints.save(done, {"step": done, "role": role.state_dict(),
                                        "ledger": comm.ledger.state_dict()}, comm)
            if stopped_by:
                break
    role.close()
    final_totals(cfg, comm)
