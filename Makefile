# Duraflow's developer targets:
#
#   make test       go test -race ./... (Postgres tests skip when it is unreachable; TESTTIMEOUT per package)
#   make generate   regenerate the sqlc code (installs sqlc when missing) and httpapi/openapi.json
#   make cli-transcript  rerun the commands of the transcript in docs/cli.md and rewrite their output
#   make verify     gofmt, go vet (with the attack, chaos and tsclient tags), generated code and the OpenAPI document in sync, make lint
#   make openapi-client  a TypeScript client generated from the served OpenAPI document: tsc --strict, a session, Redocly and Spectral (needs node and npm)
#   make lint       golangci-lint (.golangci.yml): depguard's import direction, vet, staticcheck... (installs it when missing)
#   make tidy-check go.mod and go.sum tidy
#   make bench      the Go benchmarks, then duraflow bench on BENCH_DB (see docs/benchmarks.md)
#   make examples   run the example programs (SQLite unless DURAFLOW_DATABASE_URL is set)
#   make attack     the attack suite: the real binary on loopback against the attack table (internal/attack)
#   make fuzz       each Go fuzz target for FUZZTIME (10s), one at a time; plain go test runs their seeds
#   make chaos      the chaos suite: kills, stops and database restarts under load (internal/chaos)
#   make chaos-pgbouncer  the chaos suite's "PgBouncer restarted" scenario (needs pgbouncer)

GO ?= go

# The database tests use; set it to use another one.
export DURAFLOW_TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
# The database the example programs use: unset, they use the SQLite file
# ./duraflow.db; set DURAFLOW_DATABASE_URL to run them on Postgres.

# sqlc is installed where `go install` puts binaries: GOBIN, or the bin
# folder of the first GOPATH entry.
SQLC_VERSION ?= v1.31.1
GOBIN_DIR := $(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin)
SQLC ?= $(GOBIN_DIR)/sqlc
# golangci-lint, installed the same way; .golangci.yml is its configuration.
GOLANGCI_LINT_VERSION ?= v2.6.2
GOLANGCI_LINT ?= $(GOBIN_DIR)/golangci-lint

# Extra flags for go test, such as TESTFLAGS=-count=1 or TESTFLAGS=-v.
TESTFLAGS ?=
# What make bench runs, and for how long: the Go benchmarks (bench-go)...
BENCH ?= .
BENCHTIME ?= 1s
BENCH_PKGS ?= ./...
# ...and duraflow bench (bench-run) on this database with these arguments,
# built into BENCH_BIN with the commit stamped in, e.g.
#   make bench-run BENCH_DB=sqlite BENCH_ARGS='--workload steps10 -n 5000'
BENCH_DB ?= $(DURAFLOW_TEST_DATABASE_URL)
BENCH_ARGS ?= --ceiling
BENCH_BIN ?= $(or $(TMPDIR),/tmp)/duraflow-bench

.PHONY: test generate sqlc sqlc-diff openapi openapi-diff openapi-client cli-transcript verify lint golangci-lint tidy-check bench bench-go bench-run examples attack fuzz chaos

# TESTTIMEOUT bounds each package's test binary: the runner's tests run
# several minutes under -race on two cores, near go test's default of 10m.
TESTTIMEOUT ?= 20m

test:
	$(GO) test -race -timeout $(TESTTIMEOUT) $(TESTFLAGS) ./...

# generate regenerates the sqlc code of every backend from db/queries and the
# goose migrations in db/migrations, and the OpenAPI document.
generate: sqlc openapi
	$(SQLC) generate

# openapi rewrites httpapi/openapi.json, the OpenAPI document of the HTTP
# API, from its operation table (httpapi/openapi_spec_test.go) and the wire
# types; openapi-diff fails when the committed document is stale (the plain
# tests check it too).
openapi:
	$(GO) test -count=1 -run '^TestOpenAPIDocument$$' ./httpapi -update

openapi-diff:
	$(GO) test -count=1 -run '^TestOpenAPIDocument$$' ./httpapi

# openapi-client checks the served OpenAPI document with tools written
# elsewhere, pinned in clients/typescript (package-lock.json), which npm ci
# installs first: TestTypeScriptClient (cmd/duraflow, build tag tsclient)
# starts duraflow dev twice on loopback, generates a TypeScript client from
# the document one serves (openapi-typescript), type-checks it with tsc
# --strict, runs a session with it (openapi-fetch), and lints both served
# documents with Redocly and Spectral: an error fails, warnings are listed.
# It needs Node.js 20.19 or later and npm; about a minute once npm's cache
# is warm.
openapi-client:
	cd clients/typescript && npm ci
	$(GO) test -count=1 -tags tsclient -run '^TestTypeScriptClient$$' -v ./cmd/duraflow

# cli-transcript reruns the commands of the transcript in docs/cli.md
# against a dev server and rewrites their output there; make test fails
# when it is stale (internal/clitranscript).
cli-transcript:
	$(GO) test -count=1 -run '^TestTranscript$$' ./internal/clitranscript -update

# sqlc installs sqlc $(SQLC_VERSION) unless $(SQLC) is that version already.
# It builds with cgo and takes a couple of minutes the first time.
sqlc:
	@if [ "$$($(SQLC) version 2>/dev/null)" != "$(SQLC_VERSION)" ]; then \
		echo "installing sqlc $(SQLC_VERSION) into $(GOBIN_DIR)"; \
		$(GO) install github.com/sqlc-dev/sqlc/cmd/sqlc@$(SQLC_VERSION) || exit 1; \
		v="$$($(SQLC) version)"; if [ "$$v" != "$(SQLC_VERSION)" ]; then \
			echo "$(SQLC) is $$v after installing $(SQLC_VERSION); set SQLC or GOBIN" >&2; exit 1; \
		fi; \
	fi

# sqlc-diff fails when the committed generated code is stale.
sqlc-diff: sqlc
	$(SQLC) diff

# verify fails on unformatted code, vet findings, stale generated code, an
# untidy go.mod and lint findings.
verify: sqlc-diff openapi-diff tidy-check
	@echo "gofmt -l ."; files="$$(gofmt -l .)"; if [ -n "$$files" ]; then \
		echo "these files need gofmt:"; echo "$$files"; exit 1; \
	fi
	$(GO) vet -tags attack,chaos,tsclient ./...
	$(MAKE) lint

# lint runs golangci-lint with .golangci.yml: depguard keeps imports pointing
# the way ARCHITECTURE.md describes, with govet, staticcheck, errcheck,
# ineffassign, unused, misspell, revive's exported rule and the gofmt and
# goimports formatters. About a minute on 2 cores with an empty lint cache,
# seconds with a warm one.
lint: golangci-lint
	$(GOLANGCI_LINT) run ./...

# golangci-lint installs golangci-lint $(GOLANGCI_LINT_VERSION) unless
# $(GOLANGCI_LINT) is that version already.
golangci-lint:
	@if ! $(GOLANGCI_LINT) version 2>/dev/null | grep -q "version $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) "; then \
		echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into $(GOBIN_DIR)"; \
		$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) || exit 1; \
		if ! $(GOLANGCI_LINT) version | grep -q "version $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) "; then \
			echo "$(GOLANGCI_LINT) is not $(GOLANGCI_LINT_VERSION) after installing it; set GOLANGCI_LINT or GOBIN" >&2; exit 1; \
		fi; \
	fi

# tidy-check fails when go.mod or go.sum is not tidy; it changes nothing.
tidy-check:
	$(GO) mod tidy -e -diff

bench: bench-go bench-run

# bench-go runs the Go benchmarks: the claim, checkpoint and replay paths
# (./bench) and the end-to-end ones (./internal/benchmarks), on both backends.
bench-go:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchtime $(BENCHTIME) $(BENCH_PKGS)

# bench-run runs the workloads of duraflow bench; the table goes to stdout.
bench-run:
	$(GO) build -buildvcs=auto -o '$(BENCH_BIN)' ./cmd/duraflow
	'$(BENCH_BIN)' bench --db '$(BENCH_DB)' $(BENCH_ARGS)

examples:
	$(GO) run ./examples/quickstart
	$(GO) run ./examples/billing
	$(GO) run ./examples/saga
	$(GO) run ./examples/invoke
	$(GO) run ./examples/createtx

# attack runs the attack suite (build tag attack, package internal/attack): it
# builds cmd/duraflow, starts it on loopback and checks every attack of the
# table is refused with its status and code, the server still answers and
# nothing was half-written. Postgres cases use DURAFLOW_TEST_DATABASE_URL.
attack:
	$(GO) test -race -count=1 $(TESTFLAGS) -tags attack ./internal/attack/...

# FUZZ_TARGETS are the Go fuzz targets, package:target; make fuzz runs each
# for FUZZTIME in turn (go test -fuzz takes one target at a time). Their seed
# corpora (f.Add and testdata/fuzz) run with every plain go test.
FUZZTIME ?= 10s
FUZZ_TARGETS ?= \
	./dftype:FuzzParseDuration \
	./dftype:FuzzDurationJSON \
	./workflow:FuzzPayloadDepth \
	./flow:FuzzFlowDefinition \
	./flow:FuzzExpression \
	./httpapi:FuzzRequestBody \
	./client:FuzzInstanceCursor \
	./client:FuzzHistoryCursor

fuzz:
	@set -e; for pt in $(FUZZ_TARGETS); do \
		pkg="$${pt%%:*}"; target="$${pt#*:}"; \
		echo "==> $$pkg $$target ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	done
# chaos runs the chaos suite on SQLite and on a private Postgres cluster it
# creates (initdb, pg_ctl; the server of DURAFLOW_TEST_DATABASE_URL is not
# touched): CHAOS_DURATION of chaos per backend, then the checks from the
# database and the summary table. The CI run is the default (1m per
# backend, about 5 minutes in all); the full run, whose numbers
# docs/reliability.md reports, is
#   make chaos CHAOS_DURATION=10m CHAOS_TIMEOUT=60m
# Other knobs are environment variables (see internal/chaos/doc.go), e.g.
# DURAFLOW_CHAOS_SEED to replay a run. The test binary is built without
# -race: the race detector slows the runner processes several times over on a
# small machine, which would make the leases, the kill timing and the stall
# measured after a restart unlike production's; the runner's own tests run
# under -race in make test. Add it with CHAOS_FLAGS=-race.
CHAOS_DURATION ?= 1m
CHAOS_TIMEOUT ?= 30m
CHAOS_FLAGS ?=
chaos:
	DURAFLOW_CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test $(CHAOS_FLAGS) -count=1 -tags chaos \
		-timeout $(CHAOS_TIMEOUT) -v -run '^(TestChaos|TestLossesBeside|TestStartedBeforeTakeover)$$' ./internal/chaos/

# chaos-pgbouncer runs the chaos suite's "PgBouncer restarted" scenario
# (TestChaosPgBouncer in internal/chaos): the runner processes reach a
# private Postgres through a private PgBouncer in transaction mode, which is
# restarted under load while runners are killed, then the suite's checks
# run. It needs pgbouncer (apt-get install pgbouncer) besides the Postgres
# server binaries; CHAOS_PGBOUNCER_DURATION of chaos (40s, about a minute
# and a half in all).
CHAOS_PGBOUNCER_DURATION ?= 40s
.PHONY: chaos-pgbouncer
chaos-pgbouncer:
	DURAFLOW_CHAOS_PGBOUNCER_DURATION=$(CHAOS_PGBOUNCER_DURATION) $(GO) test $(CHAOS_FLAGS) -count=1 -tags chaos \
		-timeout $(CHAOS_TIMEOUT) -v -run '^TestChaosPgBouncer$$' ./internal/chaos/
