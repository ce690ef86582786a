#!/usr/bin/env bash
# Build the world's base image without any container registry.
#
#   scripts/offline-base-image.sh [--force] [TAG]      (as root; TAG defaults to nodeval-base:<suite>)
#
# debootstrap installs a minimal Debian (variant minbase, plus python3) from the Debian
# mirror this machine's apt already uses, and `docker import` turns that directory into
# an image. The world image (the top-level Dockerfile) is then built FROM it, so a
# machine that can reach Debian packages but no registry still gets Docker worlds.
# The mirror and suite are read from the machine's apt configuration at run time, so
# nothing machine-specific is written here. Idempotent: an existing TAG is kept unless
# --force is given.
set -euo pipefail

force=0
tag=""
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        -*) echo "unknown option: $arg (valid: --force, -h)" >&2; exit 2 ;;
        *) tag="$arg" ;;
    esac
done

say() { echo "[offline-base-image] $*"; }
die() { echo "[offline-base-image] error: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "debootstrap needs root; run this script as root"
command -v docker >/dev/null || die "the docker CLI is not installed"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "no Docker engine answers"

# The suite: the machine's own codename (a base that matches the host's packages).
machine_suite() {
    # shellcheck disable=SC1091
    (. /etc/os-release && echo "${VERSION_CODENAME:-}")
}

# The mirror: the first apt source that serves the suite itself (not -security or -updates).
# deb822 files first (Debian 12+), then the one-line format.
mirror_for_suite() {
    local suite="$1" file
    for file in /etc/apt/sources.list.d/*.sources; do
        [ -f "$file" ] || continue
        awk -v suite="$suite" '
            function flush() { if (uri != "" && has_suite) { print uri; found = 1; exit } uri = ""; has_suite = 0 }
            /^[[:space:]]*$/ { flush(); next }
            /^[[:space:]]*#/ { next }
            tolower($1) == "uris:" { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) has_suite = 1 }
            END { if (!found) flush() }
        ' "$file" | head -n1
    done | head -n1
}

mirror_from_list() {
    local suite="$1"
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        awk -v suite="$suite" '
            $1 == "deb" {
                n = 2
                if ($n ~ /^\[/) { while ($n !~ /\]$/) n++; n++ }
                if ($(n + 1) == suite) { print $n; exit }
            }'
}

suite="$(machine_suite)"
[ -n "$suite" ] || die "cannot read VERSION_CODENAME from /etc/os-release"
mirror="$(mirror_for_suite "$suite")"
[ -n "$mirror" ] || mirror="$(mirror_from_list "$suite")"
[ -n "$mirror" ] || die "no apt source for suite '$suite' in /etc/apt/sources.list{,.d/*}"
tag="${tag:-nodeval-base:$suite}"

if [ "$force" -eq 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
    say "image $tag already exists; nothing to do (use --force to rebuild)"
    exit 0
fi

rootfs="$(mktemp -d -t nodeval-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
start=$(date +%s)

say "debootstrap --variant=minbase --include=python3 $suite from the machine's apt mirror into $rootfs"
debootstrap --variant=minbase --include=python3 "$suite" "$rootfs" "$mirror"

say "trimming apt caches and lists"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log

say "docker import as $tag"
tar --numeric-owner -C "$rootfs" -c . |
    docker import --change 'CMD ["/bin/sh"]' --change 'ENV LANG=C.UTF-8' - "$tag" >/dev/null

say "done: $tag ($(docker image inspect --format '{{.Size}}' "$tag") bytes) in $(( $(date +%s) - start ))s"
if [ "$tag" != "nodeval-base:bookworm" ]; then
    say "the world image looks for nodeval-base:bookworm by default; export NODEVAL_BASE_IMAGE=$tag"
fi
