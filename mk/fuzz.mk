# make fuzz: run every Go fuzz target for FUZZTIME each (default 20s), one
# after the other. A failing input is written to the package's
# testdata/fuzz/<FuzzName>/, where `go test` (and so `make test`) runs it as a
# regression case from then on, like the committed seeds.
#   make fuzz FUZZTIME=5m              longer runs
#   make fuzz FUZZ=FuzzRestore         one target (a regexp over the names)
#   make fuzz FUZZFLAGS='-parallel 1'  extra go test flags
FUZZTIME ?= 20s
FUZZ ?= .
FUZZFLAGS ?=
# Restore fuzzing makes a directory tree per input: on a tmpfs it runs about
# ten times faster than on disk. Empty: go test's default temporary dir.
FUZZ_TMPDIR ?= $(shell test -d /dev/shm -a -w /dev/shm && echo /dev/shm)

FUZZ_TARGETS := \
	./internal/sanitize:FuzzSanitize \
	./internal/outputlog:FuzzWindow \
	./internal/outputlog:FuzzWindowFollow \
	./internal/outputlog:FuzzSplit \
	./internal/snapshot:FuzzRestore \
	./internal/api:FuzzRequestDecoding \
	./internal/runner/proto:FuzzRecv

.PHONY: fuzz

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "$$name" | grep -Eq -- '$(FUZZ)' || continue; \
		echo "== $$name ($$pkg) for $(FUZZTIME)"; \
		$(if $(FUZZ_TMPDIR),TMPDIR=$(FUZZ_TMPDIR)) $(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS); \
	done
