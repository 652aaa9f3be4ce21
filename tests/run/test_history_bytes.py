"""The history's cumulative bytes, both ways: what the time-to-accuracy model cuts a run into stretches with
(SSD-SGD pulls every step during its warm-up, then every k-th; its pushes every step)."""
from __future__ import annotations

from commbench.analysis.perfmodel.tta_tables import _segments
from commbench.config import resolve
from commbench.methods.comm import SimCommunicator
from commbench.methods.ssdsgd import pulls_at
from commbench.config.resolve import server_count
from commbench.run.train import Trainer
from commbench.store.records import Status

STEPS, K, WARMUP = 9, 2, 3


def test_ssdsgd_history_counts_its_pulls_where_they_happen_and_the_model_reads_them():
    cfg = resolve({"task": "lenet-mnist", "dataset": "synthetic", "method": "ssdsgd", "backend": "sim",
                   "workers": 2, "global_batch": 16, "steps": STEPS, "threads": 1, "method.k": K,
                   "method.warmup": WARMUP, "method.topology": "ps", "method.servers": 2})
    trainer = Trainer(cfg, SimCommunicator(2, num_servers=server_count(cfg)), checkpoints=None)
    for step in range(STEPS):
        trainer.step(step)
        trainer.loop.done = step + 1
        trainer.log_point(step, None)
    record = trainer.outcome(Status.DONE, None, keep_weights=False)
    history, metrics = record.history, record.metrics
    assert [p["step"] for p in history] == list(range(1, STEPS + 1))  # a point per step (stride 1 below 100)
    sent = [b["bytes_sent"] - a["bytes_sent"] for a, b in zip([{"bytes_sent": 0}] + history, history)]
    got = [b["bytes_received"] - a["bytes_received"] for a, b in zip([{"bytes_received": 0}] + history, history)]
    full = sent[0]
    assert set(sent) == {full}  # every step pushes the whole gradient
    assert got == [full if pulls_at(num, WARMUP, K) else 0 for num in range(STEPS)]  # a pull returns it all
    assert history[-1]["bytes_received"] == metrics["bytes_received"]
    segments = _segments({"metrics": metrics, "config": {"workers": 2}, "history": history})
    assert [(s.steps, s.sent, s.received) for s in segments[:2]] == [(WARMUP + 1, full / 2, full / 2),
                                                                      (1, full / 2, 0.0)]
    assert sum(s.steps for s in segments) == STEPS
