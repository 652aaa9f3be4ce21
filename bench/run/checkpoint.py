"""Checkpoints of a run in progress, and the signals that ask for one.

Layout, one folder per run (``OUT/checkpoints/<run_id>/``)::

    step-000000340/rank0.pt   one file per process ("sim" under the sim backend; "rank2" for a server)
    latest.json               {"step": 340, "files": [...], "requeues": 0, "git_sha": ..., "saved_at": ...}

A checkpoint is in force once ``latest.json`` names it. Every process writes its file, all meet on the control
channel, and only then does the process of worker 0 write ``latest.json`` and delete older steps: a job killed
half-way through saving leaves the previous checkpoint in force.

Signals: Slurm warns a job before its time limit, and a preempting scheduler before it stops a job, with the
signal the job asked for (``--signal=USR2@90``). SIGUSR1/SIGUSR2 only set a flag here; the training loop
checks it at its *sync points* (every step under ``sim``; every :data:`POLL_STEPS` steps under ``dist``, where
the processes agree by a one-number sum, since each may get the signal at a different step), saves a
checkpoint there and stops.
"""
from __future__ import annotations

import contextlib
import json
import os
import pickle
import random
import re
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from commbench.store.provenance import now
from commbench.store.records import atomic_write
from commbench.store.results_folder import CHECKPOINT_INDEX, ResultsFolder
from commbench.store.safe_io import read_small_text, remove_tree, write_with
from commbench.store.signals import signals_held

STOP_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
FOLDER_NAME = re.compile(r"^step-[0-9]{9}$")
FILE_NAME = re.compile(r"^(sim|rank[0-9]{1,6})\.pt$")


def on_device(state, device: torch.device):
    """A checkpoint's state with its tensors moved to ``device``, nested dicts, lists and tuples kept. Checkpoints
    load onto the CPU (a run saved on a GPU resumes anywhere), and a method's state (SSD-SGD's pre_weight,
    PowerSGD's memories) must sit beside the weights it updates, or its first step mixes devices."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {key: on_device(value, device) for key, value in state.items()}
    if type(state) in (list, tuple):
        return type(state)(on_device(value, device) for value in state)
    return state


class CheckpointNotWritten(OSError):
    """A checkpoint that could not be written (a full disk, a refused path); ``str(err)`` says which, and why."""

    def __str__(self) -> str:
        return self.args[0]


class UntrustedCheckpoint(ValueError):
    """A checkpoint this harness did not write, or that holds more than tensors and plain values."""


def safe_load(path: Path):
    """``torch.load`` that unpickles tensors and plain values only (``weights_only=True``): a pickle planted in a
    results folder cannot run code. Raises :class:`UntrustedCheckpoint` naming the file."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        why = next((line.strip() for line in str(exc).splitlines() if "Unsupported" in line or "global" in line),
                   "it holds objects other than tensors and plain values")
        raise UntrustedCheckpoint(f"{path}: refused, not a checkpoint of tensors and plain values ({why[:160]})") \
            from None
    except (OSError, RuntimeError, EOFError, ValueError) as exc:
        raise UntrustedCheckpoint(f"{path}: cannot be read as a checkpoint ({str(exc).splitlines()[0][:160]})") \
            from None
POLL_STEPS = 10  # dist: steps between agreements on a stop signal (a 1-element control sum)


class _StopFlag:
    signal_name: str | None = None
    depth: int = 0  # nested stop_signals() blocks: a Slurm job's, then the run's


_STOP = _StopFlag()


def stop_requested() -> str | None:
    """The name of the stop signal this process received, if any."""
    return _STOP.signal_name


def on_stop_signal(signum, _frame=None) -> None:
    """Note a stop signal (the handler inside :func:`stop_signals`; a launcher that passes the signal on to its
    processes calls it too, so that it also knows to stop)."""
    _STOP.signal_name = signal.Signals(signum).name


def stop_signals_held():
    """While inside, SIGUSR1/SIGUSR2 wait (blocked) instead of arriving. Processes started inside inherit the
    block across exec: a dist process unblocks them once its handler is in (:mod:`.worker`), so a stop signal
    passed on while it is still importing is kept, not its death (SIGUSR1's default action ends a process)."""
    return signals_held(STOP_SIGNALS)


@contextlib.contextmanager
def stop_signals():
    """While inside: SIGUSR1/SIGUSR2 ask the run to checkpoint and stop (instead of killing the process).

    Blocks nest: only the outermost one clears the flag, so a signal that reaches a Slurm job while it is still
    starting (inside the job's block, before the run's) is not forgotten when the run begins."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
        yield
        return
    previous = {s: signal.signal(s, on_stop_signal) for s in STOP_SIGNALS}
    if _STOP.depth == 0:
        _STOP.signal_name = None
    _STOP.depth += 1
    try:
        yield
    finally:
        _STOP.depth -= 1
        for s, handler in previous.items():
            signal.signal(s, handler)


def capture_rng(workers_rng: dict) -> dict:
    """Every random stream a run draws from: torch (CPU and CUDA), Python, NumPy, and the workers' own. Only
    tensors and plain Python values, so that a checkpoint loads with ``weights_only=True`` (no pickled code)."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "python": random.getstate(),
            "numpy": (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
            "workers": workers_rng}


def restore_rng(state: dict) -> dict:
    """Set the process-wide streams; returns the workers' own states."""
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    return state["workers"]


@dataclass
class Checkpoints:
    """One process's view of a run's checkpoint folder.

    ``every``: save every N steps (0: only when a stop signal asks). ``key``: this process's file name.
    ``writer``: this process writes ``latest.json`` (the one holding worker 0). ``poll``: steps between sync
    points (1 under sim, where checking the flag costs nothing)."""

    directory: Path
    every: int = 0
    key: str = "sim"
    writer: bool = True
    poll: int = POLL_STEPS

    @property
    def latest_path(self) -> Path:
        return self.directory / CHECKPOINT_INDEX

    @property
    def root(self) -> Path:
        """The results folder (``ROOT/checkpoints/<run_id>``): below it nothing is written through a link."""
        return ResultsFolder.holding(self.directory).root

    def latest(self) -> dict | None:
        """The index of the checkpoint in force, or None where there is none or it cannot be read (what cannot be
        read is refused by :meth:`verify` before a run resumes)."""
        try:
            return read_latest(self.latest_path)
        except UntrustedCheckpoint:
            return None

    def files_in_force(self) -> list[Path]:
        """The files of the checkpoint in force. Raises :class:`UntrustedCheckpoint` unless ``latest.json`` names a
        folder and files of the shapes this harness writes, inside this run's checkpoint folder (a results folder
        on shared storage may hold anything)."""
        latest = self.latest()
        if latest is None:
            return []
        folder, files = latest.get("folder"), latest.get("files")
        if not isinstance(folder, str) or not FOLDER_NAME.match(folder):
            raise UntrustedCheckpoint(f"{self.latest_path}: folder {str(folder)[:80]!r} is not one commbench writes")
        if not isinstance(files, list) or not all(isinstance(f, str) and FILE_NAME.match(f) for f in files):
            raise UntrustedCheckpoint(f"{self.latest_path}: files {str(files)[:80]!r} are not ones commbench writes")
        paths = [self.directory / folder / f for f in files]
        root = self.directory.resolve()
        for path in paths:
            if path.is_symlink() or not path.resolve().is_relative_to(root):
                raise UntrustedCheckpoint(f"{path}: leads outside {self.directory}")
        return paths

    def load(self) -> dict | None:
        """This process's state at the checkpoint in force, or None to start from step 0. Loaded with
        ``weights_only=True``: tensors and plain values only, never pickled code."""
        latest = self.latest()
        if latest is None:
            return None
        self.files_in_force()
        path = self.directory / latest["folder"] / f"{self.key}.pt"
        if not path.exists():
            raise RuntimeError(f"checkpoint {self.directory / latest['folder']} has no state for {self.key} "
                               f"(made by a run with other processes?); delete {self.directory} to start over")
        return safe_load(path)

    def verify(self) -> None:
        """Before a run resumes: its index is a small regular file of JSON, and every file of the checkpoint in
        force loads as tensors and plain values. Raises :class:`UntrustedCheckpoint` (one line) otherwise."""
        if os.path.lexists(self.latest_path):
            read_latest(self.latest_path)
        for path in self.files_in_force():
            safe_load(path)

    def sync_point(self, done: int, total: int) -> bool:
        """Steps after which every process meets to agree on stopping (and saves if due)."""
        return done < total and (done % self.poll == 0 or (self.every > 0 and done % self.every == 0))

    def decide(self, done: int, comm) -> tuple[bool, str | None]:
        """(save now, why stop) at a sync point; the same answer in every process of the run."""
        mine = stop_requested()
        asked = comm.control_sum(torch.tensor([1.0 if mine else 0.0], dtype=torch.float64)).item() > 0
        why = (mine or "a stop signal to another process") if asked else None
        return asked or (self.every > 0 and done % self.every == 0), why

    def save(self, done: int, state: dict, comm, meta: dict | None = None) -> None:
        folder = f"step-{done:09d}"
        path = self.directory / folder / f"{self.key}.pt"
        try:  # a random temporary name, never through a link, removed whatever fails (safe_io)
            write_with(path, lambda f: torch.save(state, f), root=self.root)
        except OSError as exc:
            raise CheckpointNotWritten(f"checkpoint at step {done} could not be written to {path}: "
                                       f"{exc.strerror or exc}") from None
        comm.control_sum(torch.zeros(1, dtype=torch.float64))  # every process has written its file
        if not self.writer:
            return
        previous = self.latest() or {}
        files = sorted(p.name for p in path.parent.glob("*.pt"))
        try:
            atomic_write(self.latest_path, json.dumps({
                "step": done, "folder": folder, "files": files, "saved_at": now(),
                "requeues": previous.get("requeues", 0), **(meta or {})}, indent=1), root=self.root)
        except OSError as exc:
            raise CheckpointNotWritten(f"checkpoint at step {done} could not be written to {self.latest_path}: "
                                       f"{exc.strerror or exc}") from None
        for old in self.directory.glob("step-*"):
            if old.name != folder:
                remove_tree(old, root=self.root)

    def remove(self) -> None:
        """The run ended (done or diverged): its checkpoints are of no more use."""
        remove_tree(self.directory, root=self.root)


MAX_INDEX_BYTES = 2 ** 16  # latest.json names a folder and a few files: a few hundred bytes


def read_latest(path: Path) -> dict | None:
    """A checkpoint's index (``latest.json``): None where there is none or it is not a JSON object (a checkpoint
    half-made by an older harness starts over); :class:`UntrustedCheckpoint` where something else stands at its
    name (a FIFO must not hang a run, a link to /dev/zero exhaust its memory, a folder stop it)."""
    if not os.path.lexists(path):
        return None
    text = read_small_text(Path(path), MAX_INDEX_BYTES, UntrustedCheckpoint)
    try:
        latest = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return latest if isinstance(latest, dict) else None


def count_requeue(directory: Path) -> int:
    """Add one to the requeue count kept beside the checkpoint in force; returns the new count."""
    path = Path(directory) / CHECKPOINT_INDEX
    latest = read_latest(path)
    if latest is None:
        raise UntrustedCheckpoint(f"{path}: no checkpoint index to count a requeue in")
    requeues = latest.get("requeues", 0)
    latest["requeues"] = (requeues if isinstance(requeues, int) and requeues >= 0 else 0) + 1
    # ROOT/checkpoints/<run_id>/latest.json: nothing below ROOT is written through a link
    atomic_write(path, json.dumps(latest, indent=1), root=ResultsFolder.holding(directory).root)
    return latest["requeues"]
