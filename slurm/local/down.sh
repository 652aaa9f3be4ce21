#!/usr/bin/env bash
# Stop the local Slurm cluster that slurm/local/up.sh started.
#
# Usage:  bash slurm/local/down.sh
#
# Stops exactly the PIDs that up.sh recorded in $COMMBENCH_SLURM_STATE (default /run/commbench-slurm),
# in reverse start order: slurmd, slurmctld, slurmdbd, mariadbd, munged. A PID is signalled only while
# /proc/PID/exe is still the recorded binary (pid reuse); daemons that up.sh found already running are
# not recorded and are left alone. Each one gets SIGTERM, then up to $COMMBENCH_SLURM_STOP_WAIT seconds
# (default 20; a zombie counts as gone), then SIGKILL. The records are removed. No process names, no
# pkill/killall. Jobs still running under slurmstepd are not touched (scancel them first if needed).
# Prints one line per daemon; exits 0 when nothing is recorded (a no-op) and when all recorded daemons are
# gone, 1 if one survived SIGKILL. Must run as root.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
STOP_WAIT=${COMMBENCH_SLURM_STOP_WAIT:-20}
DAEMONS=(slurmd slurmctld slurmdbd mariadbd munged)

case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "down.sh: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac
[[ $EUID -eq 0 ]] || { echo "down.sh: error: must run as root" >&2; exit 1; }
[[ $STOP_WAIT =~ ^[0-9]+$ ]] || { echo "down.sh: error: COMMBENCH_SLURM_STOP_WAIT must be whole seconds" >&2; exit 1; }

if [[ ! -d $STATE_DIR ]] || ! compgen -G "$STATE_DIR/*.pid" >/dev/null; then
  echo "slurm: nothing recorded in $STATE_DIR; nothing to stop"
  exit 0
fi

if [[ -z ${COMMBENCH_SLURM_LOCKED:-} ]]; then
  exec 9>"$STATE_DIR/lock"
  flock -w 120 9 || { echo "down.sh: error: another up.sh/down.sh holds $STATE_DIR/lock" >&2; exit 1; }
fi



# True while PID exists and is not a zombie (whatever it runs): used after we signalled it.
pid_alive() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

# wait_gone PID EXE SECONDS: true once PID is gone, a zombie, or runs something else.
wait_gone() {
  local pid=$1 exe=$2 deadline
  deadline=$(( $(date +%s) + $3 ))
  while pid_runs "$pid" "$exe"; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.1
  done
}

rc=0
for d in "${DAEMONS[@]}"; do
  rec=$STATE_DIR/$d.pid
  [[ -e $rec ]] || continue
  pid=""; read -r pid 2>/dev/null <"$rec" || true
  pid=${pid//[^0-9]/}
  exe=$(cat "$STATE_DIR/$d.exe" 2>/dev/null || true)
  t0=$(now)
  if [[ -z $pid || -z $exe ]]; then
    echo "$d: unreadable record ($rec); nothing signalled"
  elif ! pid_runs "$pid" "$exe"; then
    if pid_alive "$pid"; then
      echo "$d: pid $pid now runs something other than $exe (pid reused); not touched"
    else
      echo "$d: not running (pid $pid gone)"
    fi
  else
    kill -TERM "$pid" 2>/dev/null || true
    if wait_gone "$pid" "$exe" "$STOP_WAIT"; then
      echo "$d: stopped (pid $pid, SIGTERM, $(since "$t0") s)"
    else
      kill -KILL "$pid" 2>/dev/null || true
      if wait_gone "$pid" "$exe" 5; then
        echo "$d: killed (pid $pid, SIGKILL after ${STOP_WAIT} s, $(since "$t0") s)"
      else
        echo "$d: error: pid $pid still alive after SIGKILL; record kept" >&2
        rc=1
        continue
      fi
    fi
  fi
  rm -f "$rec" "$STATE_DIR/$d.exe"
done
# Records of names this script does not know (should not happen) are reported, not acted on.
for rec in "$STATE_DIR"/*.pid; do
  [[ -e $rec ]] && echo "down.sh: warning: unknown record $rec left in place" >&2
done
if ((rc == 0)); then echo "slurm: down"; fi
exit "$rc"
