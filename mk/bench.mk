# make bench / make bench-quick: build everything, start a real server on
# loopback and print the performance table (see the performance spec).
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

bench: build bench-tool bench-deps
	./$(BIN)/shellctl-bench --bin $(BIN) $(BENCH_FLAGS)

bench-quick: build bench-tool bench-deps
	./$(BIN)/shellctl-bench --bin $(BIN) --quick $(BENCH_FLAGS)
