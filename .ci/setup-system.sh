#!/usr/bin/env bash
# System packages and images the test suite needs; run as root by CI before `make test`.
# Idempotent: installs only what is missing and keeps an existing base image.
#   bubblewrap   the bwrap world backend
#   debootstrap  scripts/offline-base-image.sh (the Docker world's base, with no registry)
#   chromium     the HTML report tests (they expect /usr/bin/chromium)
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "[setup-system] $*"; }

[ "$(id -u)" -eq 0 ] || { echo "[setup-system] error: run as root" >&2; exit 1; }

packages=(bubblewrap debootstrap chromium)
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if [ "${#missing[@]}" -gt 0 ]; then
    say "installing ${missing[*]}"
    # Wait for a dpkg lock another apt holds (an unattended upgrade) instead of failing.
    apt-get -o DPkg::Lock::Timeout=600 update -q
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q \
        --no-install-recommends "${missing[@]}"
else
    say "packages present: ${packages[*]}"
fi

if command -v docker >/dev/null && docker version >/dev/null 2>&1; then
    scripts/offline-base-image.sh
else
    say "no Docker engine answers; skipping the base image (Docker world tests will report it)"
fi
