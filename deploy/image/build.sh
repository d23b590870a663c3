#!/usr/bin/env bash
# make image: shellctl's container image, built without a daemon.
#
#   deploy/image/build.sh [OUT]      (default OUT: bin/image; run from the repo root, as root)
#
# 1. A Debian root by `debootstrap --variant=minbase` with the packages of
#    deploy/image/packages.txt, cached outside the repository (IMAGE_CACHE,
#    default /var/tmp/shellctl-image-cache) under a key of the package list,
#    suite, mirror and architecture: a second build skips it.
# 2. Two overlays. The base's: /etc files that must not come from the build
#    machine (hostname, hosts, resolv.conf) and the shadow file's dates set
#    to BASE_EPOCH's day. The application's: the static binaries of `make
#    build` in /usr/local/bin, user dify (uid and gid 10001,
#    HOME=/home/dify), an empty /workspace, the state dir /var/lib/shellctl
#    (0700, dify's).
# 3. ocibuild (deploy/image/ocibuild, its own Go module) writes two
#    reproducible layers — the base (the Debian root and its overlay, every
#    time BASE_EPOCH, so the same packages give the same layer whatever the
#    release) and the application (a few MB, every time SOURCE_DATE_EPOCH) —
#    and the image: OUT/oci (an OCI layout, ref "latest") and
#    OUT/shellctl-image.tar (for `docker load`), with OUT/digest,
#    OUT/packages.lock (every package's version) and OUT/build-info (the
#    layers' digests and sizes among others).
#
# It prints a line as each stage starts ("make image: …"), so a cold build's
# minutes of debootstrap are not silence.
#
# Environment: SOURCE_DATE_EPOCH (default: the last commit's time),
# BASE_EPOCH (the base layer's time, default 946684800, 2000-01-01: a fixed
# date rather than a commit's, since the base must not change with a
# release),
# DEBIAN_SUITE (default: this machine's), DEBIAN_MIRROR (default: this
# machine's apt source for Debian, else debootstrap's own default),
# IMAGE_CACHE, IMAGE_REF (default shellctl:latest), IMAGE_FRESH=1 (build the
# Debian root again, ignoring the cache).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-bin/image}
started=$(date +%s.%N)
say() { printf 'make image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap makes device nodes and owners; the image's files are owned by root and by uid 10001): run it as root"
say "[1/5] checking the binaries of make build and the tools"
for b in shellctl shellctl-runner shellctl-stage shellctl-screen shellctl-runner-exit shellctl-sanitize-pty dify-agent; do
	[ -x "bin/$b" ] || die "bin/$b is missing: run make build first (make image does)"
done
if ! command -v debootstrap >/dev/null 2>&1; then
	command -v apt-get >/dev/null 2>&1 || die "debootstrap is not installed and there is no apt-get to install it"
	say "installing debootstrap from Debian's packages"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
export SOURCE_DATE_EPOCH
BASE_EPOCH=${BASE_EPOCH:-946684800}
case $BASE_EPOCH in '' | *[!0-9]*) die "BASE_EPOCH=$BASE_EPOCH is not a number of seconds since 1970 (default 946684800)" ;; esac
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
ARCH=$(dpkg --print-architecture)
SUITE=${DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$SUITE" ] || die "cannot tell this machine's Debian suite: set DEBIAN_SUITE (e.g. bookworm)"

# The mirror this machine's apt uses for Debian (deb822 or one-line form).
host_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f"
	done | head -n1
	if [ -f /etc/apt/sources.list ]; then
		awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\// && $i ~ /\/debian\/?$/) { print $i; exit } }' /etc/apt/sources.list
	fi
}
MIRROR=${DEBIAN_MIRROR:-$(host_mirror | head -n1)}

PKGS=$(grep -v '^[[:space:]]*\(#\|$\)' deploy/image/packages.txt | sort -u | paste -sd, -)
[ -n "$PKGS" ] || die "deploy/image/packages.txt lists no package"
CACHE=${IMAGE_CACHE:-/var/tmp/shellctl-image-cache}
KEY=$(printf '%s\n' "minbase" "$SUITE" "$ARCH" "$MIRROR" "$PKGS" | sha256sum | cut -c1-16)
ROOT="$CACHE/$KEY/rootfs"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ "${IMAGE_FRESH:-}" = 1 ] && [ -d "$ROOT" ]; then
	say "IMAGE_FRESH=1: building the Debian root again"
	rm -rf "$CACHE/$KEY"
fi
if [ ! -d "$ROOT" ]; then
	say "[2/5] debootstrap --variant=minbase $SUITE ($ARCH) with: $PKGS (cached as $CACHE/$KEY; a few minutes, once)"
	tmp="$CACHE/$KEY.tmp"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	t0=$(date +%s)
	debootstrap --variant=minbase --arch="$ARCH" --include="$PKGS" "$SUITE" "$tmp/rootfs" ${MIRROR:+"$MIRROR"} >"$tmp/debootstrap.log" 2>&1 ||
		{ tail -n 30 "$tmp/debootstrap.log" >&2; die "debootstrap failed (log: $tmp/debootstrap.log)"; }
	# The downloaded packages and apt's lists are no part of the image.
	rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
	chroot "$tmp/rootfs" dpkg-query -W -f '${Package}=${Version}\n' | LC_ALL=C sort >"$tmp/packages.lock"
	mv "$tmp" "$CACHE/$KEY"
	say "Debian root built in $(($(date +%s) - t0)) s"
else
	say "[2/5] Debian root from the cache: $ROOT"
fi

say "[3/5] the overlays: the base's /etc files; shellctl's binaries, user dify and its directories"
work=$(mktemp -d /var/tmp/shellctl-image-work.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The base overlay: what the base layer puts instead of the root's files.
# Nothing here may depend on the release (no SOURCE_DATE_EPOCH): the base
# layer must stay the same bytes for the same packages.
bov="$work/base-overlay"
mkdir -p "$bov/etc"
days=$((BASE_EPOCH / 86400))
# The day of the last password change is the build's day in Debian's
# shadow file: BASE_EPOCH's day instead, for every account.
awk -F: -v OFS=: -v d="$days" '{ if ($3 != "") $3 = d; print }' "$ROOT/etc/shadow" >"$work/shadow"
cp -p "$ROOT/etc/shadow" "$bov/etc/shadow" && cat "$work/shadow" >"$bov/etc/shadow"
# Not the build machine's (debootstrap copies its hostname and resolver).
echo shellctl >"$bov/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$bov/etc/hosts"
: >"$bov/etc/resolv.conf"
chmod 0644 "$bov/etc/hostname" "$bov/etc/hosts" "$bov/etc/resolv.conf"

# The application overlay: the layer a release changes.
ov="$work/overlay"
mkdir -p "$ov/usr/local/bin" "$ov/etc"
for b in shellctl shellctl-runner shellctl-stage shellctl-screen shellctl-runner-exit shellctl-sanitize-pty dify-agent; do
	install -m 0755 -o 0 -g 0 "bin/$b" "$ov/usr/local/bin/$b"
done
for f in passwd group gshadow; do cp -p "$ROOT/etc/$f" "$ov/etc/$f"; done
cp -p "$bov/etc/shadow" "$ov/etc/shadow"
grep -q '^dify:' "$ov/etc/passwd" && die "the Debian root already has a user dify"
echo 'dify:x:10001:10001:dify:/home/dify:/bin/bash' >>"$ov/etc/passwd"
echo 'dify:x:10001:' >>"$ov/etc/group"
echo "dify:!:$days:0:99999:7:::" >>"$ov/etc/shadow"
echo 'dify:!::' >>"$ov/etc/gshadow"
install -d -m 0750 -o 10001 -g 10001 "$ov/home/dify"
install -d -m 0755 -o 10001 -g 10001 "$ov/workspace"
mkdir -p "$ov/var/lib"
install -d -m 0700 -o 10001 -g 10001 "$ov/var/lib/shellctl"

say "[4/5] building ocibuild (deploy/image/ocibuild)"
(cd deploy/image && CGO_ENABLED=0 go build -trimpath -o "$work/ocibuild" ./ocibuild)
rm -rf "$OUT"
mkdir -p "$OUT"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
say "[5/5] writing the layers (base: the Debian root; application: the binaries) and the image"
digest=$("$work/ocibuild" --root "$ROOT" --base-overlay "$bov" --base-epoch "$BASE_EPOCH" \
	--overlay "$ov" --epoch "$SOURCE_DATE_EPOCH" \
	--ref "${IMAGE_REF:-shellctl:latest}" --base-layer "$work/base.tar.gz" --layer "$work/app.tar.gz" \
	--info "$work/layers" \
	--layout "$OUT/oci" --tarball "$OUT/shellctl-image.tar" \
	--empty dev --empty proc --empty sys --empty run --empty tmp --empty var/tmp \
	--empty var/log --empty var/cache/apt --empty var/lib/apt/lists \
	--drop 'etc/*-' --drop 'var/lib/dpkg/*-old' --drop 'var/cache/debconf/*-old' \
	--drop var/cache/ldconfig/aux-cache --drop etc/.pwd.lock --drop etc/machine-id \
	--drop 'etc/ssh/ssh_host_*' --drop 'root/.*_history' --drop debootstrap \
	--user 10001:10001 --workdir /workspace \
	--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	--env HOME=/home/dify --env USER=dify --env LANG=C.UTF-8 \
	--entrypoint /usr/local/bin/shellctl \
	--cmd serve --cmd --listen --cmd 0.0.0.0:5004 --cmd --state-dir --cmd /var/lib/shellctl \
	--port 5004/tcp \
	--healthcheck /usr/local/bin/shellctl --healthcheck healthcheck --healthcheck 127.0.0.1:5004 \
	--health-interval 30s --health-timeout 5s --health-start-period 10s --health-retries 3 \
	--label org.opencontainers.image.title=shellctl \
	--label "org.opencontainers.image.version=$VERSION" \
	--label "org.opencontainers.image.revision=$COMMIT" \
	--label "org.opencontainers.image.created=$created" \
	--label "org.opencontainers.image.base.name=debian:$SUITE (debootstrap --variant=minbase)")
echo "$digest" >"$OUT/digest"
cp "$CACHE/$KEY/packages.lock" "$OUT/packages.lock"
{
	echo "digest=$digest"
	echo "version=$VERSION"
	echo "commit=$COMMIT"
	echo "source_date_epoch=$SOURCE_DATE_EPOCH"
	echo "suite=$SUITE"
	echo "arch=$ARCH"
	echo "base_epoch=$BASE_EPOCH"
	echo "root_cache_key=$KEY"
	cat "$work/layers"
} >"$OUT/build-info"
took=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
mb() { awk -v n="$(sed -n "s/^$1=//p" "$work/layers")" 'BEGIN { printf "%.1f MB", n / 1e6 }'; }
say "base layer $(sed -n 's/^base_layer_digest=//p' "$work/layers") ($(mb base_layer_bytes)), application layer $(mb app_layer_bytes)"
say "image $digest in $OUT (oci/, shellctl-image.tar, packages.lock) in ${took} s"
