# make test-clients: the TypeScript and Python clients' tests (clients/,
# see clients/*/README.md) against the binaries just built, each starting
# its own server. CLIENTS=typescript or CLIENTS=python runs one.
# Included by the top Makefile; run from the repository root.
_clients_default_goal := $(.DEFAULT_GOAL)

CLIENTS ?= typescript python

.PHONY: test-clients

test-clients: build
	clients/test.sh $(BIN)/shellctl $(CLIENTS)

.DEFAULT_GOAL := $(_clients_default_goal)
