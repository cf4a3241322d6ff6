#!/usr/bin/env bash
# Provision a Debian 12 (bookworm) VM for INA Testbed, the OS CI tests (run as root by `vagrant up`, or by
# vagrant/local-vm.sh provision; safe to run again):
#   1. p4c and bmv2: from a p4 toolchain bundle when INATB_P4_TOOLCHAIN names one (a tarball holding
#      p4-toolchain/{bin,lib,libexec,runtime-apt-packages.txt}), otherwise p4lang's Debian 12 packages
#      p4lang-p4c and p4lang-bmv2 (repository home:p4lang on the openSUSE build service);
#   2. the project: scripts/bootstrap.sh (Debian packages, Mininet, .venv with the project), plus the
#      [test,bmv2] extras;
#   3. inatb doctor, which also compiles p4/ina.p4 with the installed p4c;
#   4. the packet suite on bmv2, which checks the installed p4c and bmv2 against the tested ones.
# Fails with a message saying what is missing and what to do.
#
# Usage: [INATB_P4_TOOLCHAIN=TARBALL] provision.sh [PROJECT_DIR] [OWNER]
set -euo pipefail

project_dir=${1:-/home/vagrant/ina-testbed}
owner=${2:-vagrant}
toolchain_tarball=${INATB_P4_TOOLCHAIN:-}
toolchain_dir=/opt/p4-toolchain       # where a bundle is unpacked; its tools are linked into /usr/local/bin
export DEBIAN_FRONTEND=noninteractive

fail() {
    echo "provision: ERROR: $*" >&2
    exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root (vagrant runs this script privileged)"
[ -r /etc/os-release ] || fail "/etc/os-release missing: not a Debian 12 VM"
# shellcheck disable=SC1091
. /etc/os-release
[ "${ID:-}" = "debian" ] && [ "${VERSION_ID:-}" = "12" ] \
    || fail "this VM runs ${PRETTY_NAME:-an unknown OS}; provisioning supports Debian 12 (bookworm), the OS CI tests (use the debian/bookworm64 box)"
[ -f "$project_dir/setup.py" ] || fail "project not found in $project_dir (the Vagrantfile syncs the working tree there)"

echo "provision: apt prerequisites"
apt-get update -q
apt-get install -y -q --no-install-recommends ca-certificates curl gnupg

# Not pinned: p4lang's repository carries only its current build, so "=VERSION" would break when it
# moves on. The project is tested with bmv2 1.15.5 and p4c 1.2.5.16 (testbed/doctor.py's
# TESTED_BMV2_VERSION, TESTED_P4C_VERSION); inatb doctor, below, prints the installed versions next to them.
install_from_p4lang() {
    local repo="https://download.opensuse.org/repositories/home:/p4lang/Debian_12/"
    local list=/etc/apt/sources.list.d/home:p4lang.list key=/etc/apt/trusted.gpg.d/home_p4lang.gpg
    if [ ! -s "$key" ] || [ ! -f "$list" ]; then
        echo "provision: adding p4lang's repository for Debian 12"
        curl -fsSL "${repo}Release.key" -o /tmp/p4lang-release.key \
            || fail "cannot fetch ${repo}Release.key (network down, or no access to download.opensuse.org: give a toolchain bundle with INATB_P4_TOOLCHAIN instead)"
        gpg --dearmor < /tmp/p4lang-release.key > "$key"
        echo "deb ${repo} /" > "$list"
        apt-get update -q
    fi
    echo "provision: installing p4c and bmv2 (p4lang-p4c, p4lang-bmv2)"
    apt-get install -y -q --no-install-recommends p4lang-p4c p4lang-bmv2 \
        || fail "apt-get could not install p4lang-p4c p4lang-bmv2 from ${repo} (see the apt error above)"
}

# A bundle: unpacked into $toolchain_dir, the Debian packages its binaries link against installed, its
# wrappers (bin/, which find the bundle's libraries themselves) linked into /usr/local/bin so that root,
# sudo and the tests find them on the default PATH.
install_from_bundle() {
    [ -f "$toolchain_tarball" ] || fail "INATB_P4_TOOLCHAIN=$toolchain_tarball: no such file"
    echo "provision: installing p4c and bmv2 from the bundle $toolchain_tarball into $toolchain_dir"
    local unpacked
    unpacked=$(mktemp -d)
    tar -xzf "$toolchain_tarball" -C "$unpacked" \
        || fail "INATB_P4_TOOLCHAIN=$toolchain_tarball: not a gzip tarball"
    [ -f "$unpacked/p4-toolchain/runtime-apt-packages.txt" ] && [ -d "$unpacked/p4-toolchain/bin" ] \
        || fail "INATB_P4_TOOLCHAIN=$toolchain_tarball: expected p4-toolchain/bin and p4-toolchain/runtime-apt-packages.txt inside"
    rm -rf "$toolchain_dir"
    mv "$unpacked/p4-toolchain" "$toolchain_dir"
    rm -rf "$unpacked"
    local runtime_packages
    mapfile -t runtime_packages < <(grep -Ev '^[[:space:]]*(#|$)' "$toolchain_dir/runtime-apt-packages.txt")
    apt-get install -y -q --no-install-recommends "${runtime_packages[@]}" \
        || fail "apt-get could not install the bundle's runtime packages (${runtime_packages[*]})"
    local tool
    for tool in "$toolchain_dir"/bin/*; do
        [ "$(basename "$tool")" = env.sh ] || ln -sf "$tool" "/usr/local/bin/$(basename "$tool")"
    done
}

if [ -n "$toolchain_tarball" ]; then
    install_from_bundle
else
    install_from_p4lang
fi
for binary in p4c simple_switch; do
    command -v "$binary" > /dev/null || fail "$binary missing after installing p4c and bmv2"
done

echo "provision: the project in $project_dir"
cd "$project_dir"
bash scripts/bootstrap.sh
command -v mnexec > /dev/null || fail "mnexec missing after scripts/bootstrap.sh installed mininet"
[ -x .venv/bin/python ] || fail "no virtualenv in $project_dir/.venv after the bootstrap"
.venv/bin/python -m pip install -q -e '.[test,bmv2]' || fail "pip could not install the project's [bmv2] extra"
chown -R "$owner:$owner" "$project_dir" 2>/dev/null || true

echo "provision: inatb doctor"
doctor_status=0
doctor_report=$(.venv/bin/inatb doctor) || doctor_status=$?
echo "$doctor_report"
[ "$doctor_status" -eq 0 ] || fail "inatb doctor reports a missing requirement (above)"
for check in "bmv2 simple_switch" "p4c" "p4/ina.p4 compiles"; do
    grep -q "^ok .*${check}:" <<< "$doctor_report" || fail "inatb doctor: '${check}' is not ok; the bmv2 target cannot run"
done

# The installed p4c and bmv2 are checked against the tested ones by the tests CI runs on them: the
# whole packet suite on bmv2 (INATB_REQUIRE_BMV2=1: a bmv2 case that cannot run fails, never skips).
# doctor, above, printed both versions; whatever they are, a VM whose bmv2 or p4c behaves differently
# from the tested pair fails here, naming the case.
echo "provision: the packet suite on bmv2 (what CI checks on bmv2 1.15.5 and p4c 1.2.5.16)"
INATB_REQUIRE_BMV2=1 .venv/bin/python -m pytest tests/dataplane -q -k bmv2 -p no:cacheprovider \
    || fail "the packet suite fails on this VM's p4c/bmv2 (versions above, next to the tested ones): see the failing cases"
echo "provision: done. Try: cd $project_dir && sudo .venv/bin/inatb run scenarios/quickstart.yaml --target bmv2"
