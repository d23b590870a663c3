#!/usr/bin/env bash
# make test-image: run the image built by make image (OUT, default bin/image)
# under runc and under a private docker daemon, hardened, and check it from
# outside (deploy/imagetest). Root. runc, umoci and docker.io come from
# Debian's packages when missing; without them, or without Landlock, the
# tests skip and say why. A line as each stage starts, and one a test.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bin/image}
say() { printf 'make test-image: %s\n' "$*" >&2; }
if [ "$(id -u)" != 0 ]; then
	say "skipped: needs root (runc, umoci unpack, namespaces)"
	exit 0
fi
# Tool → Debian package. docker.io's daemon is started by the test itself
# (private data root, no bridge, no iptables); the package must not start
# the machine's own, so a policy-rc.d refusing every service start is in
# place while it installs (one the machine has is left as it is).
say "[1/3] the tools: runc, umoci, docker.io"
declare -A pkg=([runc]=runc [umoci]=umoci [dockerd]=docker.io)
missing=()
for tool in runc umoci dockerd; do command -v "$tool" >/dev/null 2>&1 || missing+=("${pkg[$tool]}"); done
if [ ${#missing[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
	say "installing ${missing[*]} from Debian's packages"
	ours=""
	if [ ! -e /usr/sbin/policy-rc.d ]; then
		printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && ours=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || say "could not install ${missing[*]}: their tests skip"
	[ -z "$ours" ] || rm -f /usr/sbin/policy-rc.d
fi
# Reproducible: a second build from the same Debian root gives the same
# digest, and a next release's the same base layer.
say "[2/3] reproducible: make image-repro (two more builds from the cached Debian root)"
deploy/image/check-reproducible.sh "$OUT"
say "[3/3] the image under runc and docker (deploy/imagetest; a minute or two)"
# The tests' own status is the script's: a filter that matched nothing, or
# `|| true`, must not hide a failure (it did: PIPESTATUS was true's).
set +e
go test -tags imagetest -count=1 -timeout 15m -v ./deploy/imagetest -args -image "$PWD/$OUT" -bin "$PWD/bin" 2>&1 |
	grep -v '^        time=' | grep -E -- '^(=== RUN|--- |PASS|FAIL|ok|    )'
rc=${PIPESTATUS[0]}
set -e
exit "$rc"
