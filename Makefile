# redkit: every target works on a fresh Debian machine with Go installed.
SHELL := /bin/bash
MODULES := health internal otelx otelx/setup redistest idgen lock stock wallet pgjournal examples/kit reliability examples bench
# The release tooling (never released itself; see versions.yaml and RELEASING.md).
MODULES += tools
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server gcc libc6-dev postgresql prometheus

.PHONY: test deps vet docs unit modules chaos bench bench-otlp bench-scripts lint fmt

test: deps vet docs unit modules release-proof

# The tests need real redis-server, PostgreSQL and prometheus processes, and -race needs
# cgo (gcc). Debian keeps initdb and postgres in /usr/lib/postgresql/<ver>/bin,
# off PATH; pgjournal/pgtest looks there.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-cli"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
		echo "make: missing:$$missing; installing with apt-get"; \
		if ! { $(SUDO) apt-get update -qq && $(SUDO) $(APT_INSTALL); }; then \
			echo "make: could not install. Run: sudo apt-get update && sudo $(APT_INSTALL)"; exit 1; \
		fi; \
	fi; \
	redis-server --version

vet:
	$(GO) vet work

# The documents agree with the code: every Go snippet of the Markdown files
# and package comments compiles, and every identifier, make target, file,
# test and telemetry name they name exists (tools/doccheck). Each finding is
# file:line: what.
docs:
	$(GO) run -C tools ./cmd/doccheck -root "$(CURDIR)"

# REDKIT_REQUIRE_PROMETHEUS: examples/flashsale's TestPrometheus_flashSale
# fails, instead of skipping, without the prometheus binary deps installs.
unit:
	REDKIT_REQUIRE_PROMETHEUS=1 $(GO) test -race -count=1 -timeout 20m work

# Each module must stand alone (GOWORK=off): tidy, vet and compile its tests.
modules:
	@set -e; for m in $(MODULES); do \
		echo "== $$m (GOWORK=off)"; \
		(cd $$m && GOWORK=off $(GO) mod tidy -diff && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -count=1 -run '^$$' ./... >/dev/null); \
	done

# Long runs: millions of operations and every fault many times.
# CHAOS_SCALE multiplies the work.
chaos: deps
	RUN_CHAOS=1 $(GO) test -race -count=1 -timeout 60m -run 'Chaos' work

OTLP_CASES = ^(lock/(baseline|redislock|redkit)/uncontended-(1|16)|flash/(deduct-goredis|redkit-deduct)|wallet/(debit-goredis|redkit-debit)|ids/(redis-incr-16|redkit-sequence-16))$$

bench: deps
	$(GO) run ./bench/cmd/redkit-bench

# redkit's rows again with the OpenTelemetry SDK installed and exporting
# over OTLP/HTTP to a sink on loopback, beside their yardsticks.
bench-otlp: deps
	$(GO) run ./bench/cmd/redkit-bench -telemetry otlp -only '$(OTLP_CASES)'

# Each script's own Redis time (INFO commandstats usec_per_call of EVALSHA),
# from one client on an idle server, beside the smallest script doing the job.
bench-scripts: deps
	$(GO) run ./bench/cmd/redkit-bench -scripts

lint:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) run $(STATICCHECK) ./...); done

fmt:
	gofmt -l -w $(MODULES)

# Releases (versions.yaml, RELEASING.md). The tools module holds the program.
.PHONY: release-proof release-prepare release-develop api-check
RELEASE := $(GO) run -C tools ./cmd/release

# A release as the public proxy would serve it: in a temporary copy, prepare,
# commit and tag, serve each released module's zip from a file-based GOPROXY
# (then the module cache and the GOPROXY configured here), and go get, build
# and run consumers outside the workspace against a real redis-server.
release-proof: deps
	cd tools && REDKIT_RELEASE_PROOF=1 $(GO) test -count=1 -run '^TestConsumerProof' ./release/

# make release-prepare SET=library [VERSION=v0.2.0]: move the set (default:
# the version versions.yaml has), date its changelogs, rewrite the released
# go.mod/go.sum files for the release commit and print the tags. Pushes nothing.
release-prepare:
	@test -n "$(SET)" || { echo "usage: make release-prepare SET=<set of versions.yaml> [VERSION=vX.Y.Z]"; exit 2; }
	$(RELEASE) prepare -root "$(CURDIR)" -set "$(SET)" $(if $(VERSION),-version "$(VERSION)")

# After tagging: relative replaces back in the released go.mod files.
release-develop:
	$(RELEASE) develop -root "$(CURDIR)"

# gorelease per released module against its set's previous version (before
# a set's first release: against the current tree). A few minutes, so not
# part of make test.
api-check:
	$(RELEASE) api-check -root "$(CURDIR)"
