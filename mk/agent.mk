# dify-agent: the agent's CLI to its backend (see docs/dify-agent.md).
# Included by the top Makefile; run from the repository root.

# Keep whatever default goal the including Makefile has.
_agent_default_goal := $(.DEFAULT_GOAL)

GO ?= go

.PHONY: gen-cli-help test-agent fake-agent-stub

# Writes every visible command's full --help (command path -> help text, the
# original's format) that is shown to the model; TestHelpDumpFileIsCurrent
# fails when it is stale. Hidden commands (home-snapshot) are left out.
gen-cli-help:
	$(GO) run ./cmd/dify-agent __dump-cli-help > docs/dify-agent-cli-help.json.tmp
	mv docs/dify-agent-cli-help.json.tmp docs/dify-agent-cli-help.json

# The CLI, its client and the fake Agent Stub, and the E2B+S3 Home flow
# through two shellctl servers.
test-agent:
	$(GO) test ./cmd/dify-agent/... ./cmd/fake-agent-stub/... ./internal/agentstub/...
	$(GO) test ./e2e -run TestAgentHomeSnapshotFlow

# Serves the fake Agent Stub for trying dify-agent by hand.
fake-agent-stub:
	$(GO) run ./cmd/fake-agent-stub --token dev-token

.DEFAULT_GOAL := $(_agent_default_goal)
