#!/usr/bin/env bash
# A local Debian 12 VM for INA Testbed without Vagrant or a downloaded box: the image is built from
# Debian's package archive alone (mmdebstrap), booted with QEMU/KVM on user-mode networking (no bridge,
# no tap: the host's network is left alone) and driven over ssh on a forwarded localhost port. It runs
# the same vagrant/provision.sh as `vagrant up`. See vagrant/README.md.
#
# Usage: local-vm.sh COMMAND [ARGS]
#   build            build the image (Debian 12, user vagrant, sshd, GRUB) into the VM directory
#   boot             start the VM in the background (its serial console goes to console.log)
#   provision [-t TARBALL]
#                    copy the working tree into the VM and run vagrant/provision.sh there as root;
#                    -t TARBALL (or INATB_P4_TOOLCHAIN) hands it a p4 toolchain bundle instead of
#                    p4lang's repository
#   ssh [COMMAND]    a shell (or COMMAND) in the VM as vagrant, in ~/ina-testbed when there
#   stop             shut the VM down (ACPI poweroff, killed after 120 s)
#   box              package the built image as a vagrant-libvirt box (inatb-debian12.box)
#
# Settings: INATB_VM_DIR (default /var/tmp/inatb-vm: image, key, logs; never inside the repository),
# INATB_VM_CPUS (2), INATB_VM_MEMORY_MB (4096), INATB_VM_SSH_PORT (2222), INATB_VM_DISK_GB (20),
# INATB_DEBIAN_MIRROR (http://deb.debian.org/debian), INATB_VM_CA_CERTS (extra CA certificates the VM
# trusts, for a TLS-intercepting proxy: see trust_ca_certs), INATB_VM_WHEELS (a directory of wheels the
# VM's pip prefers to PyPI's: see copy_wheels), INATB_VM_ACCEL (kvm where /dev/kvm is writable,
# otherwise tcg: QEMU emulates the CPU; set tcg where /dev/kvm cannot run a stock kernel, e.g. a PVM
# host whose KVM runs PVM guest kernels only). QEMU and the image build run under `nice -n 19`.
# Requirements on the host (Debian/Ubuntu package names): mmdebstrap qemu-system-x86 qemu-utils fdisk
# openssh-client rsync; /dev/kvm (without it QEMU emulates, many times slower). `build` runs as root.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
vm_dir=${INATB_VM_DIR:-/var/tmp/inatb-vm}
cpus=${INATB_VM_CPUS:-2}
memory_mb=${INATB_VM_MEMORY_MB:-4096}
ssh_port=${INATB_VM_SSH_PORT:-2222}
disk_gb=${INATB_VM_DISK_GB:-20}
if [ -w /dev/kvm ]; then accelerator=${INATB_VM_ACCEL:-kvm}; else accelerator=${INATB_VM_ACCEL:-tcg}; fi
mirror=${INATB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca_certs=${INATB_VM_CA_CERTS:-}
wheels=${INATB_VM_WHEELS:-}
wheels_in_vm=/var/tmp/inatb-wheels
security_mirror=${mirror%/debian}/debian-security
project_in_vm=/home/vagrant/ina-testbed
base_image=$vm_dir/debian12.qcow2      # the built image, what `box` packages (like debian/bookworm64)
vm_disk=$vm_dir/inatb-vm.qcow2         # the VM's disk: a copy-on-write layer over the base image
key=$vm_dir/ssh/id_ed25519
console_log=$vm_dir/console.log
pid_file=$vm_dir/qemu.pid

fail() {
    echo "local-vm: ERROR: $*" >&2
    exit 1
}

case $vm_dir/ in
    "$repo"/*) fail "INATB_VM_DIR=$vm_dir is inside the repository; images do not belong in git" ;;
esac

phase_started=0
phase() {
    phase_started=$(date +%s)
    echo "local-vm: $*"
}
phase_done() {
    echo "local-vm: $1 took $(( $(date +%s) - phase_started )) s"
}

ssh_options=(-i "$key" -p "$ssh_port" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
             -o LogLevel=ERROR -o ConnectTimeout=10 -o ServerAliveInterval=30)
vm_ssh() {
    ssh "${ssh_options[@]}" vagrant@127.0.0.1 "$@"
}

vm_running() {
    [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

wait_for_ssh() {
    local deadline=$(( $(date +%s) + ${1:-600} ))
    until vm_ssh true 2>/dev/null; do
        vm_running || fail "QEMU exited while booting; see $console_log"
        [ "$(date +%s)" -lt "$deadline" ] || fail "no ssh on 127.0.0.1:$ssh_port after ${1:-600} s; see $console_log"
        sleep 5
    done
}

# start_qemu DISK [EXTRA QEMU ARGS...]: KVM when /dev/kvm is usable, user-mode networking with the guest's
# sshd forwarded to 127.0.0.1:$ssh_port, serial console to console.log, daemonized.
start_qemu() {
    local disk=$1
    shift
    vm_running && fail "a VM already runs (pid $(cat "$pid_file")); local-vm.sh stop first"
    local accel
    case $accelerator in
        kvm) accel=(-machine accel=kvm -cpu host) ;;
        tcg) accel=(-machine accel=tcg -cpu max)
             echo "local-vm: no KVM: QEMU emulates the CPU (TCG), several times slower" >&2 ;;
        *) fail "INATB_VM_ACCEL=$accelerator: expected kvm or tcg" ;;
    esac
    : > "$console_log"
    nice -n 19 qemu-system-x86_64 "${accel[@]}" -smp "$cpus" -m "$memory_mb" \
        -drive "file=$disk,if=virtio,format=qcow2,discard=unmap" \
        -netdev "user,id=net0,hostfwd=tcp:127.0.0.1:${ssh_port}-:22" -device virtio-net-pci,netdev=net0 \
        -display none -serial "file:$console_log" -daemonize -pidfile "$pid_file" "$@"
}

stop_vm() {
    vm_running || { rm -f "$pid_file"; return 0; }
    local pid
    pid=$(cat "$pid_file")
    vm_ssh sudo systemctl poweroff 2>/dev/null || true
    for _ in $(seq 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$pid_file"; return 0; }
        sleep 1
    done
    echo "local-vm: the VM did not power off in 120 s; killing QEMU (pid $pid)" >&2
    kill "$pid" 2>/dev/null || true
    rm -f "$pid_file"
}

build() {
    [ "$(id -u)" -eq 0 ] || fail "build runs as root (mmdebstrap builds the root file system as root)"
    for tool in mmdebstrap mke2fs sfdisk qemu-img qemu-system-x86_64 ssh-keygen ssh; do
        command -v "$tool" > /dev/null || fail "$tool missing on the host (apt-get install mmdebstrap qemu-system-x86 qemu-utils fdisk openssh-client)"
    done
    vm_running && fail "a VM runs from $vm_dir; local-vm.sh stop first"
    mkdir -p "$vm_dir/ssh"
    [ -f "$key" ] || ssh-keygen -q -t ed25519 -N '' -C inatb-vm -f "$key"

    local rootfs=$vm_dir/rootfs raw=$vm_dir/debian12.raw
    rm -rf "$rootfs" "$raw" "$base_image" "$vm_disk"
    trap 'rm -rf "$rootfs" "$raw"' EXIT

    phase "building a Debian 12 root file system from $mirror (mmdebstrap)"
    # What a Vagrant base box has: a kernel, systemd, DHCP on eth0, sshd, sudo, rsync and a user vagrant
    # with password-less sudo. GRUB is installed from inside the VM on its first boot (below).
    local packages=linux-image-amd64,initramfs-tools,systemd-sysv,udev,kmod,ifupdown,isc-dhcp-client,
    packages+=openssh-server,sudo,rsync,ca-certificates,curl,gnupg,python3,procps,iproute2,less,zstd
    local pubkey
    pubkey=$(cat "$key.pub")
    nice -n 19 mmdebstrap --variant=minbase --include="$packages" \
        --customize-hook='echo inatb > "$1/etc/hostname"' \
        --customize-hook='printf "127.0.0.1 localhost\n127.0.1.1 inatb\n" > "$1/etc/hosts"' \
        --customize-hook='echo "LABEL=inatb-root / ext4 errors=remount-ro 0 1" > "$1/etc/fstab"' \
        --customize-hook='printf "auto lo\niface lo inet loopback\nauto eth0\niface eth0 inet dhcp\n" > "$1/etc/network/interfaces"' \
        --customize-hook='chroot "$1" useradd -m -s /bin/bash -G sudo vagrant' \
        --customize-hook='echo "vagrant ALL=(ALL) NOPASSWD: ALL" > "$1/etc/sudoers.d/vagrant"; chmod 440 "$1/etc/sudoers.d/vagrant"' \
        --customize-hook="mkdir -p \"\$1/home/vagrant/.ssh\"; echo '$pubkey' > \"\$1/home/vagrant/.ssh/authorized_keys\"" \
        --customize-hook='chmod 700 "$1/home/vagrant/.ssh"; chroot "$1" chown -R vagrant:vagrant /home/vagrant/.ssh' \
        --customize-hook='chroot "$1" systemctl enable ssh serial-getty@ttyS0.service' \
        --customize-hook='cp "$1"/boot/vmlinuz-* "$1/../vmlinuz"; cp "$1"/boot/initrd.img-* "$1/../initrd.img"' \
        bookworm "$rootfs" \
        "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
        "deb $security_mirror bookworm-security main"
    phase_done "root file system"

    phase "making a ${disk_gb} GB disk (one ext4 partition, labelled inatb-root)"
    truncate -s "${disk_gb}G" "$raw"
    echo 'start=2048, type=83, bootable' | sfdisk -q "$raw"
    local part_sectors=$(( disk_gb * 1024 * 1024 * 2 - 2048 ))
    # The file system is written straight into the partition from the directory: no loop device, no mount.
    nice -n 19 mke2fs -q -t ext4 -L inatb-root -d "$rootfs" -E offset=$(( 2048 * 512 )) "$raw" "$(( part_sectors / 2 ))k"
    nice -n 19 qemu-img convert -O qcow2 "$raw" "$base_image"
    rm -rf "$rootfs" "$raw"
    trap - EXIT
    phase_done "disk"

    phase "first boot (the image's kernel, given to QEMU): installing GRUB so that the disk boots by itself"
    qemu-img create -q -f qcow2 -F qcow2 -b "$base_image" "$vm_disk.first-boot"
    start_qemu "$vm_disk.first-boot" -kernel "$vm_dir/vmlinuz" -initrd "$vm_dir/initrd.img" \
        -append "root=LABEL=inatb-root ro console=ttyS0 net.ifnames=0"
    wait_for_ssh 1800
    vm_ssh 'set -e
        sudo mkdir -p /etc/default/grub.d
        echo "GRUB_CMDLINE_LINUX=\"console=tty0 console=ttyS0 net.ifnames=0\"" | sudo tee /etc/default/grub.d/inatb.cfg > /dev/null
        echo "grub-pc grub-pc/install_devices multiselect /dev/vda" | sudo debconf-set-selections
        sudo DEBIAN_FRONTEND=noninteractive apt-get update -q
        sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends grub-pc
        sudo grub-install /dev/vda
        sudo update-grub
        sudo apt-get clean
        sudo fstrim -a || true'
    stop_vm
    # The first boot's changes become the base image.
    nice -n 19 qemu-img commit -q "$vm_disk.first-boot"
    rm -f "$vm_disk.first-boot"
    phase_done "first boot"
    echo "local-vm: image $base_image; next: local-vm.sh boot && local-vm.sh provision"
}

boot() {
    [ -f "$base_image" ] || fail "no image in $vm_dir; run local-vm.sh build first (as root)"
    [ -f "$vm_disk" ] || qemu-img create -q -f qcow2 -F qcow2 -b "$base_image" "$vm_disk"
    phase "booting $vm_disk (GRUB on the disk; ssh on 127.0.0.1:$ssh_port)"
    start_qemu "$vm_disk"
    wait_for_ssh 1800
    phase_done "boot"
}

# INATB_VM_CA_CERTS: where the host reaches deb.debian.org and PyPI through a TLS-intercepting proxy, the
# VM must trust the proxy's CA too: these PEM certificates (a file, or a directory of *.crt) join the VM's
# system store, and pip is pointed at that store (pip reads its own bundle otherwise).
trust_ca_certs() {
    local certs=()
    if [ -d "$ca_certs" ]; then
        certs=("$ca_certs"/*.crt)
    else
        certs=("$ca_certs")
    fi
    [ -f "${certs[0]}" ] || fail "INATB_VM_CA_CERTS=$ca_certs: no PEM certificate (a .crt file, or a directory of them)"
    phase "trusting ${#certs[@]} extra CA certificate(s) in the VM"
    local cert
    for cert in "${certs[@]}"; do
        vm_ssh "sudo tee /usr/local/share/ca-certificates/inatb-$(basename "${cert%.crt}").crt > /dev/null" < "$cert"
    done
    vm_ssh 'sudo update-ca-certificates > /dev/null
        printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" | sudo tee /etc/pip.conf > /dev/null'
    phase_done "CA certificates"
}

# INATB_VM_WHEELS: the [test] extra pins torch, and PyPI's torch for x86-64 Linux is the CUDA build with
# several GB of NVIDIA libraries a VM without a GPU never uses; a directory holding PyTorch's CPU wheel
# (torch-<version>+cpu-...whl, from download.pytorch.org/whl/cpu) spares the VM that download. Its wheels
# are copied into the VM and provisioning's pip looks there first (PIP_FIND_LINKS); a local version such as
# +cpu ranks above PyPI's build of the same release.
copy_wheels() {
    local files=("$wheels"/*.whl)
    [ -f "${files[0]}" ] || fail "INATB_VM_WHEELS=$wheels: no .whl file there"
    phase "copying ${#files[@]} wheel(s) into $wheels_in_vm in the VM"
    vm_ssh "sudo mkdir -p $wheels_in_vm && sudo chown vagrant: $wheels_in_vm"
    rsync -a -e "ssh ${ssh_options[*]}" "${files[@]}" "vagrant@127.0.0.1:$wheels_in_vm/"
    phase_done "wheels"
}

provision() {
    local toolchain=${INATB_P4_TOOLCHAIN:-}
    if [ "${1:-}" = "-t" ]; then
        toolchain=${2:-}
        [ -n "$toolchain" ] || fail "-t needs a toolchain tarball"
    fi
    vm_running || fail "the VM is not running; local-vm.sh boot first"
    command -v rsync > /dev/null || fail "rsync missing on the host (apt-get install rsync): it copies the tree into the VM"
    local provision_env=()
    if [ -n "$toolchain" ]; then
        [ -f "$toolchain" ] || fail "toolchain bundle $toolchain: no such file"
        phase "copying the p4 toolchain bundle $(basename "$toolchain") into the VM"
        vm_ssh 'cat > /tmp/p4-toolchain.tar.gz' < "$toolchain"
        provision_env=(INATB_P4_TOOLCHAIN=/tmp/p4-toolchain.tar.gz)
        phase_done "bundle copy"
    fi
    if [ -n "$ca_certs" ]; then
        trust_ca_certs
    fi
    if [ -n "$wheels" ]; then
        copy_wheels
        provision_env+=(PIP_FIND_LINKS=$wheels_in_vm)
    fi
    phase "copying the working tree into $project_in_vm (rsync, what the Vagrantfile syncs)"
    rsync -a --delete -e "ssh ${ssh_options[*]}" \
        --exclude=.venv/ --exclude=results/ --exclude=.p4cache/ --exclude=__pycache__/ \
        --exclude=.pytest_cache/ --exclude='*.egg-info/' --exclude=.git/ \
        "$repo/" "vagrant@127.0.0.1:$project_in_vm/"
    phase_done "copy"
    phase "vagrant/provision.sh in the VM"
    vm_ssh sudo "${provision_env[@]}" bash "$project_in_vm/vagrant/provision.sh" "$project_in_vm" vagrant
    phase_done "provisioning"
}

box() {
    [ -f "$base_image" ] || fail "no image in $vm_dir; run local-vm.sh build first (as root)"
    local staging=$vm_dir/box
    rm -rf "$staging"
    mkdir -p "$staging"
    trap 'rm -rf "$staging"' EXIT
    cp "$base_image" "$staging/box.img"
    cp "$key" "$staging/vagrant_key"
    local virtual_gb
    virtual_gb=$(qemu-img info --output=json "$base_image" | python3 -c 'import json,sys; print(-(-json.load(sys.stdin)["virtual-size"] // 2**30))')
    printf '{"provider": "libvirt", "format": "qcow2", "virtual_size": %s}\n' "$virtual_gb" > "$staging/metadata.json"
    cat > "$staging/Vagrantfile" <<'EOF'
# The box's own settings: its key (the image holds no well-known key) and its disk bus.
Vagrant.configure("2") do |config|
  config.ssh.private_key_path = File.join(File.dirname(__FILE__), "vagrant_key")
  config.ssh.insert_key = false
  config.vm.provider "libvirt" do |lv|
    lv.disk_bus = "virtio"
    lv.driver = "kvm"
  end
end
EOF
    nice -n 19 tar -C "$staging" -czf "$vm_dir/inatb-debian12.box" metadata.json Vagrantfile box.img vagrant_key
    rm -rf "$staging"
    trap - EXIT
    echo "local-vm: $vm_dir/inatb-debian12.box; vagrant box add --name inatb/debian12 $vm_dir/inatb-debian12.box," \
         "then INATB_BOX=inatb/debian12 vagrant up --provider libvirt"
}

command=${1:-}
[ $# -gt 0 ] && shift
case $command in
    build) build ;;
    boot) boot ;;
    provision) provision "$@" ;;
    ssh)
        tty=()
        [ -t 0 ] && tty=(-t)
        if [ $# -gt 0 ]; then
            ssh "${ssh_options[@]}" "${tty[@]}" vagrant@127.0.0.1 "cd $project_in_vm 2>/dev/null; $*"
        else
            ssh "${ssh_options[@]}" "${tty[@]}" vagrant@127.0.0.1
        fi
        ;;
    stop) stop_vm ;;
    box) box ;;
    *) fail "usage: local-vm.sh build|boot|provision [-t TARBALL]|ssh [COMMAND]|stop|box (see the header of this script)" ;;
esac
