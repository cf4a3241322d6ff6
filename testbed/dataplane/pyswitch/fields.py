"""The header fields pyswitch reads and rewrites in place, named once from the layout in
:mod:`testbed.dataplane.wire`: the offset of each byte the fast path reads or writes on its own (one-byte
fields, and the bytes of 16-bit fields it compares or clears byte by byte), a precomputed slice for each field
it copies as bytes (addresses, ports, the INA header's table keys), and the bytes of the values the parser
compares. Bound at import, so the fast path indexes a frame by a name without computing an offset or building a
slice per packet. (The struct codecs stay in the modules that call them: CPython 3.11 compiles a method call on
an imported name as an attribute load, which builds a bound method per call.)"""
from testbed.dataplane.wire import (ETH_DST_OFFSET, ETH_SRC_OFFSET, ETH_TYPE_IPV4, ETH_TYPE_OFFSET, INA_AGG_NODE_OFFSET,
                                    INA_FANIN_OFFSET, INA_FLAGS_OFFSET, INA_ITERATION_OFFSET, INA_JOB_OFFSET,
                                    INA_SUBMODEL_OFFSET, INA_UDP_PORT, IPV4_ADDR_BYTES, IPV4_CHECKSUM_OFFSET,
                                    IPV4_DST_OFFSET, IPV4_SRC_OFFSET, MAC_BYTES, UDP_CHECKSUM_OFFSET,
                                    UDP_DST_PORT_OFFSET, UDP_LENGTH_OFFSET, UDP_SRC_PORT_OFFSET)

ETH_DST = slice(ETH_DST_OFFSET, ETH_DST_OFFSET + MAC_BYTES)
ETH_SRC = slice(ETH_SRC_OFFSET, ETH_SRC_OFFSET + MAC_BYTES)
ETH_TYPE_HI, ETH_TYPE_LO = ETH_TYPE_OFFSET, ETH_TYPE_OFFSET + 1
ETH_TYPE_IPV4_HI, ETH_TYPE_IPV4_LO = ETH_TYPE_IPV4 >> 8, ETH_TYPE_IPV4 & 0xFF

IPV4_SRC = slice(IPV4_SRC_OFFSET, IPV4_SRC_OFFSET + IPV4_ADDR_BYTES)
IPV4_DST = slice(IPV4_DST_OFFSET, IPV4_DST_OFFSET + IPV4_ADDR_BYTES)
IPV4_ADDRS = slice(IPV4_SRC_OFFSET, IPV4_DST_OFFSET + IPV4_ADDR_BYTES)     # source, then destination
IPV4_CHECKSUM_HI, IPV4_CHECKSUM_LO = IPV4_CHECKSUM_OFFSET, IPV4_CHECKSUM_OFFSET + 1

UDP_SRC_PORT = slice(UDP_SRC_PORT_OFFSET, UDP_DST_PORT_OFFSET)
UDP_DST_PORT = slice(UDP_DST_PORT_OFFSET, UDP_LENGTH_OFFSET)
#: Source and destination port, where TCP has them too (the ECMP hash reads them for both).
L4_PORTS = slice(UDP_SRC_PORT_OFFSET, UDP_LENGTH_OFFSET)
L4_PORTS_END = UDP_LENGTH_OFFSET
UDP_DST_PORT_HI, UDP_DST_PORT_LO = UDP_DST_PORT_OFFSET, UDP_DST_PORT_OFFSET + 1
INA_PORT_HI, INA_PORT_LO = INA_UDP_PORT >> 8, INA_UDP_PORT & 0xFF
UDP_CHECKSUM_HI, UDP_CHECKSUM_LO = UDP_CHECKSUM_OFFSET, UDP_CHECKSUM_OFFSET + 1

INA_JOB = slice(INA_JOB_OFFSET, INA_FLAGS_OFFSET)
INA_AGG_NODE = slice(INA_AGG_NODE_OFFSET, INA_FANIN_OFFSET)
INA_SUBMODEL = slice(INA_SUBMODEL_OFFSET, INA_ITERATION_OFFSET)
INA_FLAGS_LO = INA_FLAGS_OFFSET + 1     # the flags' low byte: DATA, GACK and RESULT among its bits
