# The two set-up commands: `make run` (smoke sweep + table) and `make test` (the test suite).
# Both bootstrap .venv from nothing and provision the offline data (Fashion-MNIST from Debian).
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
FASHION = /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
SUDO    = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test test-slow test-all bench report campaign campaign-status campaign-stop campaign-net campaign-2node zoo-net data clean

# The checkout is installed in setuptools' default ("lenient") editable mode: an import hook in the venv
# (__editable___commbench_*_finder.py) maps each of commbench's packages to its folder (bench/layout.py), so a
# module, subpackage, grid or table added under bench/, methods/ or tasks/ is there at once, with no reinstall
# (tests/test_editable_install.py). What it trades: type checkers and editors do not run import hooks, so they
# resolve `commbench.*` only if told the mapping themselves (no extra path does it: bench/ is `commbench`, methods/
# `commbench.methods`); strict mode's link tree under build/, which they follow, knew only the files there were at
# install, and a module added since did not import until the next make. A reinstall is due only when the install's
# own declaration changes (pyproject.toml, setup.py, bench/layout.py), and for a venv installed another way (the
# strict link tree, before issue 71): the stamp names the mode, and a stamp that names another is removed here.
EDITABLE = lenient
$(shell grep -qsx 'editable=$(EDITABLE)' $(STAMP) || rm -f $(STAMP))
$(STAMP): pyproject.toml setup.py bench/layout.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]' --config-settings editable_mode=$(EDITABLE)
	echo 'editable=$(EDITABLE)' > $@

# Real data sets on machines without internet: a local mirror beside the checkout (../shared/data) where there
# is one. The package itself knows no such path: it reads COMMBENCH_DATA_MIRROR (docs: tasks/data/mirror.py).
export COMMBENCH_DATA_MIRROR ?= $(abspath $(wildcard ../shared/data))

# Fashion-MNIST, the offline stand-in for MNIST, ships as Debian's dataset-fashion-mnist.
$(FASHION):
	$(SUDO) apt-get install -y -q dataset-fashion-mnist || \
	  ($(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q dataset-fashion-mnist)

# MNIST (MD5-verified), Fashion-MNIST, CIFAR-10 and cifar10-jpeg into data/, where they can be had; says which
data: $(STAMP) $(FASHION)
	$(VENV)/bin/commbench data

# The smoke sweep on real MNIST where it can be provisioned, else on Fashion-MNIST (labelled as the stand-in), into
# local-results/ (git-ignored): results/ holds only the records the project commits
SMOKE = local-results/smoke
run: $(STAMP) $(FASHION)
	@if $(VENV)/bin/commbench data mnist --quiet; then ds=mnist; \
	  echo "make run: real MNIST (MD5-verified) in data/"; \
	else ds=fashion-mnist; \
	  echo "make run: MNIST cannot be provisioned here (no mirror, and its download failed: commbench data mnist says why):" \
	       "Fashion-MNIST stands in, and every record and table row says so"; fi; \
	$(VENV)/bin/commbench sweep bench/grids/smoke.yaml --set dataset=$$ds --out $(SMOKE) && \
	$(VENV)/bin/commbench table --results $(SMOKE)

# Two pytest processes, each taking whole test files (--dist loadfile: a module's fixtures and order stay as
# written): on 2 cores one file's process starts, rendezvous and waits overlap another's compute (a sample of 8
# files: 434 s in one process, 298 s in two). TEST_JOBS=1 runs it in one process. The benchmarks are deselected
# here; --benchmark-disable says so to pytest-benchmark, which would otherwise warn about running under xdist.
TEST_JOBS ?= 2
test: $(STAMP) $(FASHION)
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile --benchmark-disable --durations=10

# The slow tier: the same properties as the fast one at further settings (another worker count, another
# topology, the other ImageNet models), each an extra multi-process or large-model run.
test-slow: $(STAMP) $(FASHION)
	$(PY) -m pytest -q -m slow

test-all: $(STAMP) $(FASHION)
	$(PY) -m pytest -q -m ''

# every table and figure, regenerated from the committed records (results/report/report.md and .html)
report: $(STAMP)
	$(VENV)/bin/commbench report --results results --out results/report
	$(VENV)/bin/commbench table --paper all --results results --out results/report/paper-tables.md

# The reproduction campaign: bench/grids/campaign/*.yaml, records in results/campaign/. Hours of CPU time; it
# is resumable (done runs are skipped), so stop it at will and run it again. `commbench status --out
# results/campaign --grid GRID` says what is left of a grid. The emulated-network grid needs root: campaign-net.
# CAMPAIGN_LANES sweeps go through the grids side by side, each taking the next run no other lane holds
# (results/campaign/claims/): a simulated run of 2 or more workers computes on one thread of this 2-core
# machine, so two lanes keep both cores busy. The grids' images/s are not speeds (campaign-net measures those).
# the third pass (issue 39) first, in its order of importance: SSD-SGD Table 2 and GRACE's ResNet-20 at half their
# schedules, then the paper-rule diagnostic; the earlier grids after them, and last the grids whose records are
# of an older method version and whose rows read untestable or missing either way (terngrad-fig3*, and
# ssdsgd-table2, ResNet-20 at 2,000 steps, which ssdsgd-table2-half supersedes)
CAMPAIGN = ssdsgd-table2-half grace-resnet20 ssdsgd-table2-paper-rule precision-equivalence terngrad-table1 ssdsgd-fig4-fig5 ssdsgd-table2-lenet threshold-shares threshold-tables terngrad-table2 model-sizes terngrad-fig3 terngrad-fig3-seed2 terngrad-fig3-wide ssdsgd-table2
# the zoo (issue 73): the field's compressors, records in results/zoo/, before what is left of the papers' grids
# (their last four, of older method versions, whose rows read untestable either way):
# ResNet-20 at the compressors' defaults first (seed 1 of every method before any seed 2), then their milder and
# harsher settings, then the LeNet tier. Its emulated-network validation needs root: zoo-net.
ZOO = zoo-resnet20 zoo-resnet20-settings zoo-lenet
CAMPAIGN_LANES ?= 2
campaign: $(STAMP) $(FASHION)
	for lane in $$(seq $(CAMPAIGN_LANES)); do \
	  (for g in $(ZOO); do $(VENV)/bin/commbench sweep bench/grids/zoo/$$g.yaml --out results/zoo; \
	     rc=$$?; [ $$rc -le 1 ] || exit $$rc; done; \
	   for g in $(CAMPAIGN); do $(VENV)/bin/commbench sweep bench/grids/campaign/$$g.yaml --out results/campaign; \
	     rc=$$?; [ $$rc -le 1 ] || exit $$rc; done) & \
	  sleep 5; \
	done; wait

# stop the campaign where it is: each lane's run saves a checkpoint, its record says interrupted, and the lane
# stops (a lane goes on to the next grid only after a sweep that ended with its runs done or failed);
# make campaign resumes each run from its checkpoint. To resume in a fresh checkout, commit
# results/campaign/checkpoints/ (docs/checkpoints.md, "A campaign across sessions")
campaign-stop:
	pkill -USR1 -f 'python[0-9.]* [^ ]*commbench sweep bench/grids/(campaign|zoo)/' || echo "no campaign sweep is running"

# what is left of each campaign grid, and its estimated training time (the runs themselves: commbench status)
campaign-status: $(STAMP)
	@$(VENV)/bin/commbench status --out results/campaign --summary $(foreach g,$(CAMPAIGN),--grid bench/grids/campaign/$(g).yaml)
	@mkdir -p results/zoo && $(VENV)/bin/commbench status --out results/zoo --summary $(foreach g,$(ZOO) zoo-network,--grid bench/grids/zoo/$(g).yaml)

# the time-to-accuracy grid first (issue 38), then the papers' speed grids; each run alone on the machine
campaign-net: $(STAMP)
	for g in network-tta network-fig5 network-fig5-ps network-ssdsgd network-ssdsgd-mxnet; do $(SUDO) $(VENV)/bin/commbench sweep bench/grids/campaign/$$g.yaml --out results/campaign; done

# The two-level model against a measurement: the two-node cluster at 100 Mbit/s between nodes (root), its grid
# through Slurm, then the same workers on this host (the model's compute time). The cluster stays up.
# the zoo's time-to-accuracy validation on emulated links, one run at a time (needs root for the namespaces)
zoo-net: $(STAMP)
	$(SUDO) $(VENV)/bin/commbench sweep bench/grids/zoo/zoo-network.yaml --out results/zoo

campaign-2node: $(STAMP)
	$(SUDO) bash slurm/local/up2.sh --rate 100mbit
	$(SUDO) $(VENV)/bin/commbench sweep bench/grids/campaign/network-2node.yaml --launcher slurm --wait --out results/campaign
	$(SUDO) $(VENV)/bin/commbench sweep bench/grids/campaign/network-2node-loopback.yaml --out results/campaign

bench: $(STAMP) $(FASHION)
	$(PY) -m pytest -q -m benchmark tests/benchmarks -s

# the smoke sweep's records, not the user's other runs in local-results/ (results/smoke: where older versions put them)
clean:
	rm -rf $(VENV) $(SMOKE) results/smoke data
