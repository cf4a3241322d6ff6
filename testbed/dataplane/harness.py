"""Packet rigs for data-plane tests and benchmarks: a switch's ports as veth pairs, the far ends in a namespace.

:class:`VethRig` creates one veth pair per switch port: the switch end
(``<tag>s<port>``) stays in the root namespace, where a switch process (the
pyswitch process, or bmv2's ``simple_switch``) binds it; the host end
(``<tag>h<port>``) moves into a fresh network namespace ``inatb-<tag>``.
The rig's own AF_PACKET sockets are opened *inside* that namespace (the
calling thread enters it with setns(2) for the ``socket()``/``bind()`` calls
and comes back), so a test sends crafted frames into switch ports and reads
what the switch emits, with nothing else of the machine on those links:
IPv6 is off on both ends (no neighbour discovery noise) and checksum /
segmentation offloads are off.

Names carry a random tag, so concurrent rigs never collide; :meth:`close`
(also the context manager's exit) deletes the pairs and the namespace, and
:func:`leftovers` lists what a crashed rig left, for a test to assert
nothing remains. Root only.
"""

import contextlib
import ctypes
import os
import secrets
import select
import subprocess
import time

from testbed.dataplane.pyswitch.process import open_port_socket
from testbed.errors import EmulationError

CLONE_NEWNET = 0x40000000
NETNS_PREFIX = "inatb-"
TAG_PREFIX = "it"           # interface names: it<6 hex><s|h><port>, at most 15 characters


def _run(argv, what):
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmulationError(f"{what} failed ({' '.join(argv)}): {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


@contextlib.contextmanager
def in_netns(name: str):
    """Run the body with the calling thread in network namespace ``name`` (sockets made here stay there)."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise EmulationError(f"setns into {name} failed: {os.strerror(err)}")
        try:
            yield
        finally:
            if libc.setns(home, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise EmulationError(f"setns back to the root namespace failed: {os.strerror(err)}")
    finally:
        os.close(target)
        os.close(home)


def _link_exists(ifname: str) -> bool:
    return subprocess.run(["ip", "link", "show", ifname], capture_output=True).returncode == 0


def leftovers() -> dict:
    """Namespaces and links whose names say a rig made them (for tests that check cleanup)."""
    netns = [line.split()[0] for line in _run(["ip", "netns", "list"], "ip netns list").splitlines()
             if line.startswith(NETNS_PREFIX + TAG_PREFIX)]
    links = []
    for line in _run(["ip", "-o", "link", "show"], "ip link show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if name.startswith(TAG_PREFIX) and len(name) > 9 and name[8] in "sh":
            links.append(name)
    return {"netns": netns, "links": links}


class VethRig:
    """Switch ports as veth pairs; the test's ends in their own namespace."""

    def __init__(self, ports, tag: str = None):
        self.ports = sorted(int(p) for p in ports)
        self.tag = tag or TAG_PREFIX + secrets.token_hex(3)
        self.netns = NETNS_PREFIX + self.tag
        self.socks = {}         # port -> AF_PACKET socket on the host end
        self._made_links = []
        self._made_netns = False

    def switch_ifname(self, port: int) -> str:
        return f"{self.tag}s{port}"

    def host_ifname(self, port: int) -> str:
        return f"{self.tag}h{port}"

    def switch_ports(self) -> dict:
        """{port: switch-side interface name}, what a switch process binds."""
        return {p: self.switch_ifname(p) for p in self.ports}

    # -- life cycle ---------------------------------------------------------------
    def __enter__(self):
        try:
            self.create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def create(self):
        _run(["ip", "netns", "add", self.netns], "creating the rig's namespace")
        self._made_netns = True
        _run(["ip", "-n", self.netns, "link", "set", "lo", "up"], "lo up")
        for port in self.ports:
            sw, host = self.switch_ifname(port), self.host_ifname(port)
            _run(["ip", "link", "add", sw, "type", "veth", "peer", "name", host], f"creating veth {sw}")
            self._made_links.append(sw)
            _run(["ip", "link", "set", host, "netns", self.netns], f"moving {host}")
            for ns, ifname in ((None, sw), (self.netns, host)):
                prefix = ["ip", "netns", "exec", ns] if ns else []
                subprocess.run(prefix + ["sysctl", "-q", "-w", f"net.ipv6.conf.{ifname}.disable_ipv6=1"],
                               capture_output=True)
                subprocess.run(prefix + ["ethtool", "-K", ifname, "tx", "off", "rx", "off", "sg", "off",
                                         "tso", "off", "gso", "off", "gro", "off"], capture_output=True)
            _run(["ip", "link", "set", sw, "up"], f"{sw} up")
            _run(["ip", "-n", self.netns, "link", "set", host, "up"], f"{host} up")
        with in_netns(self.netns):
            for port in self.ports:
                self.socks[port] = open_port_socket(self.host_ifname(port))

    def close(self, timeout_s: float = 5.0):
        """Delete the rig's pairs and namespace, retrying until they are gone (a deletion can fail
        while the kernel still tears down a port); raises naming what stayed and why."""
        for sock in self.socks.values():
            sock.close()
        self.socks.clear()
        deadline = time.monotonic() + timeout_s
        while True:
            errors = []
            for sw in list(self._made_links):
                proc = subprocess.run(["ip", "link", "del", sw], capture_output=True, text=True)
                if proc.returncode == 0 or not _link_exists(sw):
                    self._made_links.remove(sw)
                else:
                    errors.append(f"{sw}: {proc.stderr.strip()}")
            if self._made_netns:
                proc = subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, text=True)
                if proc.returncode == 0 or not os.path.exists(f"/run/netns/{self.netns}"):
                    self._made_netns = False
                else:
                    errors.append(f"{self.netns}: {proc.stderr.strip()}")
            if not errors:
                return
            if time.monotonic() >= deadline:
                raise EmulationError(f"could not delete the rig's {'; '.join(errors)}")
            time.sleep(0.1)

    # -- packets ------------------------------------------------------------------
    def send(self, port: int, frame: bytes):
        self.socks[port].send(frame)

    def drain(self):
        """Discard whatever is waiting on the host ends."""
        for sock in self.socks.values():
            while True:
                try:
                    sock.recv(65536)
                except BlockingIOError:
                    break

    def recv(self, timeout_s: float = 1.0, count: int = None, ipv4_only: bool = True):
        """Frames the switch emitted, as [(port, bytes)], until ``count`` arrived or ``timeout_s`` passed.

        Without ``count`` it waits the whole ``timeout_s`` (to show nothing more comes).
        """
        out = []
        fd_port = {sock.fileno(): port for port, sock in self.socks.items()}
        deadline = time.monotonic() + timeout_s
        while count is None or len(out) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select(list(fd_port), [], [], left)
            for fd in ready:
                port = fd_port[fd]
                while True:
                    try:
                        frame = self.socks[port].recv(65536)
                    except BlockingIOError:
                        break
                    if ipv4_only and frame[12:14] != b"\x08\x00":
                        continue
                    out.append((port, frame))
        return out
