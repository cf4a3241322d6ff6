"""The source port of each flow of a source: flow i of a source's ``flows`` leaves from the i-th port of one
fixed shuffle, so that ECMP per flow puts it on the same path in every run of a seed (TCP and UDP flows
alike); a port that is taken leaves the choice to the kernel."""
import random
import socket

#: A source's flow i leaves from the i-th port (modulo SOURCE_PORTS) of one fixed shuffle of 10000-32767 (below
#: Linux's ephemeral range), not from a port the kernel picks: under ECMP per flow (topology.ecmp: flow) its path
#: is then a function of the plan, and every run of a seed puts the same flow on the same path. Shuffled, not
#: consecutive: CRC-16 is linear in its input bits, and consecutive ports put 80% of the flows on two of four
#: paths where ports the kernel picks spread them evenly.
FIRST_SOURCE_PORT = 10000
SOURCE_PORTS = 22768
SOURCE_PORT_SHUFFLE_SEED = 1


def _source_port_order() -> tuple:
    ports = list(range(FIRST_SOURCE_PORT, FIRST_SOURCE_PORT + SOURCE_PORTS))
    random.Random(SOURCE_PORT_SHUFFLE_SEED).shuffle(ports)
    return tuple(ports)


_SOURCE_PORT_ORDER = _source_port_order()


def source_port(index: int) -> int:
    """The port flow ``index`` of a source's ``flows`` leaves from (distinct for SOURCE_PORTS flows in a row)."""
    return _SOURCE_PORT_ORDER[index % SOURCE_PORTS]


def _bind_source_port(sock: socket.socket, index: int) -> None:
    """Bind ``sock`` to flow ``index``'s source port; if that port is taken, the kernel picks one at connect."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past a TIME_WAIT of an earlier run's flow
    try:
        sock.bind(("0.0.0.0", source_port(index)))
    except OSError:
        pass
