# shellctl — see README.md. Everything here needs only Go on PATH.
SHELL := /bin/bash
GO ?= go
BIN := bin
BINARIES := shellctl shellctl-runner shellctl-stage shellctl-screen shellctl-runner-exit shellctl-sanitize-pty dify-agent fake-agent-stub
# The version and commit GET /v1/info, shellctl version and
# shellctl_build_info report: the git tag (v0.x.y, and how far past it),
# else, in a clone without tags, the newest version of CHANGELOG.md marked
# as a development build of this commit.
CHANGELOG_VERSION := $(shell sed -n 's/^\#\# \(v[0-9][0-9.]*\)$$/\1/p' CHANGELOG.md 2>/dev/null | head -1)
VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || echo "$(or $(CHANGELOG_VERSION),v0.0.0)-dev+$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)")
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO := github.com/shellctl/shellctl/internal/buildinfo
# TRIM: release binaries carry no build paths. make test builds without it:
# its go vet and go test compile every package without -trimpath, and the
# binaries then reuse those compiles instead of doing all of them again (on
# a cold cache, minutes of modernc.org/sqlite alone).
TRIM ?= -trimpath
GOFLAGS_BUILD = $(TRIM) -ldflags '-s -w -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT)'
export CGO_ENABLED := 0

.PHONY: all build run test test-race vet fmt-check unit integration bench bench-quick clean

all: build

# The runner starts the helpers beside it only when no one but their owner
# can write them, whatever the umask.
build:
	$(call stage,[3/6] build: go build of $(words $(BINARIES)) binaries into $(BIN)/)
	@mkdir -p $(BIN)
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))
	@for b in $(addprefix $(BIN)/,$(BINARIES)); do [ ! -e "$$b" ] || chmod go-w "$$b"; done

# Start the server on loopback with the embedded defaults (RUN_ARGS: more
# serve flags), on a sandbox of its own under the checkout: its Home (every
# job's default HOME and cwd, what snapshots save and restore) is
# .run/home, its state dir .run/state, both made on first use and ignored
# by git. Never the caller's own Home: a snapshot restore from the README's
# examples would rewrite it. RUN_HOME and RUN_STATE choose others. In a
# clean environment: jobs inherit the server's, and make's own variables
# (MAKEFLAGS, MAKELEVEL, MFLAGS) would change every make a job runs.
RUN_HOME ?= $(CURDIR)/.run/home
RUN_STATE ?= $(CURDIR)/.run/state
run: build
	@mkdir -p "$(RUN_HOME)" && mkdir -p -m 0700 "$(RUN_STATE)"
	@echo "make run: Home $(RUN_HOME), state dir $(RUN_STATE)"
	env -i PATH="$$PATH" HOME="$(RUN_HOME)" TERM="$${TERM:-dumb}" ./$(BIN)/shellctl serve --verbose --state-dir "$(RUN_STATE)" $(RUN_ARGS)

# Everything CI checks, a line as each stage starts (its prerequisites
# say theirs when make test runs them, through the target-specific
# STAGES, which prerequisites inherit).
test: STAGES := make test
test: TRIM :=
test: fmt-check vet build
	$(call stage,[4/6] unit and integration tests: go test ./... (a few minutes))
	$(GO) test -count=1 -timeout 8m -parallel 4 ./...
	$(call stage,[5/6] deploy checks: deploy/kubernetes (manifests) and deploy/image (ocibuild))
	cd deploy/kubernetes && $(GO) vet ./... && $(GO) test -count=1 ./...
	cd deploy/image && $(GO) vet ./... && $(GO) test -count=1 ./...
	$(call stage,[6/6] client tests: clients/typescript (node --test) and clients/python (unittest) against $(BIN)/)
	clients/test.sh $(BIN)/shellctl $(CLIENTS)
	$(call stage,passed)

# stage prints "make test: WHAT" when the target runs for make test (no
# comma in WHAT: it ends make's argument).
stage = @$(if $(STAGES),echo '$(STAGES): $(1)',:)

vet:
	$(call stage,[2/6] vet: go vet ./...)
	$(GO) vet ./...

fmt-check:
	$(call stage,[1/6] fmt: gofmt -l on every Go file)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

clean:
	rm -rf $(BIN)

-include mk/*.mk

# The unit tests with the race detector, and the integration tests against
# race-detector builds of the server and runner (needs a C compiler).
test-race:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 15m ./internal/...
	CGO_ENABLED=1 SHELLCTL_E2E_RACE=1 $(GO) test -count=1 -timeout 15m ./e2e
