"""Build a Mininet network from a Topology, and take it down again.

- Hosts get the Topology's IPv4 address (/8) and MAC (a co-located PS its
  second address too), static ARP entries for every other host's addresses
  and every switch INA address (one ``ip -batch`` per host),
  IPv6 off, and checksum / segmentation offloads off (a user-space switch
  relays the frames, so the kernel must put real checksums on them and never
  hand it a 64 kB super-frame).
- Host egress is shaped by htb at the link's rate (Mininet's TCIntf on the
  host end only); the switch end is shaped by the switch's own egress queue
  (controller: PortShaping), so no direction is shaped twice.
- Switch ports take the Topology's port numbers, and join the run's device group (:func:`run_device_group`),
  so that one ``ip link del group`` takes every link down at once (:func:`stop_network`): the kernel
  waits for its RCU grace periods once for them all, where Mininet's ``ip link del`` per interface waits
  about 20 ms for each.

Commands run in a host's namespace are argv lists through ``node.popen``;
nothing is built as a shell string.
"""

import contextlib
import logging
import os
import subprocess
import tempfile
from dataclasses import dataclass

from mininet.link import Intf, Link, TCIntf
from mininet.log import lg as mininet_log
from mininet.net import Mininet

from testbed.emulation.state import delete_group, stop_processes
from testbed.errors import EmulationError

# Mininet's TCIntf accepts 0..1000 Mb/s for htb.
MAX_HTB_MBPS = 1000.0
#: Every host address is in 10.0.0.0/8: one connected route, which the kernel adds with the address.
HOST_NETWORK = "10.0.0.0/8"
HOST_PREFIX_BITS = 8
#: The high half of a run's device group (:func:`run_device_group`): "IN". Never 0, the group of every device
#: that joined none.
DEVICE_GROUP_BASE = 0x494E0000


@dataclass
class EmulatedNetwork:
    net: Mininet
    topology: object
    device_group: int = 0       # the group the switch ports joined (0: none, Mininet takes each link down)

    def host(self, name):
        return self.net.get(name)

    def switch(self, name):
        return self.net.get(name)


@contextlib.contextmanager
def mininet_log_to(path):
    """Send Mininet's own messages (tc warnings, link set-up) to ``path`` instead of the console."""
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = list(mininet_log.handlers)
    for h in saved:
        mininet_log.removeHandler(h)
    mininet_log.addHandler(handler)
    try:
        yield
    finally:
        mininet_log.removeHandler(handler)
        handler.close()
        for h in saved:
            mininet_log.addHandler(h)


def run_in(node, argv, what: str):
    """Run ``argv`` in ``node``'s namespace; raise EmulationError with its stderr on failure."""
    proc = node.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise EmulationError(f"{node.name}: {what} failed ({' '.join(argv)}): "
                             f"{(err or out).decode(errors='replace').strip()}")
    return out.decode(errors="replace")


def offload_off_argv(ifname: str):
    return ["ethtool", "-K", ifname, "tx", "off", "rx", "off", "sg", "off", "tso", "off", "gso", "off", "gro", "off"]


def neighbor_argv(ifname: str, address: str, mac: str):
    return ["ip", "neigh", "replace", address, "lladdr", mac, "dev", ifname, "nud", "permanent"]


def add_neighbors(network: EmulatedNetwork, host_neighbors) -> None:
    """Each ``(host, address, MAC)`` of ``host_neighbors`` (the control plan's) as a static neighbour of the
    host's interface."""
    for host, address, mac in host_neighbors:
        run_in(network.host(host), neighbor_argv(f"{host}-eth0", address, mac), "adding a neighbour")


def rto_min_route_argv(ifname: str, address: str, rto_min_ms: int):
    """The host's connected route again, with a minimum TCP RTO (``rto_min``) for every connection over it."""
    return ["ip", "route", "replace", HOST_NETWORK, "dev", ifname, "proto", "kernel", "scope", "link", "src", address,
            "rto_min", f"{rto_min_ms}ms"]


def neighbor_batch(topology, host_name: str) -> str:
    """``ip -batch`` lines for ``host_name``: a co-located PS's second address on its interface, and a
    permanent neighbour entry for every address of every other node."""
    intf = f"{host_name}-eth0"
    lines = [f"addr add {address}/{HOST_PREFIX_BITS} dev {intf}" for address in topology.addresses(host_name)[1:]]
    for node in topology.nodes.values():
        if node.name != host_name:
            lines += [f"neigh replace {address} lladdr {node.mac} dev {intf} nud permanent"
                      for address in topology.addresses(node.name)]
    return "\n".join(lines) + "\n"


def build_network(topology, switch_cls, switch_params: dict, run_state) -> EmulatedNetwork:
    """Create, start and configure the network. On any failure, what was built is stopped."""
    net = Mininet(topo=None, build=False, controller=None, autoSetMacs=False, autoStaticArp=False,
                  waitConnected=False, ipBase=HOST_NETWORK)
    try:
        for node in topology.switches():
            net.addSwitch(node.name, cls=switch_cls, dpid=f"{node.node_id:016x}", **switch_params)
        for node in topology.hosts():
            net.addHost(node.name, ip=f"{node.ip}/{HOST_PREFIX_BITS}", mac=node.mac)
        for link in topology.links:
            ends = []
            for name, port in ((link.a, link.port_a), (link.b, link.port_b)):
                ends.append((name, port, topology.nodes[name].kind == "host"))
            (a, pa, a_host), (b, pb, b_host) = ends
            mbps = link.rate_bps / 1e6
            if (a_host or b_host) and mbps > MAX_HTB_MBPS:
                raise EmulationError(f"link {a}-{b}: {mbps:.0f} Mb/s exceeds what htb shapes here "
                                     f"({MAX_HTB_MBPS:.0f} Mb/s); lower the scenario's scale")
            net.addLink(a, b, port1=pa or None, port2=pb or None, cls=Link,
                        cls1=TCIntf if a_host else Intf, cls2=TCIntf if b_host else Intf,
                        params1={"bw": mbps} if a_host else {}, params2={"bw": mbps} if b_host else {})
        run_state.add_interfaces([intf.name for sw in net.switches for intf in sw.intfList() if intf.name != "lo"])
        net.build()
        for node in net.hosts + net.switches:
            if node.shell is not None and node.pid:
                run_state.add_process(node.pid, "mininet:")
        _configure_hosts(net, topology)
        group = _configure_switch_ports(net, run_device_group())
        if group:
            run_state.set_device_group(group)
        net.start()
        return EmulatedNetwork(net, topology, group)
    except BaseException:
        stop_network(net)
        raise


def _configure_hosts(net, topology):
    for host in net.hosts:
        intf = f"{host.name}-eth0"
        run_in(host, ["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], "disabling IPv6")
        run_in(host, offload_off_argv(intf), "disabling checksum offload")
        with tempfile.NamedTemporaryFile("w", suffix=".neigh") as batch:
            batch.write(neighbor_batch(topology, host.name))
            batch.flush()
            run_in(host, ["ip", "-batch", batch.name], "installing static ARP entries")


def run_device_group() -> int:
    """The device group (``ip link set ... group``) of this process's network: ``DEVICE_GROUP_BASE`` and the low
    16 bits of the process id, so two runs on one machine take different groups (:func:`delete_links_at_once`
    checks the group holds only its own ports before it deletes it)."""
    return DEVICE_GROUP_BASE | (os.getpid() & 0xFFFF)


def switch_ports(net) -> list:
    """The names of every switch port of ``net`` (the root namespace's ends of its links)."""
    return [intf.name for switch in net.switches for intf in switch.intfList() if intf.name != "lo"]


def _configure_switch_ports(net, group: int) -> int:
    """IPv6 and offloads off on every switch port, and every port into ``group`` (one ``ip -batch``). Returns
    the group the ports joined: ``group``, or 0 when ``ip`` refused it (the links then go one by one at the
    teardown, as Mininet takes them down: slower, nothing else)."""
    ports = switch_ports(net)
    if not ports:
        return 0
    subprocess.run(["sysctl", "-q", "-w", *(f"net.ipv6.conf.{name}.disable_ipv6=1" for name in ports)],
                   capture_output=True)
    for name in ports:
        subprocess.run(offload_off_argv(name), capture_output=True)
    joined = subprocess.run(["ip", "-batch", "-"], input="".join(f"link set dev {name} group {group}\n"
                                                                  for name in ports),
                            capture_output=True, text=True)
    return group if joined.returncode == 0 else 0


def delete_links_at_once(net, group: int) -> bool:
    """Delete every link of ``net`` whose switch port is in ``group`` with one ``ip link del group`` (a veth's
    peer goes with it: :func:`testbed.emulation.state.delete_group`, only when the group holds this network's
    switch ports and nothing else), and forget their interfaces in Mininet's records, so that ``net.stop()``
    stops the nodes and only the links left (none in a network that :func:`build_network` built). False when
    nothing was deleted."""
    members = delete_group(group, switch_ports(net))
    if not members:
        return False
    remaining = []
    for link in net.links:
        ends = (link.intf1, link.intf2)
        if not any(intf.name in members for intf in ends):
            remaining.append(link)
            continue
        for intf in ends:
            intf.node.delIntf(intf)
    net.links = remaining
    return True


def stop_network(net, device_group: int = 0):
    """Stop the switches' processes, then the links, then the nodes; never raises (cleanup must finish). The
    processes go first, all signalled at once, so that no switch finds its ports gone under it; the links go
    at once when the switch ports joined ``device_group`` (:func:`delete_links_at_once`), else one by one as
    Mininet stops them."""
    try:
        stop_processes(getattr(switch, "proc", None) for switch in net.switches)
        if device_group:
            delete_links_at_once(net, device_group)
        net.stop()
    except Exception:  # noqa: BLE001 - the run's own cleanup of leftovers follows
        for node in net.hosts + net.switches:
            try:
                node.stop(deleteIntfs=True) if hasattr(node, "stop") else node.terminate()
            except Exception:  # noqa: BLE001
                pass
