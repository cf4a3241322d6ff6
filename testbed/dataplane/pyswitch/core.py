"""One pyswitch: Ingress + Egress state and the control operations of SwitchRuntime.

``PySwitchCore`` runs in the switch process (behind the Unix control socket)
and in-process in the packet tests (``LocalRuntime``), so both exercise the
same code. ``control(request)`` is the single dispatcher of runtime verbs.
"""

from testbed.dataplane import program
from testbed.dataplane.entries import (TableEntry, check_mirror_session, check_multicast_group, check_object,
                                      check_switch_limits, impairment_thresholds, validate_entry)
from testbed.dataplane.pyswitch.egress import Egress, PortQueue
from testbed.dataplane.pyswitch.ingress import Ingress, TokenBucket
from testbed.dataplane.pyswitch.tables import Table
from testbed.dataplane.runtime import VerbRuntime, impairment_stats
from testbed.errors import DataplaneError


class PySwitchCore:
    def __init__(self, name: str = "s", lanes: int = 64, slots: int = program.DEFAULT_SLOTS):
        if not 1 <= lanes <= 255:
            raise DataplaneError(f"lanes {lanes} outside [1, 255] (the INA header's elems is 8 bits)")
        if slots < 1:
            raise DataplaneError(f"slots {slots} must be >= 1")
        self.name = name
        self.tables = {name_: Table(decl) for name_, decl in program.TABLES.items()}
        self.ingress = Ingress(lanes, slots, self.tables)
        self.egress = Egress(self.tables)

    # -- packets -------------------------------------------------------------
    def receive(self, buf: bytearray, in_port: int, now: float, send):
        ingress = self.ingress
        verdict = ingress.process(buf, now, in_port)
        clone = ingress.clone
        if clone is not None:   # an ingress clone (a completing gradient's GACK): queued first, as bmv2 does
            session, frame, progress = clone
            port = self.egress.mirror_sessions.get(session)   # no session: no clone (bmv2)
            if port is not None:
                self.egress.enqueue(port, frame, now, send, gack=progress, clone=True)
        if verdict is None:
            return
        if verdict.__class__ is int:
            self.egress.enqueue(verdict, buf, now, send, gack=ingress.gack)
            return
        back = ingress.to_ingress_port
        for port in verdict:  # multicast: one copy per port, never back out of the ingress port (but a Rina chunk)
            if port != in_port or back:
                self.egress.enqueue(port, bytearray(buf), now, send, replica=True)

    # -- control -------------------------------------------------------------
    def control(self, request: dict):
        op = request.get("op")
        handler = getattr(self, f"_op_{op}", None)
        if handler is None:
            raise DataplaneError(f"unknown control operation {op!r}")
        args = {k: v for k, v in request.items() if k != "op"}
        try:
            return handler(**args)
        except TypeError as exc:
            raise DataplaneError(f"{op}: bad arguments ({exc})")

    def _op_ping(self):
        return {"switch": self.name, "lanes": self.ingress.lanes, "slots": self.ingress.slots}

    def _op_table_add(self, table, action, match, params):
        entry = TableEntry(table, action, tuple(match), tuple(tuple(p) for p in params))
        validate_entry(entry)
        check_switch_limits(entry, self.ingress.slots)
        prepared = Ingress.prepare_params(action, entry.params)
        return self.tables[table].add(entry.match, action, prepared)

    def _op_table_clear(self, table):
        if table not in self.tables:
            raise DataplaneError(f"unknown table {table!r}; the program has {', '.join(sorted(self.tables))}")
        self.tables[table].clear()

    def _register(self, name, index=None):
        """The declaration of register ``name`` (index checked) and the list holding it (None for
        ``agg_value``, a lanes-wide array)."""
        decl = check_object("register", name, index, self.ingress.slots, self.ingress.lanes)
        if name == "agg_value":
            return decl, None
        return decl, getattr(self.egress if decl.control == "Egress" else self.ingress, name)

    def _op_register_read(self, name, index):
        _, values = self._register(name, index)
        if values is None:  # agg_value: bit<32> as bmv2 reports it, unsigned
            return int(self.ingress.agg_value[index // self.ingress.lanes, index % self.ingress.lanes]) & 0xFFFFFFFF
        return values[index]

    def _op_register_read_all(self, name):
        _, values = self._register(name)
        if values is None:
            return [int(v) & 0xFFFFFFFF for v in self.ingress.agg_value.reshape(-1)]
        return list(values)

    def _op_register_write(self, name, index, value):
        decl, values = self._register(name, index)
        if not 0 <= int(value) < (1 << decl.bits):
            raise DataplaneError(f"register {name}: value {value} does not fit bit<{decl.bits}>")
        if values is None:
            lanes = self.ingress.lanes
            self.ingress.agg_value[index // lanes, index % lanes] = int(value) - (1 << 32) * (int(value) >= 1 << 31)
        else:
            values[index] = int(value)

    def _op_register_reset(self, name):
        _, values = self._register(name)
        if values is None:
            self.ingress.agg_value[:] = 0
        else:
            values[:] = [0] * len(values)

    def _counter_array(self, name):
        """The list of counter ``name``: on the Egress or Ingress object under its own name (``ina_stats``
        is Ingress's ``stats``)."""
        decl = program.COUNTERS.get(name)
        if decl is None:
            raise DataplaneError(f"unknown counter {name!r}; the program has {', '.join(sorted(program.COUNTERS))}")
        if name == "ina_stats":
            return self.ingress.stats
        return getattr(self.egress if decl.control == "Egress" else self.ingress, name)

    def _op_counter_read(self, name, index):
        check_object("counter", name, index, self.ingress.slots, self.ingress.lanes)
        values = self._counter_array(name)
        return [values[index], 0]   # (packets, bytes): the program's counters count packets

    def _op_counter_reset(self, name):
        values = self._counter_array(name)
        values[:] = [0] * len(values)

    def _op_stats(self):
        stats = {name: self.ingress.stats[i] for name, i in program.STAT_INDICES.items()}
        stats["ecn_marked"] = sum(self.egress.port_ecn_marked)
        stats["port_ina_tx"] = {p: c for p, c in enumerate(self.egress.port_ina_tx) if c}
        stats["port_ecn_marked"] = {p: c for p, c in enumerate(self.egress.port_ecn_marked) if c}
        stats["queue_dropped"] = {p: q.dropped for p, q in self.egress.queues.items()}
        stats["impairment"] = impairment_stats({name: getattr(self.egress, name) for name in program.IMPAIR_REGISTERS},
                                               lambda counter, port: getattr(self.egress, counter)[port])
        return stats

    def _op_mc_group_create(self, group_id, ports):
        check_multicast_group(group_id, ports)
        if int(group_id) in self.ingress.mc_groups:
            raise DataplaneError(f"multicast group {group_id} exists already")
        self.ingress.mc_groups[int(group_id)] = tuple(int(p) for p in ports)

    def _op_meter_set_rates(self, name, index, rate_per_s, burst):
        """rate_per_s <= 0 turns the meter off (every packet conforms), like an unconfigured bmv2 meter."""
        if name not in program.METERS or index != 0:
            raise DataplaneError(f"unknown meter {name}[{index}]; the program has "
                                 f"{', '.join(f'{m}[0]' for m in program.METERS)}")
        self.ingress.agg_capacity = TokenBucket(rate_per_s, burst) if rate_per_s > 0 else None

    def _op_set_port_shaping(self, port, rate_bps, depth_pkts):
        if rate_bps <= 0:
            self.egress.queues.pop(port, None)
        else:
            self.egress.queues[port] = PortQueue(rate_bps, depth_pkts)

    def _op_mirroring_add(self, session_id, port):
        """Mirror session ``session_id`` clones to ``port`` (bmv2: mirroring_session_add)."""
        check_mirror_session(session_id, port)
        self.egress.mirror_sessions[int(session_id)] = int(port)

    def _op_set_port_impairment(self, port, drop, duplicate, reorder, seed):
        """As bmv2's runtime does it: the mirror session of the port's duplicates, then the thresholds;
        and, what bmv2 cannot do, the port's draws restart from ``seed``."""
        thresholds = impairment_thresholds(port, drop, duplicate, reorder)
        self.egress.mirror_sessions[program.impair_session(port)] = port
        self.egress.seed_port(port, seed)
        for name, value in zip(program.IMPAIR_REGISTERS, thresholds):
            getattr(self.egress, name)[port] = value


class LocalRuntime(VerbRuntime):
    """SwitchRuntime over an in-process PySwitchCore (packet tests, benchmarks)."""

    def __init__(self, core: PySwitchCore):
        self.core = core

    def call(self, op: str, **args):
        return self.core.control({"op": op, **args})
