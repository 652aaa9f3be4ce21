#!/usr/bin/env bash
# Bring up a real two-node Slurm cluster on this machine, beside the one-node cluster of up.sh.
#
# Usage:  bash slurm/local/up2.sh [--rate RATE]
#
# One slurmctld (cluster cb2, ports 6917/6918) in the root network namespace; one slurmd per node (node1,
# node2), each in its own network, UTS and mount namespace, joined by veth pairs through a bridge (cb2br,
# 10.215.9.0/24). The nodes see the whole filesystem (the project and its venv) but their own host names and
# a hosts file that names every node. Accounting and authentication are the one-node cluster's: its munged
# (whose socket every namespace reaches) and its slurmdbd, where cb2 is a second cluster; up.sh is run first
# (idempotent), so cancelled and timed-out jobs have real states in sacct.
#   --rate RATE  limit each node's link to RATE (tc tbf, both directions: 100mbit, 1gbit): the slow link
#                between nodes of the papers' clusters. Default: unlimited. On a cluster that is already up,
#                changes the links to RATE (none: unlimited) and leaves everything else as it is.
#   -h, --help   Print this header.
#
# Every daemon, namespace and link it makes is recorded in $COMMBENCH_SLURM2_STATE (default
# /run/commbench-slurm2); down2.sh removes exactly those. Clients use the cluster with
#   SLURM_CONF=$COMMBENCH_SLURM2_STATE/etc/slurm.conf sinfo
# Output: one line per step and a last line "slurm2: up (node1, node2 idle, link RATE)". Exit status: 0 up,
# 1 on a failure (the daemon's log tail on stderr), 2 on bad usage. Must run as root. Takes about a second.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STATE2=${COMMBENCH_SLURM2_STATE:-/run/commbench-slurm2}
WAIT_S=${COMMBENCH_SLURM_WAIT:-30}
NET=10.215.9
NODES=(node1 node2)
RATE=""

die() { echo "up2.sh: error: $*" >&2; exit 1; }
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

while (($#)); do
  case "$1" in
    --rate) RATE=${2:-}; shift 2 || { echo "up2.sh: --rate needs a value" >&2; exit 2; } ;;
    -h|--help) usage; exit 0 ;;
    *) echo "up2.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
  esac
done
[[ -z $RATE || $RATE == none || $RATE =~ ^[0-9]+(\.[0-9]+)?(kbit|mbit|gbit)$ ]] || { echo "up2.sh: --rate $RATE: expected e.g. 100mbit" >&2; exit 2; }
[[ $EUID -eq 0 ]] || die "must run as root"
for tool in ip nsenter unshare tc; do command -v "$tool" >/dev/null || die "$tool not found (iproute2, util-linux)"; done

t_start=$(now)
# the one-node cluster's munged and slurmdbd: authentication and accounting for this cluster too
env -u SLURM_CONF COMMBENCH_SLURM_LOCKED="" bash "$HERE/up.sh" >/dev/null ||
  die "up.sh failed (the one-node cluster provides munged and slurmdbd)"

mkdir -p "$STATE2"
exec 8>"$STATE2/lock"
flock -w 60 8 || die "another up2.sh/down2.sh holds $STATE2/lock"
# Both directions of node i's link: the root side shapes what the node receives, eth0 what it sends.
shape() {
  local i=$1 burst
  tc qdisc del dev "cb2v$i" root 2>/dev/null || true
  tc -n "cb2n$i" qdisc del dev eth0 root 2>/dev/null || true
  [[ -n $RATE && $RATE != none ]] || return 0
  burst=$(awk -v r="$RATE" 'BEGIN { n = r + 0; u = (r ~ /gbit/) ? 1e9 : (r ~ /mbit/) ? 1e6 : 1e3;
                                    b = n * u / 8 / 100; print (b < 16384) ? 16384 : int(b) }')
  tc qdisc add dev "cb2v$i" root tbf rate "$RATE" burst "$burst" latency 50ms
  tc -n "cb2n$i" qdisc add dev eth0 root tbf rate "$RATE" burst "$burst" latency 50ms
}
if [[ -f $STATE2/up ]]; then
  if [[ -n $RATE ]]; then
    for i in "${!NODES[@]}"; do shape $((i + 1)); done
    echo "slurm2: already up; links now ${RATE/none/unlimited}"; exit 0
  fi
  echo "slurm2: already up (bash slurm/local/down2.sh first)"; exit 0
fi
rm -rf "$STATE2"/{etc,spool,log,run,bin}
mkdir -p "$STATE2"/{etc,spool/ctld,log,run,bin} "${NODES[@]/#/$STATE2/spool/d/}"
record() { echo "$1" >>"$STATE2/made"; }   # what down2.sh undoes, in order of making

# --- the network: a bridge, one namespace and veth pair per node ---------------------------------------------
ip link add cb2br type bridge && record "link cb2br"
ip addr add "$NET.254/24" dev cb2br
ip link set cb2br up
i=0
for node in "${NODES[@]}"; do
  i=$((i + 1))
  ip netns add "cb2n$i" && record "netns cb2n$i"
  ip link add "cb2v$i" type veth peer name eth0 netns "cb2n$i"
  ip link set "cb2v$i" master cb2br up
  ip -n "cb2n$i" addr add "$NET.$i/24" dev eth0
  ip -n "cb2n$i" link set eth0 up
  ip -n "cb2n$i" link set lo up
  shape "$i"
done
echo "network: cb2br $NET.254/24, ${NODES[*]} in netns cb2n1..cb2n${#NODES[@]}${RATE:+, links at ${RATE/none/unlimited}}"

# --- configuration -----------------------------------------------------------------------------------------
HOST=$(hostname -s)
{
  echo "127.0.0.1 localhost"
  echo "$NET.254 $HOST ctl"
  i=0; for node in "${NODES[@]}"; do i=$((i + 1)); echo "$NET.$i $node"; done
} >"$STATE2/etc/hosts"
cat >"$STATE2/etc/slurm.conf" <<EOF
# Generated by commbench slurm/local/up2.sh: two nodes in network namespaces (docs/slurm.md)
ClusterName=cb2
SlurmctldHost=$HOST($NET.254)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=cred_expire=10
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
StateSaveLocation=$STATE2/spool/ctld
SlurmdSpoolDir=$STATE2/spool/d/%n
SlurmctldPidFile=$STATE2/run/slurmctld.pid
SlurmdPidFile=$STATE2/run/slurmd.%n.pid
SlurmctldPort=6917
SlurmdPort=6918
SlurmctldLogFile=$STATE2/log/slurmctld.log
SlurmdLogFile=$STATE2/log/slurmd.%n.log
$(slurm_conf_shared)
EOF
i=0
for node in "${NODES[@]}"; do
  i=$((i + 1))
  echo "NodeName=$node NodeAddr=$NET.$i NodeHostname=$node CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=4000 State=UNKNOWN" >>"$STATE2/etc/slurm.conf"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >>"$STATE2/etc/slurm.conf"
export SLURM_CONF=$STATE2/etc/slurm.conf
# the cluster in the accounting database (once; its jobs and states live there)
sacctmgr -i -n list cluster format=cluster 2>/dev/null | grep -qw cb2 || sacctmgr -i add cluster cb2 >/dev/null

# --- daemons -------------------------------------------------------------------------------------------------
wait_for() {  # SECONDS CMD...: poll until CMD succeeds
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.05
  done
}
fail() { echo "up2.sh: error: $1 did not start; its log:" >&2; tail -n 15 "$2" >&2 || true; exit 1; }

/usr/sbin/slurmctld
wait_for "$WAIT_S" test -s "$STATE2/run/slurmctld.pid" || fail slurmctld "$STATE2/log/slurmctld.log"
# recorded with the binary it runs (the alternatives' target, e.g. slurmctld-wlm): down2.sh checks both
pid=$(read_pid "$STATE2/run/slurmctld.pid"); echo "$pid $(readlink "/proc/$pid/exe")" >"$STATE2/pids"
wait_for "$WAIT_S" scontrol ping || fail slurmctld "$STATE2/log/slurmctld.log"

# Each slurmd in its node's namespaces. nsenter --net (not `ip netns exec`, which remounts /sys and hides the
# cgroup mounts slurmd needs); a private mount namespace for the hosts file, a private UTS one for the name.
cat >"$STATE2/bin/start_slurmd.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
mount --bind "$2" /etc/hosts
hostname "$1"
exec /usr/sbin/slurmd -N "$1"
EOF
chmod +x "$STATE2/bin/start_slurmd.sh"
i=0
for node in "${NODES[@]}"; do
  i=$((i + 1))
  nsenter --net="/run/netns/cb2n$i" unshare --uts --mount --propagation private \
    "$STATE2/bin/start_slurmd.sh" "$node" "$STATE2/etc/hosts"
  wait_for "$WAIT_S" test -s "$STATE2/run/slurmd.$node.pid" || fail "slurmd $node" "$STATE2/log/slurmd.$node.log"
  pid=$(read_pid "$STATE2/run/slurmd.$node.pid"); echo "$pid $(readlink "/proc/$pid/exe")" >>"$STATE2/pids"
done
idle() { [[ $(sinfo -h -N -t idle -o %N | sort -u | wc -l) -eq ${#NODES[@]} ]]; }
wait_for "$WAIT_S" idle || fail "the nodes (not idle)" "$STATE2/log/slurmctld.log"
touch "$STATE2/up"
echo "slurm2: up (${NODES[*]} idle, link $([[ -z $RATE || $RATE == none ]] && echo unlimited || echo "$RATE")) in $(since "$t_start") s; SLURM_CONF=$SLURM_CONF"
