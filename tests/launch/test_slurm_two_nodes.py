"""The real two-node Slurm cluster of slurm/local/up2.sh: both nodes idle within 5 s, one task in each node's
network namespace, accounting that records a cancel, runs through commbench that span both nodes and compute
what sim computes, a parameter server on the other node, and nothing left after down2.sh.

Needs root (namespaces, links, daemons) and the one-node cluster's packages; skips without them, except under
COMMBENCH_REQUIRE_SLURM=1 (CI), where a cluster that cannot come up fails. CI's .ci/run brings the cluster up
first; these tests use it where it is up (and leave it up), else bring up their own.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ..conftest import REPO

pytestmark = pytest.mark.slurm
STATE = Path(os.environ.get("COMMBENCH_SLURM2_STATE", "/run/commbench-slurm2"))
RATE = "1gbit"  # the links between the nodes while these tests run
ENV = {**os.environ, "COMMBENCH_SLURM2_STATE": str(STATE), "SLURM_CONF": str(STATE / "etc" / "slurm.conf")}
CONF_ENTRY = f"SLURM_CONF={STATE / 'etc' / 'slurm.conf'}".encode()


def unavailable() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    missing = [t for t in ("ip", "nsenter", "unshare", "tc", "slurmctld", "slurmd", "sinfo")
               if not shutil.which(t) and not Path(f"/usr/sbin/{t}").exists()]
    return f"{', '.join(missing)} not installed" if missing else None


def script(name: str, *args: str, wait_s: int = 5) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(REPO / "slurm" / "local" / name), *args], capture_output=True, text=True,
                          timeout=180, env={**ENV, "COMMBENCH_SLURM_WAIT": str(wait_s)})


def ours() -> set[str]:
    """What of the two-node cluster exists: its namespaces, links and slurmd daemons."""
    found = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    found = {n for n in found if n.startswith("cb2n")}
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found |= {w.split("@")[0] for w in links.replace(":", " ").split() if w.startswith(("cb2br", "cb2v"))}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd[0].endswith(b"slurmd") and _stat(pid) != "Z" and b"-N" in cmd and cmd[-1] in (b"node1", b"node2", b"node1\n"):
                found.add(f"slurmd {pid}")
            # its controller by the configuration it runs: up2.sh starts the one-node cluster's (for munged and
            # slurmdbd) from its own environment too, without SLURM_CONF
            elif cmd[0].endswith(b"slurmctld") and _stat(pid) != "Z" and CONF_ENTRY in _environ(pid).split(b"\0"):
                found.add(f"slurmctld {pid}")
    return found


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def _stat(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


@pytest.fixture(scope="module")
def cluster():
    reason = unavailable()
    if reason:
        if os.environ.get("COMMBENCH_REQUIRE_SLURM") == "1":
            pytest.fail(f"COMMBENCH_REQUIRE_SLURM=1 but the two-node cluster {reason}", pytrace=False)
        pytest.skip(f"the two-node cluster {reason}")
    was_up = (STATE / "up").is_file()
    script("down2.sh")  # a clean start: the test times the bring-up (and clears a previous session's leftovers)
    up = script("up2.sh", "--rate", RATE)  # COMMBENCH_SLURM_WAIT=5: both nodes idle within 5 s, or it fails
    assert up.returncode == 0, up.stderr + up.stdout
    yield up.stdout
    script("down2.sh")
    if was_up:  # as it was found (CI's, or a developer's): up, links unlimited
        assert script("up2.sh", wait_s=30).returncode == 0


def slurm(*args: str) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=120, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_both_nodes_are_idle_and_a_step_puts_one_task_in_each(cluster):
    assert "slurm2: up (node1 node2 idle" in cluster
    assert slurm("sinfo", "-h", "-N", "-o", "%N %t").split() == ["node1", "idle", "node2", "idle"]
    lines = slurm("srun", "-N2", "-n2", "--label", "bash", "-c",
                  "echo $(hostname) $(ip -4 -br addr show eth0 | awk '{print $3}') $(readlink /proc/self/ns/net)")
    tasks = dict(line.split(": ", 1) for line in lines.strip().splitlines())
    (host0, addr0, ns0), (host1, addr1, ns1) = tasks["0"].split(), tasks["1"].split()
    assert (host0, addr0, host1, addr1) == ("node1", "10.215.9.1/24", "node2", "10.215.9.2/24")
    assert ns0 != ns1 != os.readlink("/proc/self/ns/net")  # each task in its node's own network


def test_the_links_between_nodes_are_limited_both_ways(cluster):
    """--rate puts tc tbf on each node's link: the bridge side shapes what the node receives, eth0 inside the
    node's namespace what it sends."""
    for i in (1, 2):
        into = subprocess.run(["tc", "qdisc", "show", "dev", f"cb2v{i}"], capture_output=True, text=True).stdout
        out = subprocess.run(["tc", "-n", f"cb2n{i}", "qdisc", "show", "dev", "eth0"], capture_output=True,
                             text=True).stdout
        assert "tbf" in into and "rate 1Gbit" in into, into
        assert "tbf" in out and "rate 1Gbit" in out, out


def test_accounting_records_a_cancelled_two_node_job(cluster):
    job = slurm("sbatch", "--parsable", "-N2", "--output", "/dev/null", "--wrap", "srun sleep 120").strip()
    deadline = time.monotonic() + 30
    while "R" not in slurm("squeue", "-h", "-j", job, "-o", "%t") and time.monotonic() < deadline:
        time.sleep(0.2)
    slurm("scancel", job)
    state = ""
    while time.monotonic() < deadline and not state.startswith("CANCELLED"):
        time.sleep(0.2)
        state = slurm("sacct", "-n", "-X", "-j", job, "-o", "State%30").strip()
    assert state.startswith("CANCELLED"), state


def sweep(tmp_path: Path, grid: str, launcher: str = "slurm", succeeds: bool = True) -> list[dict]:
    """``commbench sweep`` of a grid through the local-2node profile (or locally); the records it made."""
    profile = tmp_path / "two.yaml"
    profile.write_text((REPO / "slurm" / "profiles" / "local-2node.yaml").read_text()
                       .replace("/run/commbench-slurm2/", f"{STATE}/"))
    (tmp_path / "grid.yaml").write_text(grid)
    out = tmp_path / f"out-{launcher}"
    env = {k: v for k, v in ENV.items() if k != "SLURM_CONF"}  # the profile names the cluster
    proc = subprocess.run([sys.executable, "-m", "commbench", "sweep", str(tmp_path / "grid.yaml"), "--launcher",
                           launcher, *(["--profile", str(profile), "--wait"] if launcher == "slurm" else []),
                           "--results", str(out), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert (proc.returncode == 0) == succeeds, proc.stderr[-2000:]
    return sorted((json.loads(p.read_text()) for p in (out / "runs").glob("*.json")),
                  key=lambda r: r["config"]["method"])


def test_baseline_and_terngrad_span_both_nodes_and_compute_what_sim_computes(cluster, tmp_path):
    """Through commbench, submitit and srun, one task per node: each record lists both hosts, the links were
    checked at the rate the run asks for (node_link), and the final weights (their digest) and the byte counts
    equal those of the same configuration in sim, in one process."""
    grid = ("name: two-nodes\nbase: {task: lenet-mnist, dataset: synthetic, workers: 2, backend: dist, steps: 5, "
            f"global_batch: 16, node_link: {RATE}}}\naxes: {{method: [baseline, terngrad]}}\n")
    records = sweep(tmp_path, grid)
    sims = sweep(tmp_path, grid.replace(f", node_link: {RATE}", "").replace("backend: dist", "backend: sim"),
                 launcher="local")
    assert [r["config"]["method"] for r in records] == [r["config"]["method"] for r in sims] == ["baseline", "terngrad"]
    for record, sim in zip(records, sims):
        assert record["status"] == sim["status"] == "done"
        assert record["env"]["nodes"] == ["node1", "node2"] and record["env"]["hostname"] == "node1"
        assert record["env"]["world_size"] == 2 and record["config"]["node_link"] == RATE
        for key in ("final_weights", "bytes_sent", "bytes_received", "final_train_loss"):
            assert record["metrics"][key] == sim["metrics"][key], (record["config"]["method"], key)


def test_a_run_on_links_other_than_it_asks_for_fails_naming_them(cluster, tmp_path):
    grid = ("name: two-nodes-wrong-link\nbase: {task: lenet-mnist, dataset: synthetic, method: baseline, "
            "workers: 2, backend: dist, steps: 5, global_batch: 16, node_link: 100mbit}\naxes: {seed: [1]}\n")
    (record,) = sweep(tmp_path, grid, succeeds=False)
    assert record["status"] == "failed"
    assert "node_link: the run asks for links of 100mbit, but node" in record["error"]
    assert "eth0 at 1000 Mbit/s" in record["error"], record["error"]


def test_ssdsgd_parameter_server_sits_on_the_other_node(cluster, tmp_path):
    """SSD-SGD, 2 workers + 1 server, 2 tasks per node: Slurm's block distribution puts ranks 0-1 (the workers)
    on node1 and rank 2 (the server) on node2, so every push and pull crosses the link."""
    grid = ("name: two-nodes-ps\nbase: {task: lenet-mnist, dataset: synthetic, method: ssdsgd, workers: 2, "
            "backend: dist, steps: 6, global_batch: 16}\naxes: {seed: [1]}\nslurm: {tasks_per_node: 2}\n")
    (record,) = sweep(tmp_path, grid)
    env, m = record["env"], record["metrics"]
    assert record["status"] == "done" and env["parameter_servers"] == 1
    assert env["nodes"] == ["node1", "node2"] and env["slurm_tasks_per_node"] == "2,1"
    assert m["server_bytes_sent"] > 0 and m["server_bytes_received"] == m["bytes_sent"] > 0


def test_down_leaves_no_namespace_link_or_daemon(cluster):
    assert ours(), "the cluster is up: its namespaces, links and daemons exist"
    down = script("down2.sh")
    assert down.returncode == 0, down.stderr
    deadline = time.monotonic() + 10  # daemons stopped by SIGTERM leave /proc a moment later
    while ours() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ours() == set()
