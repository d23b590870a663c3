# make bench / make bench-quick: build everything, start a real server on
# loopback and print the performance table (see the performance spec).
# `make bench` runs the full table BENCH_RUNS (2) times, each on a fresh server,
# and prints every figure's spread across the runs; `make bench-quick` does one
# run of smaller counts (under a minute).
# BENCH_FLAGS adds flags, e.g. BENCH_FLAGS='--only run,list'.
BENCH_FLAGS ?=

.PHONY: bench-tool bench-deps

bench-tool:
	@mkdir -p $(BIN)
	$(GO) build $(GOFLAGS_BUILD) -o $(BIN)/ ./cmd/shellctl-bench

# The snapshot floors need tar and zstd: install zstd quietly when it is
# missing and we may (root with apt-get); the bench says when it cannot.
bench-deps:
	@command -v zstd >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		apt-get install -y -qq zstd >/dev/null 2>&1; } || true

BENCH_RUNS ?= 2

bench: build bench-tool bench-deps
	./$(BIN)/shellctl-bench --bin $(BIN) --runs $(BENCH_RUNS) $(BENCH_FLAGS)

bench-quick: build bench-tool bench-deps
	./$(BIN)/shellctl-bench --bin $(BIN) --quick --runs 1 $(BENCH_FLAGS)
