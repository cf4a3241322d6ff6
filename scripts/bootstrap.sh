#!/usr/bin/env bash
# Idempotent set-up of a fresh Debian/Ubuntu machine for INA Testbed:
# the Debian packages the emulation needs, and a virtualenv (.venv) with the
# project and its Python dependencies (with --test, the test tools too).
# Safe to run again: it installs only what is missing and reinstalls the
# project only when setup.py changed.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: run as root (sudo): Mininet needs root, and so do the Debian packages" >&2
    exit 1
fi

# clang, bpftool and libbpf's headers build and register the project's BPF DCTCP where the kernel has none
# (testbed/traffic/dctcp_bpf.py: PA-ATP's background traffic runs DCTCP).
debian_packages=(mininet iproute2 ethtool bridge-utils iftop iputils-ping procps psmisc git python3 python3-venv
                 nftables clang bpftool libbpf-dev)
# --test (scripts/test.sh): also what only the tests use: headless Chromium and its WebDriver, which
# load the HTML reports (tests/browser).
if [ "${1:-}" = "--test" ]; then
    debian_packages+=(chromium chromium-driver)
fi
missing=()
for pkg in "${debian_packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    echo "bootstrap: creating .venv with $($python --version 2>&1)"
    "$python" -m venv .venv
fi
# The stamp holds setup.py's hash, and " test" once the test tools (Selenium, Ray, scapy, MkDocs ...) are in:
# the quickstart installs the project alone, the test command adds them.
stamp=.venv/.inatb-installed
wanted=$(sha256sum setup.py | cut -d' ' -f1)
installed=$(cat "$stamp" 2>/dev/null || true)
if [ "${1:-}" = "--test" ]; then
    project=".[test]"
    wanted="$wanted test"
else
    project="."
fi
if [ "$installed" != "$wanted" ] && [ "$installed" != "$wanted test" ]; then
    echo "bootstrap: installing the project and its Python dependencies into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e "$project"
    echo "$wanted" > "$stamp"
fi
