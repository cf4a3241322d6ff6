"""SwitchRuntime: how the controller talks to a running switch, whatever the target.

Method names follow bmv2's runtime API (``table_add``, ``register_read``,
``mc_mgrp_create`` ...), so the bmv2 Thrift implementation is a thin mapping
and the pyswitch client speaks the same verbs over a Unix socket. Nothing
above this interface knows which target runs.

:func:`install` pushes a :class:`SwitchConfig` through any runtime.
"""

import abc
import json
import socket
import threading
import time

from testbed.dataplane import program
from testbed.dataplane.entries import SwitchConfig, TableEntry, validate_entry
from testbed.errors import DataplaneError
from testbed.metrics.host_delay import switch_wait_summary


class SwitchRuntime(abc.ABC):
    """Control-plane handle of one switch."""

    @abc.abstractmethod
    def table_add(self, entry: TableEntry) -> int: ...

    @abc.abstractmethod
    def table_clear(self, table: str) -> None: ...

    @abc.abstractmethod
    def register_read(self, name: str, index: int) -> int: ...

    @abc.abstractmethod
    def register_write(self, name: str, index: int, value: int) -> None: ...

    @abc.abstractmethod
    def register_reset(self, name: str) -> None: ...

    @abc.abstractmethod
    def counter_read(self, name: str, index: int) -> tuple: ...

    @abc.abstractmethod
    def mc_group_create(self, group_id: int, ports) -> None: ...

    @abc.abstractmethod
    def mirroring_add(self, session_id: int, port: int) -> None:
        """Mirror session ``session_id`` clones to ``port`` (bmv2's ``mirroring_add``): PA-ATP's GACK clones
        use ``program.gack_session(port)`` -> ``port``."""

    @abc.abstractmethod
    def meter_set_rates(self, name: str, index: int, rate_per_s: float, burst: int) -> None: ...

    @abc.abstractmethod
    def set_port_shaping(self, port: int, rate_bps: float, depth_pkts: int) -> None: ...

    @abc.abstractmethod
    def set_port_impairment(self, port: int, drop: float, duplicate: float, reorder: float, seed: int) -> None:
        """Loss, duplication and reordering probabilities of ``port``'s egress: the thresholds of the
        Egress registers ``impair_drop`` / ``impair_duplicate`` / ``impair_reorder`` and the mirror
        session ``program.impair_session(port)`` -> ``port`` for the duplicates. ``seed`` seeds the
        port's draws where the target can (pyswitch; bmv2's random extern cannot be seeded)."""

    @abc.abstractmethod
    def register_read_all(self, name: str) -> list:
        """Every entry of register ``name`` (bmv2's ``bm_register_read_all``)."""

    def host_delay(self) -> dict:
        """How long packets waited inside the switch before their egress queue (register ``switch_wait``), as a
        host-delay meter's summary (:func:`testbed.metrics.host_delay.switch_wait_summary`)."""
        return switch_wait_summary(self.register_read_all("switch_wait"))

    def counter_reset(self, name: str) -> None:
        raise DataplaneError(f"{type(self).__name__} cannot reset counters")

    def counters(self) -> dict:
        """Every ``ina_stats`` counter by name, ``ecn_marked`` (total), per-port INA / CE counts
        (``port_ina_tx``, ``port_ecn_marked``: {port: packets}, non-zero ports only) and what each
        impaired port's impairment did (``impairment``, see :func:`impairment_stats`)."""
        stats = {name: self.counter_read("ina_stats", index)[0] for name, index in program.STAT_INDICES.items()}
        for counter in ("port_ina_tx", "port_ecn_marked"):
            per_port = {}
            for port in range(program.MAX_PORTS):
                packets = self.counter_read(counter, port)[0]
                if packets:
                    per_port[port] = packets
            stats[counter] = per_port
        stats["ecn_marked"] = sum(stats["port_ecn_marked"].values())
        thresholds = {name: self.register_read_all(name) for name in program.IMPAIR_REGISTERS}
        stats["impairment"] = impairment_stats(thresholds, lambda counter, port: self.counter_read(counter, port)[0])
        return stats

    def close(self) -> None:
        pass


def impairment_stats(thresholds: dict, count) -> dict:
    """``{port: {"dropped": n, "duplicated": n, "reordered": n}}`` for every impaired port: one whose
    ``impair_drop``, ``impair_duplicate`` or ``impair_reorder`` threshold is not 0. ``thresholds`` maps
    each of those registers to its per-port values; ``count(counter, port)`` reads a counter. Both
    targets report ``impairment`` by this rule, so their stats have the same shape."""
    impaired = [port for port in range(program.MAX_PORTS) if any(values[port] for values in thresholds.values())]
    return {port: {label: count(counter, port) for label, counter in program.IMPAIR_COUNTERS.items()}
            for port in impaired}


def install(config: SwitchConfig, runtime: SwitchRuntime) -> None:
    """Push every part of ``config`` through ``runtime`` (entries validated first)."""
    for entry in config.entries:
        validate_entry(entry)
    for entry in config.entries:
        runtime.table_add(entry)
    for group in config.multicast_groups:
        runtime.mc_group_create(group.group_id, group.ports)
    for session_id, port in config.mirror_sessions:
        runtime.mirroring_add(session_id, port)
    for name, index, value in config.register_writes:
        runtime.register_write(name, index, value)
    for name, index, rate, burst in config.meter_rates:
        runtime.meter_set_rates(name, index, rate, burst)
    for shaping in config.port_shaping:
        runtime.set_port_shaping(shaping.port, shaping.rate_bps, shaping.depth_pkts)
    for imp in config.port_impairments:
        runtime.set_port_impairment(imp.port, imp.drop, imp.duplicate, imp.reorder, imp.seed)


class VerbRuntime(SwitchRuntime):
    """A runtime whose verbs are JSON-able requests handled by ``call`` (pyswitch, in or out of process)."""

    @abc.abstractmethod
    def call(self, op: str, **args): ...

    def table_add(self, entry: TableEntry) -> int:
        return self.call("table_add", table=entry.table, action=entry.action,
                         match=list(entry.match), params=[list(p) for p in entry.params])

    def table_clear(self, table: str) -> None:
        self.call("table_clear", table=table)

    def register_read(self, name: str, index: int) -> int:
        return self.call("register_read", name=name, index=index)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.call("register_write", name=name, index=index, value=value)

    def register_reset(self, name: str) -> None:
        self.call("register_reset", name=name)

    def register_read_all(self, name: str) -> list:
        return self.call("register_read_all", name=name)

    def counter_read(self, name: str, index: int) -> tuple:
        return tuple(self.call("counter_read", name=name, index=index))

    def counter_reset(self, name: str) -> None:
        self.call("counter_reset", name=name)

    def counters(self) -> dict:
        """As SwitchRuntime.counters, plus pyswitch's queue drops, in one request. Its per-port tables are
        keyed by port number, as on bmv2 (JSON would give the process's as strings)."""
        stats = self.call("stats")
        return {name: {int(port): v for port, v in value.items()} if isinstance(value, dict) else value
                for name, value in stats.items()}

    def mc_group_create(self, group_id: int, ports) -> None:
        self.call("mc_group_create", group_id=group_id, ports=list(ports))

    def mirroring_add(self, session_id: int, port: int) -> None:
        self.call("mirroring_add", session_id=session_id, port=port)

    def meter_set_rates(self, name: str, index: int, rate_per_s: float, burst: int) -> None:
        self.call("meter_set_rates", name=name, index=index, rate_per_s=rate_per_s, burst=burst)

    def set_port_shaping(self, port: int, rate_bps: float, depth_pkts: int) -> None:
        self.call("set_port_shaping", port=port, rate_bps=rate_bps, depth_pkts=depth_pkts)

    def set_port_impairment(self, port, drop, duplicate, reorder, seed) -> None:
        self.call("set_port_impairment", port=port, drop=drop, duplicate=duplicate, reorder=reorder, seed=seed)


class PySwitchRuntime(VerbRuntime):
    """Client of a pyswitch process: one JSON request per line over its Unix control socket."""

    def __init__(self, socket_path: str, switch: str = "?", timeout_s: float = 10.0):
        self.switch = switch
        self.socket_path = socket_path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout_s)
        try:
            self._sock.connect(socket_path)
        except OSError as exc:
            self._sock.close()
            raise DataplaneError(f"switch {switch}: cannot reach pyswitch control socket {socket_path}: {exc}")
        self._file = self._sock.makefile("rwb")
        self._lock = threading.Lock()   # the orchestrator and the injection scheduler share a runtime

    @classmethod
    def wait_for(cls, socket_path: str, switch: str, timeout_s: float, alive=lambda: True) -> "PySwitchRuntime":
        """Poll until the switch answers ``ping`` (readiness by polling, not by sleeping)."""
        deadline = time.monotonic() + timeout_s
        last_error = None
        while time.monotonic() < deadline:
            if not alive():
                raise DataplaneError(f"switch {switch}: pyswitch exited during start-up")
            try:
                runtime = cls(socket_path, switch, timeout_s=timeout_s)
                runtime.call("ping")
                return runtime
            except (DataplaneError, OSError) as exc:
                last_error = exc
                time.sleep(0.02)
        raise DataplaneError(f"switch {switch}: pyswitch not ready after {timeout_s:.0f}s ({last_error})")

    def host_delay(self) -> dict:
        """The switch process's host-delay meter (:class:`testbed.metrics.host_delay.HostDelayMeter`'s
        summary): how long frames waited for it, how late its shaped queues' departures left."""
        return self.call("host_delay")

    def call(self, op: str, **args):
        request = json.dumps({"op": op, **args}).encode() + b"\n"
        try:
            with self._lock:
                self._file.write(request)
                self._file.flush()
                line = self._file.readline()
        except OSError as exc:
            raise DataplaneError(f"switch {self.switch}: control request {op} failed: {exc}")
        if not line:
            raise DataplaneError(f"switch {self.switch}: control socket closed during {op}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise DataplaneError(f"switch {self.switch}: {reply.get('error', 'unknown error')}")
        return reply.get("result")

    def close(self) -> None:
        try:
            self._file.close()
            self._sock.close()
        except OSError:
            pass
