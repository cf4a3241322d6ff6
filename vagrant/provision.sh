#!/usr/bin/env bash
# Provision an Ubuntu 22.04 VM for INA Testbed (run as root by `vagrant up`; safe to run again):
#   1. p4lang's Ubuntu repository (openSUSE build service), then p4lang-p4c, p4lang-bmv2 and mininet;
#   2. the project: scripts/bootstrap.sh (Debian packages, .venv with the project), plus the [bmv2] extra;
#   3. inatb doctor, which also compiles p4/ina.p4 with the installed p4c;
#   4. the packet suite on bmv2, which checks the installed p4c and bmv2 against the tested ones.
# Fails with a message saying what is missing and what to do.
#
# Usage: provision.sh [PROJECT_DIR] [OWNER]
set -euo pipefail

project_dir=${1:-/home/vagrant/ina-testbed}
owner=${2:-vagrant}
export DEBIAN_FRONTEND=noninteractive

fail() {
    echo "provision: ERROR: $*" >&2
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root (vagrant runs this script privileged)"
[ -r /etc/os-release ] || fail "/etc/os-release missing: not an Ubuntu VM"
# shellcheck disable=SC1091
. /etc/os-release
[ "${ID:-}" = "ubuntu" ] || fail "this VM runs ${ID:-an unknown OS}; p4lang packages exist for Ubuntu only (use the bento/ubuntu-22.04 box)"
[ -f "$project_dir/setup.py" ] || fail "project not found in $project_dir (the Vagrantfile syncs the working tree there)"

p4lang_repo="https://download.opensuse.org/repositories/home:/p4lang/xUbuntu_${VERSION_ID}/"
p4lang_list=/etc/apt/sources.list.d/home:p4lang.list
p4lang_key=/etc/apt/trusted.gpg.d/home_p4lang.gpg

echo "provision: apt prerequisites"
apt-get update -q
apt-get install -y -q --no-install-recommends ca-certificates curl gnupg

if [ ! -s "$p4lang_key" ] || [ ! -f "$p4lang_list" ]; then
    echo "provision: adding p4lang's repository for Ubuntu ${VERSION_ID}"
    curl -fsSL "${p4lang_repo}Release.key" -o /tmp/p4lang-release.key \
        || fail "cannot fetch ${p4lang_repo}Release.key: p4lang publishes no packages for Ubuntu ${VERSION_ID} there, or the network is down"
    gpg --dearmor < /tmp/p4lang-release.key > "$p4lang_key"
    echo "deb ${p4lang_repo} /" > "$p4lang_list"
    apt-get update -q
fi

echo "provision: installing p4c, bmv2 and mininet"
# Not pinned: p4lang's repository carries only its current build, so "=VERSION" would break when it
# moves on. The project is tested with bmv2 1.15.5 and p4c 1.2.5.16 (testbed/doctor.py's
# TESTED_BMV2_VERSION, TESTED_P4C_VERSION); inatb doctor, below, prints the installed versions next to them.
packages=(p4lang-p4c p4lang-bmv2 mininet python3-venv python3-pip git)
if ! apt-get install -y -q --no-install-recommends "${packages[@]}"; then
    missing=()
    for pkg in "${packages[@]}"; do
        apt-cache show "$pkg" > /dev/null 2>&1 || missing+=("$pkg")
    done
    unknown="${missing[*]}"
    fail "apt-get could not install ${packages[*]}; not in any repository: ${unknown:-none, see the apt error above}"
fi
for binary in p4c simple_switch mnexec; do
    command -v "$binary" > /dev/null || fail "$binary missing after installing ${packages[*]}"
done

echo "provision: the project in $project_dir"
cd "$project_dir"
if [ -x scripts/bootstrap.sh ] || [ -f scripts/bootstrap.sh ]; then
    bash scripts/bootstrap.sh
else
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[test]'
fi
[ -x .venv/bin/python ] || fail "no virtualenv in $project_dir/.venv after the bootstrap"
.venv/bin/python -m pip install -q -e '.[test,bmv2]' || fail "pip could not install the project's [bmv2] extra"
chown -R "$owner:$owner" "$project_dir" 2>/dev/null || true

echo "provision: inatb doctor"
if ! .venv/bin/inatb doctor; then
    fail "inatb doctor reports a missing requirement (above)"
fi
for check in "bmv2 simple_switch" "p4c" "p4/ina.p4 compiles"; do
    .venv/bin/inatb doctor | grep -q "^ok .*${check}:" || fail "inatb doctor: '${check}' is not ok; the bmv2 target cannot run"
done

# The installed p4c and bmv2 are checked against the tested ones by the tests CI runs on them: the
# whole packet suite on bmv2 (INATB_REQUIRE_BMV2=1: a bmv2 case that cannot run fails, never skips).
# doctor, above, printed both versions; whatever they are, a VM whose bmv2 or p4c behaves differently
# from the tested pair fails here, naming the case.
echo "provision: the packet suite on bmv2 (what CI checks on bmv2 1.15.5 and p4c 1.2.5.16)"
INATB_REQUIRE_BMV2=1 .venv/bin/python -m pytest tests/dataplane -q -k bmv2 -p no:cacheprovider \
    || fail "the packet suite fails on this VM's p4c/bmv2 (versions above, next to the tested ones): see the failing cases"
echo "provision: done. Try: cd $project_dir && sudo .venv/bin/inatb run scenarios/quickstart.yaml --target bmv2"
