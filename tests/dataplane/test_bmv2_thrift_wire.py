"""Bmv2Runtime over a real Thrift connection: a stand-in server speaks bmv2's three services.

The server is built from the same generated bindings simple_switch's clients
use (``bm_runtime.standard``, ``bm_runtime.simple_pre_lag``,
``sswitch_runtime``), multiplexed by service name as simple_switch does, and
records what arrives. This checks the connection set-up, the service names
and that keys and action data cross the wire as the bytes bmv2 expects;
what bmv2 then does with them is the packet suite's job (bmv2 target).
"""

import socket
import threading

import pytest
from bm_runtime.simple_pre_lag import SimplePreLAG
from bm_runtime.standard import Standard, ttypes
from sswitch_runtime import SimpleSwitch
from thrift.protocol import TBinaryProtocol
from thrift.TMultiplexedProcessor import TMultiplexedProcessor
from thrift.transport import TSocket, TTransport

from testbed.dataplane.bmv2 import Bmv2Runtime
from testbed.dataplane.entries import TableEntry
from testbed.errors import DataplaneError


class Recorder:
    """Handler of all three services: records calls, keeps registers, refuses duplicate entries."""

    def __init__(self):
        self.calls = []
        self.registers = {}
        self.entries = set()

    def bm_mt_add_entry(self, cxt_id, table_name, match_key, action_name, action_data, options):
        key = (table_name, tuple(m.exact.key if m.exact else (m.lpm.key, m.lpm.prefix_length) for m in match_key))
        if key in self.entries:
            raise ttypes.InvalidTableOperation(code=ttypes.TableOperationErrorCode.DUPLICATE_ENTRY)
        self.entries.add(key)
        self.calls.append(("add", table_name, key[1], action_name, list(action_data)))
        return len(self.entries) - 1

    def bm_register_write(self, cxt_id, name, index, value):
        self.registers[(name, index)] = value

    def bm_register_read(self, cxt_id, name, index):
        """As bmv2 answers: the stored value masked to 64 bits, saturated to the i64 range (Data::get<int64_t>)."""
        return min(self.registers.get((name, index), 0) & ((1 << 64) - 1), (1 << 63) - 1)

    def bm_mc_mgrp_create(self, cxt_id, mgrp):
        self.calls.append(("mgrp", mgrp))
        return mgrp

    def bm_mc_node_create(self, cxt_id, rid, port_map, lag_map):
        self.calls.append(("node", rid, port_map, lag_map))
        return 0

    def bm_mc_node_associate(self, cxt_id, mgrp_handle, l1_handle):
        self.calls.append(("assoc", mgrp_handle, l1_handle))

    def set_egress_queue_rate(self, port_num, rate_pps):
        self.calls.append(("rate", port_num, rate_pps))
        return 0

    def set_egress_queue_depth(self, port_num, depth_pkts):
        self.calls.append(("depth", port_num, depth_pkts))
        return 0


@pytest.fixture
def server():
    handler = Recorder()
    processor = TMultiplexedProcessor()
    processor.registerProcessor("standard", Standard.Processor(handler))
    processor.registerProcessor("simple_pre_lag", SimplePreLAG.Processor(handler))
    processor.registerProcessor("simple_switch", SimpleSwitch.Processor(handler))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = TSocket.TServerSocket(host="127.0.0.1", port=port)
    transport.listen()

    def serve_one_connection():
        client = TTransport.TBufferedTransport(transport.accept())
        protocol = TBinaryProtocol.TBinaryProtocol(client)
        try:
            while True:
                processor.process(protocol, protocol)
        except (TTransport.TTransportException, EOFError):
            pass
        finally:
            client.close()

    thread = threading.Thread(target=serve_one_connection, daemon=True)
    thread.start()
    runtime = Bmv2Runtime(port, switch="s9", lanes=64, slots=64)
    try:
        yield runtime, handler
    finally:
        runtime.close()
        thread.join(timeout=5)
        transport.close()


def test_entries_registers_multicast_and_queues_cross_the_wire(server):
    runtime, handler = server
    runtime.table_add(TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/8",),
                                 (("dstAddr", "02:00:00:00:00:01"), ("port", 2))))
    runtime.table_add(TableEntry("ina_result", "ina_release", (3, "10.0.0.1"),
                                 (("slot_base", 8), ("slot_count", 8), ("mcast_grp", 5))))
    assert handler.calls[0] == ("add", "Ingress.ipv4_lpm", ((bytes([10, 0, 0, 0]), 8),), "Ingress.ipv4_forward",
                                [bytes([2, 0, 0, 0, 0, 1]), b"\x00\x02"])
    assert handler.calls[1] == ("add", "Ingress.ina_result", (b"\x00\x03", bytes([10, 0, 0, 1])),
                                "Ingress.ina_release", [b"\x00\x00\x00\x08", b"\x00\x00\x00\x08", b"\x00\x05"])
    with pytest.raises(DataplaneError, match="DUPLICATE_ENTRY"):
        runtime.table_add(TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/8",),
                                     (("dstAddr", "02:00:00:00:00:01"), ("port", 2))))
    runtime.register_write("agg_bitmap", 5, (1 << 64) - 2)
    assert handler.registers[("Ingress.agg_bitmap", 5)] == -2
    with pytest.raises(DataplaneError, match="saturates"):
        runtime.register_read("agg_bitmap", 5)
    runtime.register_write("agg_bitmap", 5, (1 << 63) - 2)
    assert runtime.register_read("agg_bitmap", 5) == (1 << 63) - 2
    runtime.mc_group_create(5, [1, 2, 3])
    assert handler.calls[-3:] == [("mgrp", 5), ("node", 5, "1110", ""), ("assoc", 5, 0)]
    runtime.set_port_shaping(3, 1e6, 32)
    assert handler.calls[-2:] == [("rate", 3, 372), ("depth", 3, 32)]
