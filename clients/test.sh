#!/usr/bin/env bash
# Runs both clients' tests against a built shellctl (make test-clients builds
# it first): clients/test.sh path/to/bin/shellctl [typescript|python ...].
# Each client's tests start their own server from that binary. A client
# whose toolchain is missing (node and npm ≥ 20, python3 ≥ 3.9) is skipped
# with a line saying so, as the MCP e2e test does: make test needs only Go.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath "${1:?usage: clients/test.sh path/to/bin/shellctl [typescript|python ...]}")
shift
which=("$@")
[ ${#which[@]} -gt 0 ] || which=(typescript python)
export SHELLCTL_BIN=$bin

typescript() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "clients/typescript: skipped: node and npm are not on PATH (install Node.js 20 or later to run it)"
    return 0
  fi
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$major" -lt 20 ]; then
    echo "clients/typescript: skipped: node $(node --version) is older than the 20 it needs"
    return 0
  fi
  cd "$here/typescript"
  # npm ci only when the lockfile changed since the last install (a stamp
  # in node_modules): it empties node_modules first, and the packages are
  # then taken from npm's cache when they are there.
  local sum
  sum=$(cat package.json package-lock.json | sha256sum | cut -d' ' -f1)
  if [ "$(cat node_modules/.shellctl-lock-sum 2>/dev/null)" != "$sum" ]; then
    npm ci --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error </dev/null
    echo "$sum" > node_modules/.shellctl-lock-sum
  fi
  npm test --silent </dev/null
}

python() {
  if ! command -v python3 >/dev/null; then
    echo "clients/python: skipped: python3 is not on PATH"
    return 0
  fi
  if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
    echo "clients/python: skipped: $(python3 --version) is older than the 3.9 it needs"
    return 0
  fi
  cd "$here/python"
  # -B: no __pycache__ left in the checkout.
  python3 -B -m unittest discover -s tests -t . </dev/null
}

for c in "${which[@]}"; do
  case "$c" in
    typescript|python) echo "== clients/$c"; ( "$c" ) ;;
    *) echo "clients/test.sh: unknown client $c (typescript or python)" >&2; exit 2 ;;
  esac
done
