"""The ebpf target's SwitchRuntime: ina.p4's tables, registers, counters and meter as the maps of
``ina.bpf.c``, pinned in the switch's bpffs directory.

Entries are checked as on the other targets (``validate_entry``, ``check_switch_limits``), packed into
the C structs of ``ina.bpf.c`` (the ``_*`` struct formats below mirror them field for field; a test
compares their sizes with the maps') and written with ``bpf(2)`` (:mod:`.maps`). Names map onto maps
where BPF's 15-character names or ina.bpf.c's grouping differ from ina.p4's: the per-slot registers are
fields of ``agg_slots``, the Egress per-port registers and counters fields of ``port_impair`` and
``port_counts``; the other registers are maps of their own, one value per index.
"""

import socket
import struct
import subprocess

from testbed.dataplane import program
from testbed.dataplane.ebpf.commands import run, shaping_argvs, unqdisc_argv
from testbed.dataplane.ebpf.maps import PinnedMap
from testbed.dataplane.entries import (TableEntry, check_mirror_session, check_multicast_group, check_object,
                                       check_switch_limits, impairment_thresholds, validate_entry)
from testbed.dataplane.runtime import SwitchRuntime, impairment_stats
from testbed.errors import DataplaneError

GROUP_PORTS = 64            # ina.bpf.c's INA_GROUP_PORTS
QUEUE_RING = 1024           # ina.bpf.c's INA_QUEUE_RING: the deepest queue a port takes
BPF_NOEXIST = 1

# ina.bpf.c's structs, little-endian, padding explicit
_SLOT = struct.Struct("<IHHIIHBB4xQHHII")          # agg_slot up to its lanes; value[lanes] follows, then padding
_FORWARD = struct.Struct("<6sHII")                  # forward_action
_AGGREGATE = struct.Struct("<4sIIIHH4sII4s4sHHII")  # aggregate_action
_RESULT = struct.Struct("<IIII")                    # result_action
_EVICT = struct.Struct("<HH4sHHII")                 # evict_action
_RINA = struct.Struct("<4sIIHH")                    # rina_action
_REWRITE = struct.Struct("<6sH4s")                  # rewrite_action
_PORT_QUEUE = struct.Struct("<IIIIQQ")              # port_queue up to its ring
_METER = struct.Struct("<I4xQQQQ")                  # meter
_PORT_COUNTS = struct.Struct("<6Q")                 # port_counts
_PORT_IMPAIR = struct.Struct("<III")                # port_impair
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

ACT_FORWARD, ACT_ECMP, ACT_DROP = 1, 2, 3
ACT_MULTICAST, ACT_RELEASE, ACT_SHADOW = 1, 2, 3

#: ina.p4's per-slot registers: the field of agg_slots holding each (index in _SLOT's fields)
SLOT_FIELDS = {"agg_count": 1, "agg_job": 2, "agg_iteration": 3, "agg_seq": 4, "agg_submodel": 5,
               "agg_elems": 6, "agg_resulted": 7, "agg_bitmap": 8, "agg_collided_job": 9,
               "agg_collided_iteration": 11, "agg_collided_seq": 12}
#: per-port registers and counters: (map, field index)
PORT_FIELDS = {"impair_drop": ("port_impair", 0), "impair_duplicate": ("port_impair", 1),
               "impair_reorder": ("port_impair", 2), "port_ina_tx": ("port_counts", 0),
               "port_ecn_marked": ("port_counts", 1), "port_impair_dropped": ("port_counts", 2),
               "port_impair_duplicated": ("port_counts", 3), "port_impair_reordered": ("port_counts", 4)}
QUEUE_DROPPED = 5           # port_counts' field: tail drops of the port's queue
LOCKED_MAPS = {"agg_slots", "port_queue", "agg_capacity"}
#: What a run or a test writes (all of ina.bpf.c's maps but the ports' numbers and the per-CPU scratch)
STATE_MAPS = ("agg_slots", "agg_used", "pa_seq", "pa_seq_sum", "pa_overflow", "pa_overflowed", "aecn_threshold",
              "ecn_threshold", "switch_wait", "ina_stats", "port_impair", "port_counts", "port_queue",
              "agg_capacity", "route", "ipv4_lpm", "ina_filter", "ina_result", "rina_gather", "pa_job", "esa_job",
              "esa_evict", "rina_rack", "ina_mcast_rewrite", "mirror_sessions", "mc_groups")


def _ip(value) -> bytes:
    return socket.inet_aton(str(value))


def _mac(value) -> bytes:
    return bytes(int(part, 16) for part in str(value).split(":"))


class EbpfRuntime(SwitchRuntime):
    """Control-plane handle of one ebpf switch: the maps pinned in ``map_dir``."""

    def __init__(self, map_dir, switch: str = "?", lanes: int = 64, slots: int = program.DEFAULT_SLOTS):
        self.switch, self.lanes, self.slots = switch, lanes, slots
        self.map_dir = str(map_dir)
        self._maps = {}

    def map(self, name: str) -> PinnedMap:
        found = self._maps.get(name)
        if found is None:
            found = self._maps[name] = PinnedMap(f"{self.map_dir}/{name}", locked=name in LOCKED_MAPS)
        return found

    # ---------------------------------------------------------------- tables

    def table_add(self, entry: TableEntry) -> int:
        validate_entry(entry)
        check_switch_limits(entry, self.slots)
        key, mapname, value = self._encode(entry)
        table = self.map(mapname)
        try:
            table.update(key, value, BPF_NOEXIST)
        except DataplaneError as exc:
            if "exists" in str(exc):
                raise DataplaneError(f"table {entry.table}: duplicate entry for {list(entry.match)}") from None
            raise
        return len(table.keys())

    def _encode(self, entry: TableEntry) -> tuple:
        """(key bytes, map name, value bytes) of a valid entry."""
        m, p = entry.match, dict(entry.params)
        table, action = entry.table, entry.action
        if table == "route":
            key = _ip(m[0]) + _ip(m[1])
            if action == "route_ecmp":
                return key, table, _FORWARD.pack(_mac(p["dstAddr"]), ACT_ECMP, p["first_port"], p["ports"])
            if action == "route_forward":
                return key, table, _FORWARD.pack(_mac(p["dstAddr"]), ACT_FORWARD, p["port"], 0)
        elif table == "ipv4_lpm":
            addr, _, plen = str(m[0]).partition("/")
            key = _U32.pack(int(plen or 32)) + _ip(addr)
            if action == "ipv4_forward":
                return key, table, _FORWARD.pack(_mac(p["dstAddr"]), ACT_FORWARD, p["port"], 0)
            if action == "drop":
                return key, table, _FORWARD.pack(bytes(6), ACT_DROP, 0, 0)
        elif table == "ina_filter" and action == "ina_aggregate":
            return struct.pack("<HHHH", m[0], m[1], m[2], 0), table, _AGGREGATE.pack(
                _ip(p["switch_addr"]), p["slot_base"], p["slot_count"], p["release_mode"], p["next_agg_node"],
                p["next_fanin"], _ip(p["next_dst"]), p["next_slot_base"], p["next_slot_count"],
                _ip(p["bypass_dst"]), _ip(p["overflow_dst"]), p["overflow_agg_node"], p["overflow_fanin"],
                p["overflow_slot_base"], p["overflow_slot_count"])
        elif table in ("ina_result", "rina_gather"):
            key = struct.pack("<HH", m[0], 0) + _ip(m[1])
            if action == "ina_multicast":
                return key, table, _RESULT.pack(ACT_MULTICAST, 0, 0, p["mcast_grp"])
            if action == "ina_release":
                return key, table, _RESULT.pack(ACT_RELEASE, p["slot_base"], p["slot_count"], p["mcast_grp"])
            if action == "ina_shadow_result":
                return key, table, _RESULT.pack(ACT_SHADOW, p["slot_base"], p["pool"], p["mcast_grp"])
        elif table == "pa_job" and action == "pa_enable":
            return _U32.pack(m[0]), table, struct.pack("<II", p["pa_index"], p["aecn"])
        elif table == "esa_job" and action == "esa_enable":
            return _U32.pack(m[0]), table, _U32.pack(p["priority"])
        elif table == "esa_evict" and action == "esa_evict_to":
            return struct.pack("<HH", m[0], m[1]), table, _EVICT.pack(
                p["priority"], p["fanin"], _ip(p["overflow_dst"]), p["overflow_agg_node"], p["overflow_fanin"],
                p["overflow_slot_base"], p["overflow_slot_count"])
        elif table == "rina_rack" and action == "rina_aggregate":
            return struct.pack("<HH", m[0], m[1]), table, _RINA.pack(
                _ip(p["switch_addr"]), p["slot_base"], p["slot_count"], p["pull_grp"], p["gather_grp"])
        elif table == "ina_mcast_rewrite" and action == "mcast_rewrite":
            return _U32.pack(m[0]), table, _REWRITE.pack(_mac(p["dstAddr"]), 0, _ip(p["ipDstAddr"]))
        # an explicit default action (NoAction, ina_pass) is what a miss does already: no entry
        raise DataplaneError(f"table {table}: the ebpf target installs no entry for action {action} "
                             f"(a miss runs the table's default, {program.TABLES[table].default_action})")

    def table_clear(self, table: str) -> None:
        if table not in program.TABLES:
            raise DataplaneError(f"unknown table {table!r}; the program has {', '.join(sorted(program.TABLES))}")
        bpf_map = self.map(table)
        for key in bpf_map.keys():
            bpf_map.delete(key)

    # ---------------------------------------------------------------- registers

    def _slot(self, index: int) -> list:
        raw = self.map("agg_slots").lookup(_U32.pack(index))
        return list(_SLOT.unpack_from(raw)) + [list(struct.unpack_from(f"<{self.lanes}i", raw, _SLOT.size))]

    def _write_slot(self, index: int, fields: list) -> None:
        bpf_map = self.map("agg_slots")
        raw = bytearray(bpf_map.value_size)
        _SLOT.pack_into(raw, 0, *fields[:-1])
        struct.pack_into(f"<{self.lanes}i", raw, _SLOT.size, *fields[-1])
        bpf_map.update(_U32.pack(index), bytes(raw))

    def register_read(self, name: str, index: int) -> int:
        decl = check_object("register", name, index, self.slots, self.lanes)
        if name == "agg_value":
            return self._slot(index // self.lanes)[-1][index % self.lanes] & 0xFFFFFFFF
        if name in SLOT_FIELDS:
            return self._slot(index)[SLOT_FIELDS[name]]
        if name in PORT_FIELDS:
            mapname, field = PORT_FIELDS[name]
            return self._port_values(mapname, index)[field]
        raw = self.map(name).lookup(_U32.pack(index))
        return (_U64 if decl.bits == 64 else _U32).unpack(raw)[0]

    def register_read_all(self, name: str) -> list:
        decl = check_object("register", name, None, self.slots, self.lanes)
        return [self.register_read(name, i) for i in range(program.register_size(decl, self.slots, self.lanes))]

    def register_write(self, name: str, index: int, value: int) -> None:
        decl = check_object("register", name, index, self.slots, self.lanes)
        if not 0 <= int(value) < (1 << decl.bits):
            raise DataplaneError(f"register {name}: value {value} does not fit bit<{decl.bits}>")
        value = int(value)
        if name == "agg_value" or name in SLOT_FIELDS:
            slot = index // self.lanes if name == "agg_value" else index
            fields = self._slot(slot)
            if name == "agg_value":
                fields[-1][index % self.lanes] = value - (1 << 32) * (value >= 1 << 31)
            else:
                fields[SLOT_FIELDS[name]] = value
            self._write_slot(slot, fields)
        elif name in PORT_FIELDS:
            mapname, field = PORT_FIELDS[name]
            values = self._port_values(mapname, index)
            values[field] = value
            self._write_port_values(mapname, index, values)
        else:
            self.map(name).update(_U32.pack(index), (_U64 if decl.bits == 64 else _U32).pack(value))

    def register_reset(self, name: str) -> None:
        decl = check_object("register", name, None, self.slots, self.lanes)
        if name == "agg_value":
            for slot in range(self.slots):
                fields = self._slot(slot)
                fields[-1] = [0] * self.lanes
                self._write_slot(slot, fields)
            return
        for index in range(program.register_size(decl, self.slots, self.lanes)):
            self.register_write(name, index, 0)

    def _port_values(self, mapname: str, port: int) -> list:
        layout = _PORT_IMPAIR if mapname == "port_impair" else _PORT_COUNTS
        return list(layout.unpack(self.map(mapname).lookup(_U32.pack(port))))

    def _write_port_values(self, mapname: str, port: int, values: list) -> None:
        layout = _PORT_IMPAIR if mapname == "port_impair" else _PORT_COUNTS
        self.map(mapname).update(_U32.pack(port), layout.pack(*values))

    # ---------------------------------------------------------------- counters

    def counter_read(self, name: str, index: int) -> tuple:
        check_object("counter", name, index, self.slots, self.lanes)
        if name == "ina_stats":
            raw = self.map("ina_stats").lookup(_U32.pack(0))
            return (_U64.unpack_from(raw, 8 * index)[0], 0)
        mapname, field = PORT_FIELDS[name]
        return (self._port_values(mapname, index)[field], 0)

    def counter_reset(self, name: str) -> None:
        check_object("counter", name, None, self.slots, self.lanes)
        if name == "ina_stats":
            bpf_map = self.map("ina_stats")
            bpf_map.update(_U32.pack(0), bytes(bpf_map.value_size))
            return
        mapname, field = PORT_FIELDS[name]
        for port in range(program.MAX_PORTS):
            values = self._port_values(mapname, port)
            values[field] = 0
            self._write_port_values(mapname, port, values)

    def counters(self) -> dict:
        """As SwitchRuntime.counters, read in one pass over the maps, plus each shaped port's queue drops."""
        raw = self.map("ina_stats").lookup(_U32.pack(0))
        stats = {name: _U64.unpack_from(raw, 8 * index)[0] for name, index in program.STAT_INDICES.items()}
        ports = {port: self._port_values("port_counts", port) for port in range(program.MAX_PORTS)}
        impair = {port: self._port_values("port_impair", port) for port in range(program.MAX_PORTS)}
        stats["port_ina_tx"] = {p: v[0] for p, v in ports.items() if v[0]}
        stats["port_ecn_marked"] = {p: v[1] for p, v in ports.items() if v[1]}
        stats["ecn_marked"] = sum(stats["port_ecn_marked"].values())
        shaped = [p for p in range(program.MAX_PORTS) if self._queue(p)[4]]
        stats["queue_dropped"] = {p: ports[p][QUEUE_DROPPED] for p in shaped}
        thresholds = {name: [impair[p][i] for p in range(program.MAX_PORTS)]
                      for i, name in enumerate(program.IMPAIR_REGISTERS)}
        stats["impairment"] = impairment_stats(
            thresholds, lambda counter, port: ports[port][PORT_FIELDS[counter][1]])
        return stats

    # ---------------------------------------------------------------- replication, meter, ports

    def mc_group_create(self, group_id: int, ports) -> None:
        check_multicast_group(group_id, ports)
        ports = [int(p) for p in ports]
        if len(ports) > GROUP_PORTS:
            raise DataplaneError(f"multicast group {group_id}: {len(ports)} ports, the ebpf target's groups "
                                 f"hold {GROUP_PORTS}")
        groups = self.map("mc_groups")
        if groups.lookup(_U32.pack(group_id)) is not None:
            raise DataplaneError(f"multicast group {group_id} exists already")
        groups.update(_U32.pack(group_id), struct.pack(f"<I{GROUP_PORTS}I", len(ports),
                                                       *(ports + [0] * (GROUP_PORTS - len(ports)))))

    def mirroring_add(self, session_id: int, port: int) -> None:
        check_mirror_session(session_id, port)
        self.map("mirror_sessions").update(_U32.pack(session_id), _U32.pack(port))

    def meter_set_rates(self, name: str, index: int, rate_per_s: float, burst: int) -> None:
        if name not in program.METERS or index != 0:
            raise DataplaneError(f"unknown meter {name}[{index}]; the program has "
                                 f"{', '.join(f'{m}[0]' for m in program.METERS)}")
        rate_milli = max(0, int(round(rate_per_s * 1000)))     # rate_per_s <= 0: off, every packet conforms
        burst = max(1, int(burst))
        self.map("agg_capacity").update(_U32.pack(0), _METER.pack(0, rate_milli, burst, burst * 10**12, 0))

    def _queue(self, port: int) -> tuple:
        return _PORT_QUEUE.unpack_from(self.map("port_queue").lookup(_U32.pack(port)))

    def set_port_shaping(self, port: int, rate_bps: float, depth_pkts: int) -> None:
        if not 0 <= int(port) < program.MAX_PORTS:
            raise DataplaneError(f"port shaping on port {port}: the ebpf target shapes ports "
                                 f"0..{program.MAX_PORTS - 1}")
        depth = max(1, int(depth_pkts))
        if depth > QUEUE_RING:
            raise DataplaneError(f"port {port}: a queue of {depth} frames; the ebpf target's hold {QUEUE_RING}")
        bpf_map = self.map("port_queue")
        # the frames the model holds (ring, head, tail, last departure) stay: a run may reshape a port
        raw = bytearray(bpf_map.lookup(_U32.pack(port)))
        _, _, head, tail, _, last_departure_ns = _PORT_QUEUE.unpack_from(raw)
        rate = max(0, int(rate_bps))
        _PORT_QUEUE.pack_into(raw, 0, 0, depth if rate else 0, head, tail, rate, last_departure_ns)
        ifname = self._ifname(port)
        if rate:
            for argv in shaping_argvs(ifname, rate, depth):
                run(argv, f"switch {self.switch}: shaping port {port} ({ifname})")
        else:
            subprocess.run(unqdisc_argv(ifname, "root"), capture_output=True)
        bpf_map.update(_U32.pack(port), bytes(raw))

    def _ifname(self, port: int) -> str:
        raw = self.map("port_ifindex").lookup(_U32.pack(port))
        ifindex = _U32.unpack(raw)[0] if raw else 0
        if not ifindex:
            raise DataplaneError(f"switch {self.switch}: no interface for port {port}")
        return socket.if_indextoname(ifindex)

    def set_port_impairment(self, port, drop, duplicate, reorder, seed) -> None:
        """As bmv2's runtime does it: the mirror session of the port's duplicates, then the thresholds
        (bpf_get_prandom_u32 draws, which cannot be seeded, as bmv2's random extern cannot)."""
        thresholds = impairment_thresholds(port, drop, duplicate, reorder)
        self.mirroring_add(program.impair_session(port), port)
        self._write_port_values("port_impair", port, list(thresholds))

    def reset(self) -> None:
        """Back to the switch as it was loaded: every table entry, group, session, register, counter, meter
        and port setting gone (its ports' numbers kept), the shaped ports' qdiscs removed."""
        for port in range(program.MAX_PORTS):
            if self._queue(port)[4]:
                subprocess.run(unqdisc_argv(self._ifname(port), "root"), capture_output=True)
        for name in STATE_MAPS:
            self.map(name).clear()

    def close(self) -> None:
        for bpf_map in self._maps.values():
            bpf_map.close()
        self._maps.clear()
