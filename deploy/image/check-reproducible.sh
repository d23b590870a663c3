#!/usr/bin/env bash
# make image-repro: builds the image again and fails unless
#  1. with the same inputs, its digest and its docker tarball are byte for
#     byte those of the build in REF (default bin/image; built first when
#     missing);
#  2. as a next release would (another SOURCE_DATE_EPOCH and VERSION), its
#     base layer has the same digest — a release re-ships only the
#     application layer — while the application layer and the image differ.
# The Debian root comes from the cache every time, so this checks
# everything make image does after debootstrap; IMAGE_FRESH=1 builds the
# root again too (then the packages must not have changed in the mirror
# between the builds).
set -euo pipefail
cd "$(dirname "$0")/../.."
REF=${1:-bin/image}
say() { printf 'image-repro: %s\n' "$*" >&2; }
info() { sed -n "s/^$2=//p" "$1/build-info"; }
if [ ! -f "$REF/digest" ]; then
	say "[1/3] no image in $REF: building it"
	deploy/image/build.sh "$REF"
fi
again=$(mktemp -d /var/tmp/shellctl-image-again.XXXXXX)
trap 'rm -rf "$again"' EXIT
# The same inputs as REF's build, whatever the checkout says now.
export SOURCE_DATE_EPOCH
SOURCE_DATE_EPOCH=$(info "$REF" source_date_epoch)
export VERSION COMMIT
VERSION=$(info "$REF" version)
COMMIT=$(info "$REF" commit)
say "[2/3] building again with the same inputs (SOURCE_DATE_EPOCH=$SOURCE_DATE_EPOCH VERSION=$VERSION)"
t0=$(date +%s.%N)
deploy/image/build.sh "$again/same"
t1=$(date +%s.%N)
a=$(cat "$REF/digest")
b=$(cat "$again/same/digest")
say "first build:  $a"
say "second build: $b ($(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s)"
if [ "$a" != "$b" ]; then
	say "NOT reproducible: the digests differ"
	exit 1
fi
cmp -s "$REF/shellctl-image.tar" "$again/same/shellctl-image.tar" || { say "NOT reproducible: the docker tarballs differ"; exit 1; }
cmp -s "$REF/packages.lock" "$again/same/packages.lock" || { say "the package versions differ"; exit 1; }
say "reproducible: same digest, same docker tarball"

say "[3/3] building as a next release would (SOURCE_DATE_EPOCH one day later, VERSION $VERSION-next)"
SOURCE_DATE_EPOCH=$((SOURCE_DATE_EPOCH + 86400)) VERSION="$VERSION-next" deploy/image/build.sh "$again/next"
base=$(info "$REF" base_layer_digest)
base2=$(info "$again/next" base_layer_digest)
app=$(info "$REF" app_layer_digest)
app2=$(info "$again/next" app_layer_digest)
say "base layer:        $base then $base2"
say "application layer: $app then $app2"
[ -n "$base" ] || { say "no base_layer_digest in $REF/build-info: an image of before the two layers? run make image"; exit 1; }
if [ "$base" != "$base2" ]; then
	say "NOT stable: a release changed the base layer (it must depend on the packages only)"
	exit 1
fi
if [ "$app" = "$app2" ] || [ "$(cat "$again/next/digest")" = "$a" ]; then
	say "the next release's application layer or image is the same as this one's: its time is not in it"
	exit 1
fi
say "a release re-ships only the application layer ($(info "$again/next" app_layer_bytes) bytes; the base's $(info "$REF" base_layer_bytes) stay)"
