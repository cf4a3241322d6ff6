"""The VM's scripts (vagrant/): they parse, their settings are the ones vagrant/README.md documents, the
Vagrant box is the OS provisioning accepts, and the local VM refuses to put its image in the repository."""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VAGRANT = REPO / "vagrant"
SCRIPTS = ["provision.sh", "local-vm.sh"]
SETTING = re.compile(r"\bINATB_[A-Z0-9_]+\b")


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_vm_scripts_parse(script):
    checked = subprocess.run(["bash", "-n", str(VAGRANT / script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_every_setting_the_vm_files_read_is_documented_in_the_vm_readme():
    readme = (VAGRANT / "README.md").read_text()
    read = set()
    for name in SCRIPTS + ["Vagrantfile"]:
        read |= set(SETTING.findall((VAGRANT / name).read_text()))
    assert read >= {"INATB_BOX", "INATB_P4_TOOLCHAIN", "INATB_VM_DIR", "INATB_VM_ACCEL"}
    assert sorted(read - set(SETTING.findall(readme))) == []


def test_the_default_box_is_the_debian_12_that_provisioning_accepts():
    vagrantfile = (VAGRANT / "Vagrantfile").read_text()
    assert 'ENV.fetch("INATB_BOX", "debian/bookworm64")' in vagrantfile
    provision = (VAGRANT / "provision.sh").read_text()
    assert '[ "${ID:-}" = "debian" ] && [ "${VERSION_ID:-}" = "12" ]' in provision
    assert "home:/p4lang/Debian_12/" in provision


def _local_vm(*args, **env):
    return subprocess.run(["bash", str(VAGRANT / "local-vm.sh"), *args], capture_output=True, text=True,
                          env={**os.environ, **env})


def test_the_local_vm_refuses_a_vm_directory_inside_the_repository():
    refused = _local_vm("stop", INATB_VM_DIR=str(REPO / "vm"))
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"local-vm: ERROR: INATB_VM_DIR={REPO / 'vm'} is inside the repository; images do not belong in git"]
    assert not (REPO / "vm").exists()


def test_the_local_vm_names_its_commands_when_given_an_unknown_one(tmp_path):
    refused = _local_vm("start", INATB_VM_DIR=str(tmp_path))
    assert refused.returncode == 1
    assert len(refused.stderr.splitlines()) == 1
    assert "build|boot|provision [-t TARBALL]|ssh [COMMAND]|stop|box" in refused.stderr
