"""Plain data that the controller produces and a SwitchRuntime installs.

A :class:`SwitchConfig` is everything one switch needs for a run: table
entries, multicast groups, register writes, meter rates, port shaping and (for
pyswitch) port impairments. :func:`validate_entry` checks an entry against the
program declarations (``program.py``) so both targets reject the same mistakes
with the same message. :meth:`SwitchConfig.to_cli_lines` renders it as
``simple_switch_CLI`` commands: the run directory's ``entries/<switch>.txt``.
"""

import ipaddress
from dataclasses import asdict, dataclass, field

from testbed.dataplane import program
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
    """pyswitch-only: loss, duplication and reordering on a port's egress (netem is missing here)."""
    port: int
    drop: float = 0.0
    duplicate: float = 0.0
    reorder: float = 0.0
    seed: int = 1


@dataclass
class SwitchConfig:
    switch: str
    switch_id: int
    entries: list = field(default_factory=list)
    multicast_groups: list = field(default_factory=list)
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
            lines.append(f"table_add {table.control}.{e.table} {table.control}.{e.action} {match} => {params}".rstrip())
        for g in self.multicast_groups:
            lines.append(f"mc_mgrp_create {g.group_id}")
            lines.append(f"mc_node_create {g.group_id} {' '.join(str(p) for p in g.ports)}")
            lines.append(f"mc_node_associate {g.group_id} {len([x for x in self.multicast_groups if x.group_id < g.group_id])}")
        for name, index, value in self.register_writes:
            lines.append(f"register_write {program.REGISTERS[name].control}.{name} {index} {value}")
        for name, index, rate, burst in self.meter_rates:
            lines.append(f"meter_set_rates {program.METERS[name].control}.{name} {index} {rate}:{burst}")
        for s in self.port_shaping:
            lines.append(f"set_queue_rate {max(1, int(s.rate_bps / 8 / 336))} {s.port}")
            lines.append(f"set_queue_depth {s.depth_pkts} {s.port}")
        for i in self.port_impairments:
            lines.append(f"// pyswitch: impair port {i.port} drop={i.drop} duplicate={i.duplicate} reorder={i.reorder}")
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
        raise DataplaneError(f"table {entry.table}: unknown action {entry.action!r}; allowed: {', '.join(table.actions)}")
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
