# Helpers shared by up.sh and down.sh (sourced, not run).
# shellcheck shell=bash

# shellcheck disable=SC2034  # read by the scripts that source this file
STATE_DIR=${COMMBENCH_SLURM_STATE:-/run/commbench-slurm}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# True when PID is a live (not zombie) process running binary EXE. /run outlives the machine's processes,
# so a recorded pid is trusted only if its /proc entry still runs the binary that was recorded.
pid_runs() {
  local pid=$1 exe=$2 cur stat
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  cur=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
  [[ ${cur% (deleted)} == "$exe" ]] || return 1
  read -r stat 2>/dev/null <"/proc/$pid/stat" || return 1
  stat=${stat##*) }
  [[ ${stat%% *} != Z ]]
}

read_pid() { local pid=""; if [[ -r $1 ]]; then read -r pid 2>/dev/null <"$1" || true; fi; echo "${pid//[^0-9]/}"; }

# slurm.conf lines both local clusters share (up.sh, up2.sh): logging, accounting in the one slurmdbd (the
# one-node cluster's, on localhost), and the timeouts
slurm_conf_shared() {
  cat <<'EOF'
SlurmctldDebug=info
SlurmdDebug=info
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
SlurmctldTimeout=120
SlurmdTimeout=300
EOF
}
