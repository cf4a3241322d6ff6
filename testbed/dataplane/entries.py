"""Plain data that the controller produces and a SwitchRuntime installs.

A :class:`SwitchConfig` is everything one switch needs for a run: table
entries, multicast groups, mirror sessions, register writes, meter rates, port
shaping and port impairments. :func:`validate_entry` checks an entry against the
program declarations (``program.py``) so both targets reject the same mistakes
with the same message. :meth:`SwitchConfig.to_cli_lines` renders it as
``simple_switch_CLI`` commands: the run directory's ``entries/<switch>.txt``.
:func:`check_switch_limits` adds the checks that need the switch's size
(slot ranges, supported release modes, PA-ATP rows); both runtimes call it on
every ``table_add`` so pyswitch and bmv2 refuse the same entries;
:func:`impairment_thresholds` is the same for ``set_port_impairment``, and
:func:`check_mirror_session` for ``mirroring_add``.
"""

import ipaddress
import socket
from dataclasses import asdict, dataclass, field

from testbed.dataplane import program
from testbed.dataplane.wire import DEFAULT_LANES, ina_frame_bytes
from testbed.errors import DataplaneError


@dataclass(frozen=True)
class TableEntry:
    table: str
    action: str
    match: tuple          # one value per key; lpm keys as "a.b.c.d/len"
    params: tuple = ()    # (name, value) pairs, in the action's declared order


@dataclass(frozen=True)
class MulticastGroup:
    group_id: int
    ports: tuple


@dataclass(frozen=True)
class PortShaping:
    port: int
    rate_bps: float
    depth_pkts: int = 64


@dataclass(frozen=True)
class PortImpairment:
    """Loss, duplication and reordering on a port's egress, in the P4 program on either target (not netem).

    ``seed`` seeds pyswitch's per-port draws; bmv2's random extern cannot be seeded (p4/README.md).
    """
    port: int
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    seed: int = 1


def queue_rate_pps(rate_bps: float, frame_bytes: int) -> int:
    """bmv2's queue rate (packets/s) for a link rate: full INA frames of ``frame_bytes``; 0 = unshaped."""
    if rate_bps <= 0:
        return 0
    return max(1, int(rate_bps / (8.0 * frame_bytes)))


@dataclass
class SwitchConfig:
    switch: str
    switch_id: int
    lanes: int = DEFAULT_LANES   # frame size for bmv2's packets/s queue rates
    entries: list = field(default_factory=list)
    multicast_groups: list = field(default_factory=list)
    mirror_sessions: list = field(default_factory=list)   # (session id, port): PA-ATP's GACK clones
    register_writes: list = field(default_factory=list)   # (register, index, value)
    meter_rates: list = field(default_factory=list)       # (meter, index, rate_per_s, burst)
    port_shaping: list = field(default_factory=list)
    port_impairments: list = field(default_factory=list)

    def to_cli_lines(self):
        lines = [f"// switch {self.switch} (id {self.switch_id})"]
        for e in self.entries:
            table = program.TABLES[e.table]
            match = " ".join(str(v) for v in e.match)
            params = " ".join(str(v) for _, v in e.params)
            lines.append(f"table_add {program.qualified_name(table.control, e.table)} "
                         f"{program.qualified_name(table.control, e.action)} {match} => {params}".rstrip())
        for node_handle, g in enumerate(self.multicast_groups):
            # bmv2 hands out node handles 0, 1, ... in creation order; the rid is the group id
            lines.append(f"mc_mgrp_create {g.group_id}")
            lines.append(f"mc_node_create {g.group_id} {' '.join(str(p) for p in g.ports)}")
            lines.append(f"mc_node_associate {g.group_id} {node_handle}")
        for session, port in self.mirror_sessions:
            lines.append(f"mirroring_add {session} {port}")
        for name, index, value in self.register_writes:
            lines.append(f"register_write {program.REGISTERS[name].control}.{name} {index} {value}")
        for name, index, rate, burst in self.meter_rates:
            lines.append(f"meter_set_rates {program.METERS[name].control}.{name} {index} {rate}:{burst}")
        for s in self.port_shaping:
            lines.append(f"set_queue_rate {queue_rate_pps(s.rate_bps, ina_frame_bytes(self.lanes))} {s.port}")
            lines.append(f"set_queue_depth {s.depth_pkts} {s.port}")
        for i in self.port_impairments:
            lines.append(f"// impair port {i.port}: drop={i.drop} duplicate={i.duplicate} reorder={i.reorder} "
                         f"(seed {i.seed}: pyswitch only)")
            lines.append(f"mirroring_add {program.impair_session(i.port)} {i.port}")
            for name, probability in zip(program.IMPAIR_REGISTERS, (i.drop, i.duplicate, i.reorder)):
                lines.append(f"register_write {program.REGISTERS[name].control}.{name} {i.port} "
                             f"{program.impair_threshold(probability)}")
        return lines

    def to_dict(self):
        return asdict(self)


def _check_value(kind: str, bits: int, value, what: str, lpm: bool = False):
    if kind == "ip":
        try:
            if lpm:
                ipaddress.IPv4Network(str(value), strict=False)
            else:
                ipaddress.IPv4Address(str(value))
        except ValueError:
            raise DataplaneError(f"{what}: expected an IPv4 address{'/prefix' if lpm else ''}, got {value!r}")
    elif kind == "mac":
        parts = str(value).split(":")
        if len(parts) != 6 or not all(len(p) == 2 and all(c in "0123456789abcdefABCDEF" for c in p) for p in parts):
            raise DataplaneError(f"{what}: expected a MAC address aa:bb:cc:dd:ee:ff, got {value!r}")
    else:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << bits):
            raise DataplaneError(f"{what}: expected an integer in [0, 2^{bits}), got {value!r}")


def validate_entry(entry: TableEntry):
    """Raise DataplaneError naming the table, action or parameter that is wrong."""
    table = program.TABLES.get(entry.table)
    if table is None:
        raise DataplaneError(f"unknown table {entry.table!r}; the program has {', '.join(sorted(program.TABLES))}")
    if entry.action not in table.actions:
        raise DataplaneError(f"table {entry.table}: unknown action {entry.action!r}; "
                             f"allowed: {', '.join(table.actions)}")
    if len(entry.match) != len(table.keys):
        raise DataplaneError(f"table {entry.table}: expected {len(table.keys)} match values "
                             f"({', '.join(k.field for k in table.keys)}), got {len(entry.match)}")
    for key, value in zip(table.keys, entry.match):
        _check_value(key.kind, key.bits, value, f"table {entry.table} key {key.field}", lpm=key.match == "lpm")
    action = program.ACTIONS[entry.action]
    names = [n for n, _ in entry.params]
    if names != action.param_names():
        raise DataplaneError(f"action {entry.action}: expected parameters ({', '.join(action.param_names())}), "
                             f"got ({', '.join(names)})")
    for param, (_, value) in zip(action.params, entry.params):
        _check_value(param.kind, param.bits, value, f"action {entry.action} parameter {param.name}")


def check_switch_limits(entry: TableEntry, slots: int) -> None:
    """Checks of a valid entry against one switch: slot ranges inside its ``slots``, release mode supported.

    Raise DataplaneError naming the action, the parameter and the limit.
    """
    values = dict(entry.params)
    if entry.action in ("ina_aggregate", "ina_release", "ina_shadow_result"):
        base = values["slot_base"]
        count = 2 * values["pool"] if entry.action == "ina_shadow_result" else values["slot_count"]
        if count < 1 or base + count > slots:
            raise DataplaneError(f"{entry.action}: slot range [{base}, {base + count}) is empty or outside the "
                                 f"switch's {slots} slots (p4 -D INA_SLOTS / switch.slots)")
    if entry.action == "ina_aggregate" and values["release_mode"] not in program.SUPPORTED_RELEASE_MODES:
        raise DataplaneError(f"ina_aggregate: release_mode {values['release_mode']} is not supported "
                             f"(0 = release on emit, 1 = release on RESULT, 2 = SwitchML shadow copies, "
                             f"3 = release on emit with hold)")
    if entry.action == "pa_enable":
        if values["pa_index"] >= program.PA_JOBS:
            raise DataplaneError(f"pa_enable: pa_index {values['pa_index']} outside the program's "
                                 f"{program.PA_JOBS} PA-ATP rows [0, {program.PA_JOBS})")
        if values["aecn"] not in (0, 1):
            raise DataplaneError(f"pa_enable: aecn {values['aecn']} is not 0 (no AECN here) or 1")


def encode_value(kind: str, bits: int, value) -> bytes:
    """A declared key or parameter value as packet/bmv2 bytes: ceil(bits / 8) bytes, big-endian."""
    if kind == "ip":
        return socket.inet_aton(str(value))
    if kind == "mac":
        return bytes(int(part, 16) for part in str(value).split(":"))
    return int(value).to_bytes((bits + 7) // 8, "big")


def check_object(kind: str, name: str, index=None, slots: int = program.DEFAULT_SLOTS,
                 lanes: int = DEFAULT_LANES):
    """The declaration of register/counter ``name``, with ``index`` checked against its size.

    Both runtimes call this, so a wrong name or index gets the same message on either target.
    """
    declared = {"register": program.REGISTERS, "counter": program.COUNTERS}[kind]
    decl = declared.get(name)
    if decl is None:
        raise DataplaneError(f"unknown {kind} {name!r}; the program has {', '.join(sorted(declared))}")
    size = program.register_size(decl, slots, lanes)
    if index is not None and not 0 <= index < size:
        raise DataplaneError(f"{kind} {name}: index {index} out of range [0, {size})")
    return decl


def impairment_thresholds(port: int, drop: float, duplicate: float, reorder: float) -> tuple:
    """The ``impair_drop``, ``impair_duplicate`` and ``impair_reorder`` values of ``port`` for the given
    probabilities; DataplaneError for a port without impairment registers or a probability outside [0, 1]."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < program.MAX_PORTS:
        raise DataplaneError(f"impairment on port {port!r}: the program's impairment registers and counters "
                             f"hold ports 0..{program.MAX_PORTS - 1}")
    for label, value in (("drop", drop), ("duplicate", duplicate), ("reorder", reorder)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise DataplaneError(f"port {port}: {label} probability {value!r} outside [0, 1]")
    return tuple(program.impair_threshold(p) for p in (drop, duplicate, reorder))


def check_mirror_session(session_id: int, port: int) -> None:
    """A mirror session clones to one port: session ids in [1, program.MAX_MIRROR_SESSION], 9-bit ports."""
    if isinstance(session_id, bool) or not isinstance(session_id, int) or \
            not 1 <= session_id <= program.MAX_MIRROR_SESSION:
        raise DataplaneError(f"mirror session id {session_id!r} outside [1, {program.MAX_MIRROR_SESSION}]")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 511:
        raise DataplaneError(f"mirror session {session_id}: port {port!r} must be an integer in [0, 511)")


def check_multicast_group(group_id: int, ports) -> None:
    """Group 0 means 'no multicast' in v1model; ports must be distinct 9-bit port numbers."""
    if isinstance(group_id, bool) or not isinstance(group_id, int) or not 1 <= group_id < (1 << 16):
        raise DataplaneError(f"multicast group id {group_id!r} outside [1, 65535] (0 means no multicast)")
    ports = list(ports)
    if len(set(ports)) != len(ports) or not all(isinstance(p, int) and 0 <= p < 511 for p in ports):
        raise DataplaneError(f"multicast group {group_id}: ports {ports} must be distinct integers in [0, 511)")
