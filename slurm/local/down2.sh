#!/usr/bin/env bash
# Stop the two-node cluster of up2.sh: cancel its jobs, stop exactly the daemons it started (recorded pids,
# each checked against its binary), delete its namespaces and bridge, and wait until the kernel has removed
# the veth links. The one-node cluster (and its munged and slurmdbd) is left alone.
#
# Usage:  bash slurm/local/down2.sh
# Exit status: 0 when nothing of the cluster is left, 1 otherwise. Must run as root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STATE2=${COMMBENCH_SLURM2_STATE:-/run/commbench-slurm2}
[[ $EUID -eq 0 ]] || { echo "down2.sh: error: must run as root" >&2; exit 1; }
[[ -d $STATE2 ]] || { echo "slurm2: not up"; exit 0; }
exec 8>"$STATE2/lock"
flock -w 60 8 || { echo "down2.sh: error: another up2.sh/down2.sh holds $STATE2/lock" >&2; exit 1; }
t_start=$(now)

if [[ -f $STATE2/etc/slurm.conf && -f $STATE2/pids ]]; then
  SLURM_CONF=$STATE2/etc/slurm.conf timeout 10 scancel --cluster=cb2 --user=root >/dev/null 2>&1 || true
fi
# the slurmd's first (their job steps die with them), then slurmctld
if [[ -f $STATE2/pids ]]; then
  mapfile -t lines < <(tac "$STATE2/pids")
  for line in "${lines[@]}"; do
    read -r pid exe <<<"$line"
    pid_runs "$pid" "$exe" && kill -TERM "$pid" 2>/dev/null || true
  done
  deadline=$(( $(date +%s) + 15 ))
  for line in "${lines[@]}"; do
    read -r pid exe <<<"$line"
    while pid_runs "$pid" "$exe"; do
      if (( $(date +%s) >= deadline )); then kill -KILL "$pid" 2>/dev/null || true; break; fi
      sleep 0.05
    done
  done
fi
# job processes left in the nodes' namespaces (a step the slurmd could not reap)
for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^cb2n[0-9]+$/ {print $1}'); do
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
done
# what up2.sh made, newest first
if [[ -f $STATE2/made ]]; then
  mapfile -t made < <(tac "$STATE2/made")
  for item in "${made[@]}"; do
    read -r kind name <<<"$item"
    case "$kind" in
      netns) ip netns del "$name" 2>/dev/null || true ;;
      link) ip link del "$name" 2>/dev/null || true ;;
    esac
  done
fi
deadline=$(( $(date +%s) + 10 ))
while ip -o link show 2>/dev/null | grep -qE ': cb2(v[0-9]+|br)[@:]'; do  # netns clean-up is asynchronous
  (( $(date +%s) < deadline )) || { echo "down2.sh: error: links left: $(ip -o link show | grep -oE 'cb2[a-z0-9]+' | sort -u | tr '\n' ' ')" >&2; exit 1; }
  sleep 0.05
done
rm -f "$STATE2/up" "$STATE2/pids" "$STATE2/made"
echo "slurm2: down in $(since "$t_start") s"
