#!/usr/bin/env bash
# Builds the image again and fails unless its digest and its docker tarball
# are byte for byte those of the build in REF (default bin/image; built
# first when missing). The Debian root comes from the cache both times, so
# this checks everything make image does after debootstrap; IMAGE_FRESH=1
# builds the root again too (then the packages must not have changed in the
# mirror between the two builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
REF=${1:-bin/image}
say() { printf 'image-repro: %s\n' "$*" >&2; }
[ -f "$REF/digest" ] || deploy/image/build.sh "$REF"
again=$(mktemp -d /var/tmp/shellctl-image-again.XXXXXX)
trap 'rm -rf "$again"' EXIT
t0=$(date +%s.%N)
deploy/image/build.sh "$again/out"
t1=$(date +%s.%N)
a=$(cat "$REF/digest")
b=$(cat "$again/out/digest")
say "first build:  $a"
say "second build: $b ($(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s)"
if [ "$a" != "$b" ]; then
	say "NOT reproducible: the digests differ"
	exit 1
fi
cmp -s "$REF/shellctl-image.tar" "$again/out/shellctl-image.tar" || { say "NOT reproducible: the docker tarballs differ"; exit 1; }
cmp -s "$REF/packages.lock" "$again/out/packages.lock" || { say "the package versions differ"; exit 1; }
say "reproducible: same digest, same docker tarball"
