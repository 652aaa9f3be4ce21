"""``model tta --calibrate-on none``: the projection calibrated on runs behind no emulated link (config net null:
the simulated workers of an accuracy grid such as the zoo's, or dist runs on the host's own network).

Such runs measured what does not depend on a network: each seed's steps to the target (its history's first
evaluation at or above it), the bytes per worker per step (the ledger) and the codec time per step (the records'
encode + decode, one worker's: tta_tables._per_step says how a sim record's breakdown is divided). They measured
no exchange: nothing hidden behind backward and no transport overhead is known, so an overlapped all-reduce is
projected with the bound (2/3 of the compute hides it) and no overhead, and their compute (one thread for every
simulated worker, often another device) says nothing of a cluster's: the compute per step is the cluster
profile's, or ``--compute-s``. Nor can they be validated on a held-out link: that is done on an emulated-link
grid (zoo-network: ``--calibrate-on 1gbit --validate-on 100mbit``).
"""
from __future__ import annotations

from pathlib import Path

from commbench.config import ConfigError

from .tta_tables import NO_LINK, cluster_rows, measured_arms, timing_cpu

UNMEASURED = ("measured s", "held-out error", "within 20%")  # a held-out link's columns: none here


def check_unlinked(cluster, task: str, compute_s: float | None, validate_on: str | None) -> None:
    """What ``--calibrate-on none`` needs and refuses, before any record is read."""
    if validate_on:
        raise ConfigError(f"--validate-on {validate_on}: not with --calibrate-on {NO_LINK} (runs behind no emulated "
                          f"link hold out no link; validate on an emulated-link grid, --calibrate-on 1gbit)")
    if cluster is None:
        raise ConfigError(f"--calibrate-on {NO_LINK}: needs --cluster (with --compute-s, or the profile's compute per "
                          f"step): runs behind no emulated link measured no compute a cluster would take")


def report(results: Path, task: str, workers: int, cluster, compute_s: float | None = None,
           target: float | None = None, cpu: str | None = None,
           links: list[str] | None = None) -> tuple[list[dict], list[str], dict, str]:
    """The projection to ``cluster``, one block per rate in ``links`` (default: the cluster's own link): rows,
    notes, the calibration arms (for a crossover map) and the CPU the runs read were timed on."""
    check_unlinked(cluster, task, compute_s, None)
    cpu = timing_cpu(results, task, workers, [None], cpu)
    calibration = measured_arms(results, task, workers, None, target, cpu)
    if not calibration:
        raise ConfigError(f"--calibrate-on {NO_LINK}: no done {task} runs of {workers} workers behind no emulated "
                          f"link (config net null) under {results}")
    notes = [f"steps to target, bytes and codec time per step from {task}, {workers} workers, behind no emulated "
             f"link ({sum(m.seeds for m in calibration.values())} runs under {results}, timed on {cpu}); the codec "
             f"time is one worker's; no exchange was measured: an overlapped all-reduce hides up to 2/3 of the "
             f"compute, no transport overhead; not validated here (validate on an emulated-link grid: "
             f"--calibrate-on 1gbit --validate-on 100mbit)"]
    rows = cluster_rows(calibration, cluster, task, workers, compute_s, links or [cluster.link], {}, notes)
    return [{k: v for k, v in row.items() if k not in UNMEASURED} for row in rows], notes, calibration, cpu
