#!/usr/bin/env bash
# make test-image: run the image built by make image (OUT, default bin/image)
# under runc, hardened, and check it from outside (deploy/imagetest). Root.
# runc and umoci come from Debian's packages when missing; without them, or
# without Landlock, the tests skip and say why.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bin/image}
say() { printf 'make test-image: %s\n' "$*" >&2; }
if [ "$(id -u)" != 0 ]; then
	say "skipped: needs root (runc, umoci unpack, namespaces)"
	exit 0
fi
missing=()
for tool in runc umoci; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
	say "installing ${missing[*]} from Debian's packages"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || say "could not install ${missing[*]}: their tests skip"
fi
# Reproducible: a second build from the same Debian root gives the same digest.
deploy/image/check-reproducible.sh "$OUT"
go test -tags imagetest -count=1 -timeout 15m -v ./deploy/imagetest -args -image "$PWD/$OUT" -bin "$PWD/bin" 2>&1 |
	grep -v '^        time=' | grep -E -- '^(=== RUN|--- |PASS|FAIL|ok|    )' || true
exit "${PIPESTATUS[0]}"
