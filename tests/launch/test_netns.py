"""Emulated networks (``--net RATE``): one network namespace per process, rate-limited veth links, a bridge.

Needs root and iproute2; the tests that build networks skip without them (and fail instead with
COMMBENCH_REQUIRE_NETNS=1). Every network lives in namespaces named ``cb<id>-...`` and addresses 10.213.<id>.x;
nothing touches the host's own namespace.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from commbench import cli
from commbench.launch import netns
from commbench.launch.netns import STATE_DIR, cleanup_stale, emulated_network

from ..helpers import alive, record_of
from ..conftest import REPO, commbench

pytestmark = pytest.mark.netns

TINY = ["run", "--task", "lenet-mnist", "--dataset", "synthetic", "--workers", "2", "--set", "global_batch=16",
        "--quiet"]
NS_NAME = re.compile(r"^cb\d+-(br|\d+)$")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_NET_ADMIN"
    missing = [c for c in ("ip", "tc") if shutil.which(c) is None]
    if missing:
        return f"no {' and '.join(missing)} command (iproute2)"
    probe = f"cbprobe{os.getpid()}"
    proc = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=20)
    if proc.returncode != 0:
        return f"`ip netns add` fails here: {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=20)
    return None


@pytest.fixture(scope="module")
def can_netns():
    why = _why_not()
    if why is not None:
        if os.environ.get("COMMBENCH_REQUIRE_NETNS") == "1":
            pytest.fail(f"COMMBENCH_REQUIRE_NETNS=1 but {why}")
        pytest.skip(why)


def ours() -> set[str]:
    """The emulated networks' namespaces and state files that exist now."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=20).stdout
    names = {line.split()[0] for line in out.splitlines() if line.strip()}
    files = {f"state:{p.name}" for p in STATE_DIR.glob("cb*.json")} if STATE_DIR.is_dir() else set()
    return {n for n in names if NS_NAME.match(n)} | files




# -- 1. measured bytes against the ledger ----------------------------------------------------------------------
@pytest.mark.parametrize("method", ["baseline", "terngrad"])
def test_wire_bytes_match_the_ledger(can_netns, tmp_path, method):
    before = ours()
    proc = commbench(*TINY, "--method", method, "--steps", "20", "--set", "eval.every=20", "--net", "1gbit",
                     "--out", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    rec = record_of(tmp_path)
    m = rec["metrics"]
    ledger = m["bytes_sent"] + m["bytes_received"]
    print(f"{method}: wire_bytes_measured {m['wire_bytes_measured']} ledger sent+received {ledger} "
          f"ratio {m['wire_bytes_measured'] / ledger:.4f}")
    assert ledger > 0 and abs(m["wire_bytes_measured"] - ledger) <= 0.10 * ledger
    assert rec["env"]["net"] == "1gbit" and rec["config"]["net"] == "1gbit"
    assert ours() == before


# -- 2. the rate holds ------------------------------------------------------------------------------------------
RECEIVER = """
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 5999)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); got = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    got += len(b)
c.sendall(b"k"); print(got, flush=True)
"""
SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 5999)); n = int(sys.argv[2]); buf = b"x" * (1 << 20)
t = time.perf_counter()
while n > 0:
    s.sendall(buf[:min(n, len(buf))]); n -= len(buf)
s.shutdown(socket.SHUT_WR); assert s.recv(1) == b"k"
print(time.perf_counter() - t)
"""


def transfer_s(net, nbytes: int) -> float:
    """Seconds to send ``nbytes`` over TCP from rank 0 to rank 1 (until the receiver has them all)."""
    receiver = subprocess.Popen(net.exec_prefix(1) + [sys.executable, "-c", RECEIVER, net.address(1)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout.readline().strip() == "ready"
        sent = subprocess.run(net.exec_prefix(0) + [sys.executable, "-c", SENDER, net.address(1), str(nbytes)],
                              capture_output=True, text=True, timeout=60)
        assert sent.returncode == 0, sent.stderr
        assert int(receiver.communicate(timeout=30)[0].strip()) == nbytes
        return float(sent.stdout.strip())
    finally:
        if receiver.poll() is None:
            receiver.kill()
        receiver.wait()


def test_100mbit_takes_ten_times_as_long_as_1gbit(can_netns):
    before = ours()
    times = {}
    for rate in ("1gbit", "100mbit"):
        with emulated_network(2, rate) as net:
            times[rate] = transfer_s(net, 20_000_000)
    ratio = times["100mbit"] / times["1gbit"]
    print(f"20 MB: 1gbit {times['1gbit']:.3f} s, 100mbit {times['100mbit']:.3f} s, ratio {ratio:.2f}")
    assert 6 <= ratio <= 14
    assert ours() == before


# -- 3. killed runs leave nothing behind ------------------------------------------------------------------------
def netns_pids(name: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=20).stdout
    return [int(p) for p in out.split()]


def worker_pids(name: str) -> list[int]:
    """The training workers in the namespace: not the short-lived ``ip``/``tc`` processes that build it."""
    def is_worker(pid: int) -> bool:
        try:
            return b"commbench.run.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return False
    return [p for p in netns_pids(name) if is_worker(p)]




def sigint_reaches_it() -> None:
    """A background job (CI, ``nohup ... &``) may inherit SIGINT ignored or blocked, and a Python started so
    never raises KeyboardInterrupt: the run under test must get Ctrl-C as a user's terminal delivers it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture
def long_run(can_netns, tmp_path):
    """A --net run that would take minutes, started in the background once both workers run in their
    namespaces: (process, its network's name, the workers' pids, out). Killed and cleaned up after the test."""
    before = ours()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "commbench", *TINY, "--method", "baseline", "--steps", "5000",
                             "--set", "step_sleep_s=0.2", "--net", "1gbit", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"},  # SIGABRT prints where it is
                            preexec_fn=sigint_reaches_it)
    try:
        deadline, name, pids = time.monotonic() + 120, None, []
        while time.monotonic() < deadline and proc.poll() is None:
            new = {n for n in ours() - before if n.startswith("state:")}
            if new:
                name = sorted(new)[0][len("state:"):-len(".json")]
                pids = [p for r in (0, 1) for p in worker_pids(f"{name}-{r}")]
                if len(pids) == 2:
                    break
            time.sleep(0.2)
        assert proc.poll() is None and len(pids) == 2, f"the run did not start its workers: {proc.stderr}"
        yield proc, name, pids, out, before
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)
        cleanup_stale()


@pytest.mark.parametrize("sig, code, error", [(signal.SIGINT, 130, "interrupted (Ctrl-C)"),
                                              (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_interrupted_run_tears_its_network_down(long_run, sig, code, error):
    proc, name, pids, out, before = long_run
    proc.send_signal(sig)
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:  # say where the launcher is stuck instead of only that it is
        proc.send_signal(signal.SIGABRT)
        _, stderr = proc.communicate(timeout=60)
        pytest.fail(f"{sig.name} did not stop the run within 120 s; its stacks:\n{stderr[-6000:]}")
    assert proc.returncode == code, stderr
    assert ours() == before, f"{name} left behind"
    assert not any(alive(p) for p in pids)
    rec = record_of(out)
    assert rec["status"] == "failed" and rec["error"] == error


def test_killed_run_is_cleaned_up_by_the_next(long_run):
    proc, name, pids, out, before = long_run
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:  # the workers die with the launcher
        time.sleep(0.1)
    left = ours() - before
    assert f"state:{name}.json" in left and f"{name}-br" in left  # SIGKILL: no chance to clean up
    assert name in cleanup_stale()
    assert ours() == before


def test_cleanup_spares_live_networks(can_netns):
    with emulated_network(1, "1gbit") as net:
        assert net.name not in cleanup_stale()
        assert net.bridge_ns in ours() and net.namespace(0) in ours()
    assert net.bridge_ns not in ours()


# -- 4. bad input: exit 2, one line, nothing written --------------------------------------------------------
def bad_input(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("commbench: error: net: "), lines
    return lines[0]


def test_net_needs_root(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    line = bad_input(capsys, [*TINY, "--method", "baseline", "--net", "1gbit", "--out", str(tmp_path / "out")])
    assert "root" in line
    assert not (tmp_path / "out").exists()


def test_net_needs_ip_and_tc(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda cmd: None if cmd == "tc" else f"/usr/sbin/{cmd}")
    line = bad_input(capsys, [*TINY, "--method", "baseline", "--net", "1gbit", "--out", str(tmp_path / "out")])
    assert "tc command" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_net_as_another_user_exits_2(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
                           "commbench", *TINY, "--method", "baseline", "--net", "1gbit", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": "/"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "root" in lines[0], proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("extra, words", [
    (["--backend", "sim", "--net", "1gbit"], ("sim", "dist")),
    (["--net", "1gbps"], ("'1gbps'",)),
    (["--net", "0mbit"], ("'0mbit'",)),
    (["--set", "net=fast"], ("'fast'",)),
])
def test_bad_net_settings(tmp_path, capsys, extra, words):
    line = bad_input(capsys, [*TINY, "--method", "baseline", *extra, "--out", str(tmp_path / "out")])
    assert all(w in line for w in words), line
    assert not (tmp_path / "out").exists()


def test_net_refused_with_slurm(tmp_path, capsys):
    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline, dataset: synthetic, steps: 5}\n"
                    "axes: {net: [1gbit, 100mbit]}\n")
    line = bad_input(capsys, ["sweep", str(grid), "--launcher", "slurm", "--out", str(tmp_path / "out")])
    assert "slurm" in line.lower() and "100mbit" in line
    assert not (tmp_path / "out").exists()


def test_net_is_in_the_run_id_only_when_set():
    from commbench.config import resolve, run_id_of

    base = {"task": "lenet-mnist", "method": "baseline", "workers": 2}
    plain, slow, fast = resolve(base), resolve({**base, "net": "100mbit"}), resolve({**base, "net": "1GBIT"})
    # a run without --net keeps the id it had before the key existed
    assert plain.run_id == run_id_of({k: v for k, v in plain.to_dict().items() if k != "net"})
    assert len({plain.run_id, slow.run_id, fast.run_id}) == 3
    assert fast.net == "1gbit" and fast.run_id == resolve({**base, "net": "1gbit"}).run_id


def test_net_axis_of_a_grid(tmp_path, capsys):
    grid = tmp_path / "g.yaml"
    grid.write_text("base: {task: lenet-mnist, method: baseline, dataset: synthetic, workers: 2, steps: 5}\n"
                    "axes: {net: [1gbit, 100mbit]}\n")
    assert cli.main(["sweep", str(grid), "--dry-run", "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and "net=1gbit" in lines[0] and "net=100mbit" in lines[1]
    assert len({line.split()[0] for line in lines}) == 2
