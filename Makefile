# ballast — see README.md. Every target works on a fresh Debian machine with
# only Go installed; anything else a target needs, it installs itself.

GO          ?= go
BIN         ?= bin/ballast
AGENT_BIN   ?= bin/ballast-agent
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X main.version=$(VERSION)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEMO_OUT    ?= demo-out
# go-nvml's cgo wrappers call every NVML function, deprecated ones included:
# without this a fresh build prints ~150 lines of -Wdeprecated-declarations
# warnings from nvml.h (harmless; the library is dlopen()ed at run time).
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: all build agent test test-deps test-long fuzz lint bench demo eval clean grafana-plugin grafana-frontend grafana-check grafana-npm

all: build

# bin/ballast has every role; bin/ballast-agent only the ds and client
# agents, without the store (docs/decisions.md), for data servers and GPU
# nodes.
build: agent
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ballast

agent:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(AGENT_BIN) ./cmd/ballast-agent

# The CI test suite: every package's tests, under 15 minutes on 2 cores,
# then the Grafana plugin's module (its gRPC tests against a real mds and
# the dashboards' panel tests) and its frontend (type check, build, the
# dashboards against @grafana/schema).
test: test-deps
	$(GO) test -count=1 -timeout 20m ./...
	cd grafana && $(GO) test -count=1 -timeout 10m ./pkg/... ./cmd/...
	$(MAKE) grafana-check

# Debian packages the tests use, as COMMAND:PACKAGE. Chromium renders the
# capacity report in cluster/report's browser test; Prometheus remote-writes
# to a real mds in cmd/ballast's TestPrometheusRemoteWriteLosesNothing;
# promtool (prometheus), Alertmanager and vmalert (victoria-metrics) check
# the alerting rules and senders in deploy/alerts; victoria-metrics and
# prometheus (with its remote-write receiver) are remote stores in
# storage/remote, and etcd (etcd-server) the HA pair's coordinator in
# cluster/ha. Installed when missing and we may (root); otherwise the tests
# that need them skip and say why. The VictoriaMetrics cluster binaries are
# not packaged: tests take them from ../shared/tools/victoriametrics-cluster.
TEST_DEPS := chromium:chromium prometheus:prometheus promtool:prometheus prometheus-alertmanager:prometheus-alertmanager vmalert:victoria-metrics victoria-metrics:victoria-metrics etcd:etcd-server mkfs.ext4:e2fsprogs losetup:mount

test-deps:
	@missing=""; for d in $(TEST_DEPS); do command -v "$${d%%:*}" >/dev/null 2>&1 || case " $$missing " in *" $${d#*:} "*) ;; *) missing="$$missing $${d#*:}";; esac; done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian packages for the tests:$$missing"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null) || echo "warning: could not install$$missing; the tests that need them will be skipped"; \
		else \
			echo "note: not installed and this is not root:$$missing; the tests that need them will be skipped (apt-get install$$missing)"; \
		fi; \
	fi

# The Grafana plugin (grafana/, docs/grafana.md): a Go module of its own
# (the backend, on grafana-plugin-sdk-go; its Go packages are named
# explicitly, since ./... would reach into node_modules) and a TypeScript
# frontend built with @grafana/create-plugin's toolchain. npm packages come
# from grafana/package-lock.json; node_modules is installed when missing or
# older than the lock file, with `npm install --no-save` rather than
# `npm ci`: the registry the lock was made against lacks @swc/core's macOS
# and Windows binaries, so the lock lacks those optional entries and
# `npm ci` refuses it; --no-save installs what the lock says and never
# rewrites it.
PLUGIN_ID        := ballast-ballast-datasource
PLUGIN_VERSION   := $(shell sed -n 's/^  "version": "\(.*\)",/\1/p' grafana/package.json)
PLUGIN_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
PLUGIN_ZIP       ?= bin/$(PLUGIN_ID)-$(PLUGIN_VERSION).zip

grafana-npm:
	@if ! command -v npm >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing Debian packages nodejs and npm for the Grafana plugin's frontend"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null; \
		else \
			echo "npm is not installed and this is not root: cannot build the Grafana plugin's frontend (apt-get install nodejs npm)"; exit 1; \
		fi; \
	fi
	@if [ ! -f grafana/node_modules/.package-lock.json ] || [ grafana/package-lock.json -nt grafana/node_modules/.package-lock.json ]; then \
		echo "npm install in grafana/ (from package-lock.json)"; cd grafana && npm install --no-save --no-audit --no-fund --loglevel=error; \
	fi

# Type-check and build the frontend, and type-check the dashboards.
grafana-check: grafana-npm
	cd grafana && npm run --silent typecheck && npm run --silent build >/dev/null && npm run --silent check-dashboards

grafana-frontend: grafana-npm
	cd grafana && npm run --silent build

# The plugin zip in Grafana's layout: PLUGIN_ID/ with plugin.json,
# module.js and gpx_ballast_<os>_<arch> per platform.
grafana-plugin: grafana-frontend
	@for p in $(PLUGIN_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		echo "building gpx_ballast_$${os}_$${arch}$$ext"; \
		(cd grafana && CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w' -o dist/gpx_ballast_$${os}_$${arch}$$ext ./pkg) || exit 1; \
	done
	cd grafana && $(GO) run ./cmd/pluginzip -dist dist -out ../$(PLUGIN_ZIP)
	@echo "$(PLUGIN_ZIP): install it as docs/grafana.md says"

# Soak and fuzz runs that do not fit the CI budget. make test runs every
# fuzz target's seed corpus (and the crashers kept in testdata/fuzz) as a
# test; test-long fuzzes each for FUZZTIME (an execution count: 10 M).
# FUZZMINIMIZE bounds the minimization of each new input (go test's default,
# 60 s, stalls a worker that long at every new coverage: a target with
# fixtures of a few KB ran 17 executions in 21 s, docs/reliability.md).
# FUZZTMP holds the fuzzers' temporary files: the targets that write each
# input to a file (FuzzConfig, the fake /proc and /sys trees) wait on the
# disk's writeback; on tmpfs FuzzConfig ran 3.4x the executions
# (docs/reliability.md). /tmp where /dev/shm is missing or not writable.
FUZZTIME ?= 10000000x
FUZZMINIMIZE ?= 1000x
FUZZTMP ?= $(shell [ -d /dev/shm ] && [ -w /dev/shm ] && echo /dev/shm || echo /tmp)
test-long:
	$(GO) test -count=1 -timeout 60m -tags long ./...
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

# Every fuzz target in the module, found by name (so a new one is never left
# out), fuzzed for FUZZTIME each; go test keeps a crashing input in the
# package's testdata/fuzz, and the target fails the run after all have run.
fuzz:
	@failed=""; for f in $$(grep -rl --include='*_test.go' --exclude-dir=grafana --exclude-dir=node_modules '^func Fuzz' . | sort); do \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "fuzz $$(dirname $$f) $$fn for $(FUZZTIME)"; \
			TMPDIR=$(FUZZTMP) $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) -timeout 0 $$(dirname $$f) || failed="$$failed $$fn"; \
		done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that crashed:$$failed"; exit 1; fi

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd grafana && $(GO) vet ./pkg/... ./cmd/... && $(GO) run $(STATICCHECK) ./pkg/... ./cmd/...

# Benchmarks that write BENCHMARKS.md (see bench/README.md): the ingest and
# query comparison with VictoriaMetrics, then the twin, LAYOUTSTATS,
# analyzer and agent-overhead sections.
bench: build
	$(GO) run ./bench/cmd/benchall -ballast $(BIN) -out BENCHMARKS.md
	$(GO) run ./bench/cmd/benchsections -ballast $(BIN) -out BENCHMARKS.md

demo: build
	./$(BIN) demo --scenario mixed --out $(DEMO_OUT)

eval: build
	./$(BIN) eval all --out docs/EVALUATION.md

clean:
	rm -rf bin $(DEMO_OUT) grafana/dist
