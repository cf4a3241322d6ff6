"""The ECMP hash of ``route_ecmp``, as bmv2 computes it: CRC-16/ARC over a packet's five-tuple, read at the
IPv4 and TCP/UDP header offsets the parser assumes (IHL 5), choosing one of a route's member ports."""
from testbed.dataplane.pyswitch.fields import IPV4_ADDRS, L4_PORTS, L4_PORTS_END
from testbed.dataplane.wire import IPPROTO_UDP, IPV4_PROTOCOL_OFFSET

_IPPROTO_TCP = 6


def _crc16_table() -> tuple:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_CRC16_TABLE = _crc16_table()


def crc16(data: bytes) -> int:
    """bmv2's ``HashAlgorithm.crc16``: CRC-16/ARC (polynomial 0x8005 reflected, initial 0, no final xor)."""
    crc = 0
    for byte in data:
        crc = (crc >> 8) ^ _CRC16_TABLE[(crc ^ byte) & 0xFF]
    return crc


def ecmp_member(buf, ports: int) -> int:
    """``route_ecmp``'s member: CRC-16 of (source and destination address, protocol, source and
    destination port) modulo ``ports``; the ports of a TCP or UDP packet (IHL 5, as the parser's), else 0."""
    protocol = buf[IPV4_PROTOCOL_OFFSET]
    l4_ports = bytes(buf[L4_PORTS]) if protocol in (_IPPROTO_TCP, IPPROTO_UDP) and len(buf) >= L4_PORTS_END \
        else bytes(4)
    return crc16(bytes(buf[IPV4_ADDRS]) + bytes((protocol,)) + l4_ports) % ports if ports else 0
