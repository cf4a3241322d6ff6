"""Packets lost outside the modelled switch queues and impairments, read from the kernel.

The emulation models loss in two places only: a switch egress queue's tail
drop (``queue_depth``) and an injected impairment. Anything else that drops a
packet is an artifact of the machine: a host's UDP socket receive buffer
(``/proc/net/snmp`` ``Udp: RcvbufErrors``, per network namespace, so per
host), a host's egress qdisc (htb's ``dropped`` in ``tc -s qdisc``). pyswitch
reports its own port sockets' drops in its counters (``socket_dropped``).

The parsers are pure; :func:`host_losses` runs the two reads in a host.
"""

import re


def udp_rcvbuf_errors(snmp_text: str) -> int:
    """``RcvbufErrors`` of the ``Udp:`` lines of /proc/net/snmp (0 if absent)."""
    lines = [line.split() for line in snmp_text.splitlines() if line.startswith("Udp:")]
    if len(lines) < 2 or "RcvbufErrors" not in lines[0]:
        return 0
    return int(lines[1][lines[0].index("RcvbufErrors")])


def qdisc_dropped(tc_text: str) -> int:
    """Packets dropped by a device's qdiscs, from ``tc -s qdisc show``: the largest ``dropped N``
    of the listed qdiscs (a root may or may not include its children's drops, so summing could
    count one drop twice; the largest is a lower bound that is never zero when any dropped)."""
    return max((int(n) for n in re.findall(r"\(dropped (\d+),", tc_text)), default=0)


def host_losses(node, ifname: str, run) -> dict:
    """``{"udp_rcvbuf": n, "qdisc": n}`` of one Mininet host; ``run(node, argv, what)`` runs a command."""
    snmp = run(node, ["cat", "/proc/net/snmp"], "reading UDP counters")
    tc = run(node, ["tc", "-s", "qdisc", "show", "dev", ifname], "reading qdisc counters")
    return {"udp_rcvbuf": udp_rcvbuf_errors(snmp), "qdisc": qdisc_dropped(tc)}
