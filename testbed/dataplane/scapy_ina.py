"""A scapy layer for the INA header and its lanes: craft and dissect INA packets, read pcaps.

For tests, tools and pcap reading only; never imported by a fast path (the
agents and pyswitch use the ``struct`` codec of :mod:`testbed.dataplane.wire`,
which this layer mirrors field for field). Importing this module binds the
layer to UDP destination port 40000 (``wire.INA_UDP_PORT``), so
``rdpcap("run.pcap")`` dissects INA packets::

    from scapy.all import Ether, IP, UDP
    from testbed.dataplane.scapy_ina import INA
    pkt = Ether() / IP(dst="10.0.0.9") / UDP(sport=40000, dport=40000) / INA(job=1, seq=7, lanes=[1, 2, 3])

``elems`` left unset is the number of lanes given; ``flags`` prints by name.
"""

from scapy.fields import (BitField, ByteField, FieldListField, FlagsField, IntField, LongField, ShortField,
                          SignedIntField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from testbed.dataplane import wire

FLAG_BIT_NAMES = [wire.FLAG_NAMES.get(1 << bit, f"RSV{bit}") for bit in range(16)]


class INA(Packet):
    name = "INA"
    fields_desc = [
        ShortField("job", 0),
        FlagsField("flags", wire.FLAG_DATA, 16, FLAG_BIT_NAMES),
        BitField("elems", None, 8),
        ByteField("level", 0),
        ShortField("agg_node", 0),
        ShortField("fanin", 1),
        ShortField("count", 1),
        ShortField("submodel", 0),
        IntField("iteration", 0),
        IntField("seq", 0),
        IntField("slot", 0),
        LongField("bitmap", 0),
        IntField("progress", 0),
        FieldListField("lanes", [], SignedIntField("lane", 0), count_from=lambda pkt: pkt.elems,
                       max_count=wire.MAX_LANES),     # above scapy's default of 100 items
    ]

    def post_build(self, pkt, pay):
        if self.elems is None:
            pkt = pkt[:4] + bytes([len(self.lanes) & 0xFF]) + pkt[5:]
        return pkt + pay

    def extract_padding(self, s):
        return b"", s

    def mysummary(self):
        return self.sprintf("INA job=%job% it=%iteration% seq=%seq% slot=%slot% count=%count%/%fanin% "
                            "level=%level% flags=%flags%")


bind_layers(UDP, INA, dport=wire.INA_UDP_PORT)
