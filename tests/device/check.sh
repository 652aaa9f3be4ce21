#!/usr/bin/env bash
# The prepared check for a lent GPU machine (the workplace's device tool runs it in a copy of the working tree):
#   1. the CUDA tests (every zoo compressor and TernGrad on CUDA tensors against the CPU, checkpoints crossing
#      between the devices);
#   2. every method's CUDA path: bench/grids/zoo/zoo-cuda.yaml, 30 steps, 4 simulated workers on the GPU, each run
#      must end done;
#   3. until DEADLINE seconds after the start, the zoo campaign's runs that the CPU lanes reach last (the milder and
#      harsher settings, then seed 3), in LANES lanes; at the deadline the lanes are stopped as make campaign-stop
#      does (each run checkpoints and says interrupted), so that the CPU lanes resume them.
# Everything it writes lands in $OUT: check.log, the lanes' logs, the CUDA path's records and the campaign's records
# and checkpoints as tarballs in 15 MiB parts (cat zoo.tar.gz.* | tar xz -C results/zoo). Needs the data mirror carried at .devrun/data.
# A rehearsal on a CPU machine: REHEARSE=1 INSTALL=0 DEADLINE=100 LANES=1 (the CUDA path's runs on the CPU, 2 steps);
# PHASES=13 runs the first and the third only.
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
DEADLINE=${DEADLINE:-330}; LANES=${LANES:-6}; START=$(date +%s)
LANELOGS=/tmp/check-lanes; rm -rf "$LANELOGS"; mkdir -p "$LANELOGS"  # $OUT takes 8 files at most: they travel as one tarball
say() { echo "[$(( $(date +%s) - START ))s] $*"; }

setup() {
export PYTHONUNBUFFERED=1 COMMBENCH_DATA_MIRROR=$PWD/.devrun/data
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc
if [ "${INSTALL:-1}" = 1 ]; then  # INSTALL=0: commbench is installed already (a rehearsal on a CPU machine)
  python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >/dev/null 2>&1 \
    || { say "commbench did not install"; exit 1; }
fi
say "installed: $(python3 -c 'import sys, torch, commbench; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available())')"
say "at commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with changes)')"
python3 -m commbench data cifar10-jpeg mnist

}

cuda_tests() {
say "== 1. the CUDA tests"
python3 -m pytest -q -p no:cacheprovider -n 4 -rs tests/methods/zoo/test_on_the_gpu.py \
  tests/methods/test_compression_methods.py tests/run/test_checkpoint.py -k "gpu or kind_of_device" 2>&1 | tail -25

}

cuda_paths() {
say "== 2. every method's CUDA path (30 steps, 4 simulated workers)"
for lane in 1 2 3 4 5 6; do
  python3 -m commbench sweep bench/grids/zoo/zoo-cuda.yaml --out "$OUT/zoo-cuda" --quiet ${REHEARSE:+--set device=cpu --set steps=2} > "$LANELOGS/cuda-lane$lane.txt" 2>&1 &
  sleep 2
done; wait
python3 -m commbench status --out "$OUT/zoo-cuda" --grid bench/grids/zoo/zoo-cuda.yaml --summary
python3 - "$OUT/zoo-cuda" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1], "runs").glob("*.json")):
    r = json.loads(path.read_text()); c = r["config"]
    extra = " ".join(f"{k}={v}" for k, v in c.get("method_params", {}).items() if k in ("memory", "scaled", "coding", "format"))
    print(f'{r["status"]:12} {c["method"]:17} {extra:28} {r["env"].get("gpu_name") or r["env"].get("device")} top1 {r["metrics"]["top1"]} {(r.get("error") or "")[:200]}')
PY
rm -rf "$OUT/zoo-cuda/logs" "$OUT/zoo-cuda/claims"; tar czf "$OUT/zoo-cuda.tar.gz" -C "$OUT" zoo-cuda && rm -rf "$OUT/zoo-cuda"

}

zoo_runs() {
say "== 3. the zoo campaign's last runs until ${DEADLINE}s, $LANES lanes"
STOP=/tmp/check-stop-lanes; rm -f "$STOP"
ZOO=/tmp/check-zoo  # its own folder: the checkout's results/zoo holds the CPU lanes' work, which must not come back stale
for lane in $(seq "$LANES"); do
  (for part in "zoo-resnet20-settings.yaml" "zoo-resnet20.yaml --only seed=3"; do
     [ -e "$STOP" ] || python3 -m commbench sweep bench/grids/zoo/$part --out "$ZOO" --quiet
   done) > "$LANELOGS/zoo-lane$lane.txt" 2>&1 &
  sleep 3
done
while [ $(( $(date +%s) - START )) -lt "$DEADLINE" ] && pgrep -f "commbench sweep bench/grids/zoo/.* --out $ZOO" >/dev/null; do sleep 10; done
touch "$STOP"; say "stopping the lanes"  # a lane between its two sweeps starts no other
signalled=" "  # each sweep once: it passes the signal to its run, which checkpoints and stops
while pids=$(pgrep -f "commbench sweep bench/grids/zoo/.* --out $ZOO"); do  # its own lanes only
  for pid in $pids; do [[ $signalled == *" $pid "* ]] || { kill -USR1 "$pid"; signalled+="$pid "; }; done; sleep 5
done; wait
python3 -m commbench status --out "$ZOO" --summary --grid bench/grids/zoo/zoo-resnet20-settings.yaml \
  --grid bench/grids/zoo/zoo-resnet20.yaml
tar czf "$OUT/zoo.tar.gz" -C "$ZOO" runs checkpoints 2>/dev/null
split -b 15M "$OUT/zoo.tar.gz" "$OUT/zoo.tar.gz." && rm "$OUT/zoo.tar.gz"; ls -la "$OUT"
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader 2>/dev/null
}

check() {
  setup
  [[ ${PHASES:-123} == *1* ]] && cuda_tests
  [[ ${PHASES:-123} == *2* ]] && cuda_paths
  [[ ${PHASES:-123} == *3* ]] && zoo_runs
  tar czf "$OUT/lanes.tar.gz" -C "$(dirname "$LANELOGS")" "$(basename "$LANELOGS")"
  say "done"
}

check 2>&1 | tee "$OUT/check.log"
