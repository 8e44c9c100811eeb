# calico-py. `make test` and (later) `make run` set up a fresh Debian 12 machine by themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# Where `make setup` links `calico` and `calicoctl` (and `make uninstall` removes them from).
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin

.PHONY: setup uninstall run cluster cluster-down test unit integration lint format bench fuzz crds proto clean

setup:
	@scripts/setup-system.sh
	@scripts/setup-venv.sh
	@PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" scripts/link-bin.sh install

# Remove the links `make setup` made (only those pointing into this checkout's .venv).
uninstall:
	@PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" scripts/link-bin.sh uninstall

# A whole Calico node on this machine (background) plus the demo (foreground); Ctrl-C ends both.
run: setup
	@mkdir -p /var/log/calico; \
	trap '$(VENV)/bin/calico node stop; echo "(to also remove the nftables table and the CNI files: calico node stop --cleanup)"' EXIT; \
	setsid -w $(VENV)/bin/calico node run >/var/log/calico/node-run.log 2>&1 </dev/null & \
	$(PY) -m calico.node.run.demo --node-pid $$! --node-log /var/log/calico/node-run.log

# Three Calico nodes (network namespaces on one bridge, one etcd) with VXLAN, plus the demo
# across nodes; stays up until 'make cluster-down', which removes everything it made.
cluster: setup
	$(VENV)/bin/calico node cluster up

cluster-down:
	$(VENV)/bin/calico node cluster down

# Two pytest-xdist workers: one runs the kernel tiers (tests/integration, tests/e2e) serially, in
# order; the other takes tests/unit module by module (tests/conftest.py's loadscope scheduler).
# PYTEST_ARGS=-n0 runs everything in one process, as before.
test: lint
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadscope tests $(PYTEST_ARGS)

unit: setup
	$(PY) -m pytest -q tests/unit $(PYTEST_ARGS)

integration: setup
	$(PY) -m pytest -q tests/integration $(PYTEST_ARGS)

# Style, formatting and the import contracts in .importlinter (layers, component independence,
# nothing imports calico.cli, no cycles): a contract broken later fails the build.
lint: setup
	$(VENV)/bin/ruff check calico tests benchmarks
	$(VENV)/bin/ruff format --check calico tests benchmarks
	$(VENV)/bin/lint-imports --no-cache

format: setup
	$(VENV)/bin/ruff check --fix calico tests benchmarks
	$(VENV)/bin/ruff format calico tests benchmarks

# Performance suite: each script prints one JSON line per result. Never part of `make test`.
# Every benchmark but the tree comparisons, which need an older tree as their argument and are
# run by hand (bench_felix_imports.py OLD_TREE, bench_felix_startup_read.py OLD_TREE).
BENCH_TREE_TOOLS := benchmarks/bench_felix_imports.py benchmarks/bench_felix_startup_read.py
bench: setup
	@set -e; for b in $(filter-out $(BENCH_TREE_TOOLS),$(wildcard benchmarks/bench_*.py)); do \
		echo "# $$b" >&2; $(PY) $$b; done

# Fuzz the user-controlled inputs for FUZZ_SECONDS each (not run in CI).
FUZZ_SECONDS ?= 60
fuzz: setup
	@set -e; for f in tests/fuzz/fuzz_*.py; do echo "# $$f" >&2; $(PY) $$f --seconds $(FUZZ_SECONDS); done

# Regenerate the crd.projectcalico.org/v1 CustomResourceDefinitions from the models.
crds: setup
	$(PY) -m calico.api.crdgen --out manifests/crds

# Regenerate the checked-in protobuf/gRPC modules from our .proto sources.
proto: setup
	$(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. --pyi_out=. \
		calico/proto/etcd/kv.proto calico/proto/etcd/rpc.proto \
		calico/proto/goldmane/api.proto
	rm -f calico/proto/etcd/kv_pb2_grpc.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
