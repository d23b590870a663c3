# dify-agent: the agent's CLI to its backend (see docs/dify-agent.md).
# Included by the top Makefile; run from the repository root.

# Keep whatever default goal the including Makefile has.
_agent_default_goal := $(.DEFAULT_GOAL)

GO ?= go

.PHONY: gen-cli-help test-agent fake-agent-stub

# Writes the command tree (usage and short help of every command) that is
# shown to the model; TestHelpDumpFileIsCurrent fails when it is stale.
gen-cli-help:
	$(GO) run ./cmd/dify-agent __dump-cli-help > docs/dify-agent-cli-help.json.tmp
	mv docs/dify-agent-cli-help.json.tmp docs/dify-agent-cli-help.json

# The CLI, its client and the fake Agent Stub.
test-agent:
	$(GO) test ./cmd/dify-agent/... ./cmd/fake-agent-stub/... ./internal/agentstub/...

# Serves the fake Agent Stub for trying dify-agent by hand.
fake-agent-stub:
	$(GO) run ./cmd/fake-agent-stub --token dev-token

.DEFAULT_GOAL := $(_agent_default_goal)
