"""An emulated network for a local dist run (``--net RATE``): one network namespace per process, joined
through a bridge, each link limited to RATE in both directions. Linux only, and it needs root.

For run id 7 and three processes it builds (every name and address lives inside namespaces made here; the
host's own namespace gets no link, address or route)::

    ip netns add cb7-br                                  the bridge's namespace
    ip -n cb7-br link add br0 type bridge mcast_snooping 0   (addrgenmode none, up; lo up)
    ip netns add cb7-0 ; ip netns add cb7-1 ; ...        one per rank (lo up)
    ip -n cb7-br link add v0 type veth peer name eth0 netns cb7-0
    ip -n cb7-br link set v0 master br0 ; ... up         the bridge's end of rank 0's link
    ip -n cb7-0 addr add 10.213.7.1/24 dev eth0 ; ... up rank r: 10.213.7.(r+1)
    tc -n cb7-0  qdisc add dev eth0 root tbf rate RATE burst B latency L   rank 0 -> bridge
    tc -n cb7-br qdisc add dev v0   root tbf rate RATE burst B latency L   bridge -> rank 0

The launcher starts rank r as ``ip netns exec cb7-r python -m commbench.run.worker ...`` (iproute2 execs the command,
so the pid is the worker's) with MASTER_ADDR = 10.213.7.1 and GLOO_SOCKET_IFNAME = eth0 (the host name may
resolve to 127.0.0.1, which inside a namespace is the namespace's own loopback). There is no delay or loss
emulation (netem is not used): only the rate.

Each network is written down in ``/run/commbench-netns/cb<id>.json`` (its namespaces and the pid of the process
that owns it) *before* anything is created. The owner tears it down on the way out (``finally``; SIGTERM is
turned into :class:`Terminated`, a KeyboardInterrupt, so it unwinds like Ctrl-C); a network whose owner died
without that (SIGKILL) is removed by :func:`cleanup_stale`, which every ``--net`` run calls first.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from commbench.config import ConfigError, net_rate_bits
from commbench.launch.owner import alive, start_time, unwind_on_sigterm
from commbench.store.signals import signals_held

STATE_DIR = Path("/run/commbench-netns")
PREFIX = "cb"
BRIDGE = "br0"
IFACE = "eth0"  # a rank's end of its link, inside its namespace
MAX_RANKS = 254  # one /24: 10.213.X.1 .. 10.213.X.254
LATENCY = "100ms"  # tbf queue: how long a packet may wait before being dropped (its queue length at RATE)
CMD_TIMEOUT_S = 20


def require_netns() -> None:
    """Raise ConfigError (exit 2, one line) where an emulated network cannot be built: not root, or no ip/tc."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        raise ConfigError("net: an emulated network (--net) needs root (network namespaces, veth links and tc "
                          "qdiscs need CAP_NET_ADMIN); run as root or drop --net")
    missing = [c for c in ("ip", "tc") if shutil.which(c) is None]
    if missing:
        raise ConfigError(f"net: an emulated network (--net) needs the {' and '.join(missing)} command"
                          f"{'s' if len(missing) > 1 else ''} (iproute2), not found on PATH")


def tbf_burst(rate: str) -> int:
    """tbf's bucket size in bytes. tbf can only send ``burst`` bytes per timer tick, so below rate/HZ it never
    reaches its rate; HZ is 100..1000 (250 is the usual default), so rate/250 (500 kB at 1gbit, 50 kB at
    100mbit). The floor of 32 kB keeps room for a few full frames and small GSO packets at low rates (a
    packet larger than the bucket is split, or dropped if it cannot be)."""
    return max(math.ceil(net_rate_bits(rate) / 8 / 250), 32 * 1024)


def _run(args: list[str], stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=CMD_TIMEOUT_S)
    if check and proc.returncode != 0:
        what = " ".join(args) + (f" <<{stdin.splitlines()[0]!r}..." if stdin else "")
        raise RuntimeError(f"emulated network: {what} failed: {(proc.stderr or proc.stdout).strip()}")
    return proc


@dataclass
class Network:
    """A built network: ``ranks`` namespaces ``cb<id>-<rank>`` and the bridge's ``cb<id>-br``."""

    id: int
    ranks: int
    rate: str
    state_file: Path

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.id}"

    @property
    def bridge_ns(self) -> str:
        return f"{self.name}-br"

    @property
    def interface(self) -> str:
        return IFACE

    def namespace(self, rank: int) -> str:
        return f"{self.name}-{rank}"

    @property
    def all_namespaces(self) -> list[str]:
        """In the order of deletion: the ranks' (deleting one deletes its veth pair), then the bridge's."""
        return [self.namespace(r) for r in range(self.ranks)] + [self.bridge_ns]

    def address(self, rank: int) -> str:
        return f"10.213.{self.id}.{rank + 1}"

    def exec_prefix(self, rank: int) -> list[str]:
        """Put before a command to run it in ``rank``'s namespace (same pid: ip execs it)."""
        return ["ip", "netns", "exec", self.namespace(rank)]

    def interface_bytes(self, rank: int) -> int:
        """tx_bytes + rx_bytes of ``rank``'s end of its link (``eth0`` in its namespace), as the kernel counts
        them: whole Ethernet frames (Ethernet, IP and TCP headers included)."""
        out = _run(["ip", "-n", self.namespace(rank), "-s", "-j", "link", "show", "dev", IFACE]).stdout
        stats = json.loads(out)[0]["stats64"]
        return int(stats["tx"]["bytes"]) + int(stats["rx"]["bytes"])

    def wire_bytes(self, ranks: Iterable[int]) -> int:
        """Sum of :meth:`interface_bytes` over ``ranks``. The record's ``wire_bytes_measured`` is the growth of
        this sum over the worker ranks (parameter servers excluded) from just before the processes start to
        after the last one ended.

        What it counts: every byte the kernel counted on the workers' links, sent or received. Traffic between
        two workers is so counted twice, once sent by one and once received by the other, and traffic between a
        worker and a server once: the same rule as the ledger's ``bytes_sent + bytes_received`` (summed over
        the workers), which is what it compares with. It counts whole Ethernet frames, so it exceeds the
        ledger by the Ethernet, IP and TCP headers, TCP's acknowledgements and retransmissions, the rendezvous
        (the TCPStore) and gloo's connection set-up, and the harness's uncounted control channel; with
        segmentation offload one frame may carry several TCP segments under one set of headers, so the
        headers' share is smaller than on a physical link. A process's traffic with itself (worker 0 with the
        TCPStore it hosts) goes over its own loopback and is not counted. The launcher records None for a run
        resumed from a checkpoint (the ledger counts since step 0, the links only since this attempt began)."""
        return sum(self.interface_bytes(r) for r in ranks)


def _state(net: Network) -> dict:
    return {"id": net.id, "name": net.name, "pid": os.getpid(), "pid_started": start_time(os.getpid()),
            "rate": net.rate, "ranks": net.ranks, "created_at": time.time(), "namespaces": net.all_namespaces}


def _existing_namespaces() -> set[str]:
    out = _run(["ip", "netns", "list"], check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _claim(ranks: int, rate: str) -> Network:
    """Pick a free id (0..255, also the third byte of the subnet) and write its state file, atomically: the
    file is complete when it appears, and two runs cannot take the same id."""
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    taken = _existing_namespaces()
    ids = list(range(256))
    random.shuffle(ids)
    for i in ids:
        net = Network(i, ranks, rate, STATE_DIR / f"{PREFIX}{i}.json")
        if net.state_file.exists() or any(n.startswith(f"{net.name}-") for n in taken):
            continue
        tmp = STATE_DIR / f".{net.name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)  # a stale one, or a planted link: unlink removes the link, not its target
        # a new regular file or nothing: O_EXCL with O_NOFOLLOW writes through no link (the state folder is root's)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(_state(net), indent=1))
        try:
            os.link(tmp, net.state_file)  # fails if another run took this id meanwhile
        except FileExistsError:
            continue
        finally:
            tmp.unlink(missing_ok=True)
        return net
    raise RuntimeError(f"emulated network: no free id in {STATE_DIR} (256 networks exist?)")


def _build(net: Network) -> None:
    burst, rate = tbf_burst(net.rate), net.rate
    tbf = f"root tbf rate {rate} burst {burst} latency {LATENCY}"
    _run(["ip", "-batch", "-"], stdin="".join(f"netns add {ns}\n" for ns in net.all_namespaces[::-1]))
    # The links stay silent when nothing runs, so the byte counters hold the run's traffic only: addrgenmode
    # none (no IPv6 link-local address: no DAD, router solicitations or MLD reports) and mcast_snooping 0 (a
    # snooping bridge joins the all-snoopers groups and sends IGMP/MLD reports to every port). Nothing is
    # routed anywhere: no default route, no link to the host's namespace.
    bridge = [f"link add {BRIDGE} type bridge mcast_snooping 0", f"link set {BRIDGE} addrgenmode none",
              f"link set {BRIDGE} up", "link set lo up"]
    for r in range(net.ranks):
        bridge += [f"link add v{r} type veth peer name {IFACE} netns {net.namespace(r)}",
                   f"link set v{r} addrgenmode none", f"link set v{r} master {BRIDGE}", f"link set v{r} up"]
    _run(["ip", "-n", net.bridge_ns, "-batch", "-"], stdin="\n".join(bridge) + "\n")
    for r in range(net.ranks):
        _run(["ip", "-n", net.namespace(r), "-batch", "-"], stdin="\n".join([
            "link set lo up", f"link set {IFACE} addrgenmode none",
            f"addr add {net.address(r)}/24 dev {IFACE}", f"link set {IFACE} up"]) + "\n")
        _run(["tc", "-n", net.namespace(r), "qdisc", "add", "dev", IFACE, *tbf.split()])  # rank -> bridge
    _run(["tc", "-n", net.bridge_ns, "-batch", "-"],  # bridge -> rank
         stdin="".join(f"qdisc add dev v{r} {tbf}\n" for r in range(net.ranks)))


def _delete(namespaces: Iterable[str]) -> list[str]:
    """Delete the namespaces that exist (a rank's deletes its veth pair); returns those that would not go."""
    present = _existing_namespaces()
    left = []
    for ns in namespaces:
        if ns in present and _run(["ip", "netns", "del", ns], check=False).returncode != 0:
            left.append(ns)
    return left


def teardown(net: Network) -> None:
    """Remove the network's namespaces (the ranks', then the bridge's) and its state file."""
    if not _delete(net.all_namespaces):
        net.state_file.unlink(missing_ok=True)


def cleanup_stale() -> list[str]:
    """Remove the networks whose owning process is gone (killed with SIGKILL, or its machine's power cut).
    Returns the names of the networks removed. Networks of live runs are left alone."""
    removed = []
    if not STATE_DIR.is_dir():
        return removed
    for path in sorted(STATE_DIR.glob(f"{PREFIX}*.json")):
        try:
            state = json.loads(path.read_text())
            pid, started, namespaces = int(state["pid"]), state.get("pid_started"), list(state["namespaces"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not ours to judge
        if alive(pid, started):
            continue
        if not _delete(namespaces):
            path.unlink(missing_ok=True)
            removed.append(path.stem)
    return removed


def _signals_held():
    """SIGINT and SIGTERM wait until the block ends (a second Ctrl-C must not cut the teardown short)."""
    return signals_held({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def emulated_network(ranks: int, rate: str) -> Iterator[Network]:
    """Build a network of ``ranks`` namespaces whose links run at ``rate`` (tc notation: ``1gbit``), yield it,
    and tear it down however the block ends (also on SIGTERM, which raises :class:`Terminated` meanwhile).
    Leftovers of dead runs are removed first (:func:`cleanup_stale`). Root and iproute2 are checked before,
    at the launch room's door (:func:`commbench.launch.preflight.check_machine`)."""
    net_rate_bits(rate)
    if not 1 <= ranks <= MAX_RANKS:
        raise ConfigError(f"net: an emulated network holds 1..{MAX_RANKS} processes, not {ranks}")
    cleanup_stale()
    net = None
    with unwind_on_sigterm():
        try:
            net = _claim(ranks, rate)
            _build(net)
            yield net
        finally:
            if net is not None:
                with _signals_held():
                    teardown(net)
