"""The bmv2 target without bmv2: p4c command and cache keys, value encoding, the Thrift mapping
(against a fake client that records calls), the simple_switch command line and start-up errors."""

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.dataplane.entries import encode_value, queue_rate_pps
from testbed.dataplane.wire import ina_frame_bytes
from bm_runtime.standard import ttypes
from sswitch_runtime import ttypes as sswitch_ttypes

from testbed.dataplane import bmv2, p4build, program
from testbed.dataplane.entries import PortImpairment, SwitchConfig, TableEntry
from testbed.dataplane.runtime import install
from testbed.errors import DataplaneError, EnvironmentMissingError


# -- p4build -----------------------------------------------------------------------------

def test_p4c_argv():
    argv = p4build.p4c_argv(Path("/src/p4/ina.p4"), Path("/out"), {"INA_SLOTS": 64, "INA_LANES": 32}, "/usr/bin/p4c")
    assert argv == ["/usr/bin/p4c", "--target", "bmv2", "--arch", "v1model", "--std", "p4-16",
                    "-DINA_LANES=32", "-DINA_SLOTS=64", "-o", "/out", "/src/p4/ina.p4"]


def test_defines_are_checked():
    assert p4build.defines_for(64, 1024) == {"INA_LANES": 64, "INA_SLOTS": 1024}
    with pytest.raises(DataplaneError, match="INA_LANES 256"):
        p4build.defines_for(256, 8)
    with pytest.raises(DataplaneError, match="INA_SLOTS 0"):
        p4build.defines_for(8, 0)


def test_cache_key_follows_sources_defines_and_compiler(tmp_path):
    a, b = tmp_path / "ina.p4", tmp_path / "ina_lanes.p4"
    a.write_text("control A {}")
    b.write_text("INA_LANE(0)")
    defines = {"INA_LANES": 64, "INA_SLOTS": 1024}
    key = p4build.cache_key([a, b], defines, "p4c 1.2.4.2")
    assert key == p4build.cache_key([b, a], dict(reversed(list(defines.items()))), "p4c 1.2.4.2")
    assert key != p4build.cache_key([a, b], {**defines, "INA_LANES": 32}, "p4c 1.2.4.2")
    assert key != p4build.cache_key([a, b], defines, "p4c 1.2.5.0")
    b.write_text("INA_LANE(1)")
    assert key != p4build.cache_key([a, b], defines, "p4c 1.2.4.2")


def test_source_files_cover_the_program():
    names = {p.name for p in p4build.source_files()}
    assert {"ina.p4", "ina_lanes.p4"} <= names


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INATB_P4_CACHE", str(tmp_path / "c"))
    assert p4build.default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("INATB_P4_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert p4build.default_cache_dir() == tmp_path / "x" / "inatb" / "p4"


def _fake_p4c(tmp_path, body):
    script = tmp_path / "p4c"
    script.write_text(f"#!{sys.executable}\n{body}")
    script.chmod(0o755)
    return str(script)


def test_compile_program_caches_and_reports_errors(tmp_path):
    calls = tmp_path / "calls"
    ok = _fake_p4c(tmp_path, f"""
import sys, pathlib
if sys.argv[1] == "--version":
    print("p4c 1.2.4.99 (fake)"); raise SystemExit(0)
with open({str(calls)!r}, "a") as f: f.write(" ".join(sys.argv[1:]) + "\\n")
out = pathlib.Path(sys.argv[sys.argv.index("-o") + 1])
(out / "ina.json").write_text('{{"program": "ina"}}')
""")
    cache = tmp_path / "cache"
    first = p4build.compile_program(64, 128, p4c=ok, cache_dir=cache)
    again = p4build.compile_program(64, 128, p4c=ok, cache_dir=cache)
    assert first == again and first.read_text() == '{"program": "ina"}'
    assert calls.read_text().count("--target bmv2") == 1            # the second call hit the cache
    assert "-DINA_SLOTS=128" in calls.read_text()
    p4build.compile_program(32, 128, p4c=ok, cache_dir=cache)
    assert calls.read_text().count("--target bmv2") == 2            # other defines, another build

    bad = _fake_p4c(tmp_path, """
import sys
if sys.argv[1] == "--version":
    print("p4c 1.2.4.99 (fake)"); raise SystemExit(0)
print("ina.p4(120): [--Werror=type-error] error: something is wrong", file=sys.stderr)
raise SystemExit(1)
""")
    with pytest.raises(p4build.P4CompileError, match=r"(?s)exit 1.*something is wrong"):
        p4build.compile_program(16, 128, p4c=bad, cache_dir=tmp_path / "other")


def test_missing_p4c_says_how_to_get_it(tmp_path):
    with pytest.raises(EnvironmentMissingError, match="p4lang-p4c"):
        p4build.compile_program(64, 64, p4c=str(tmp_path / "no-such-p4c"), cache_dir=tmp_path)


# -- value encoding -------------------------------------------------------------------------

def test_encode_value_widths():
    assert encode_value("ip", 32, "10.0.1.2") == bytes([10, 0, 1, 2])
    assert encode_value("mac", 48, "02:00:00:00:00:0a") == bytes([2, 0, 0, 0, 0, 10])
    assert encode_value("int", 9, 3) == b"\x00\x03"
    assert encode_value("int", 8, 1) == b"\x01"
    assert encode_value("int", 16, 0xBEEF) == b"\xbe\xef"
    assert encode_value("int", 32, 1024) == b"\x00\x00\x04\x00"


def test_register_writes_are_twos_complement_reads_refuse_bmv2_saturation():
    assert bmv2.to_i64((1 << 64) - 1) == -1 and bmv2.to_i64(1 << 63) == -(1 << 63)
    assert bmv2.to_i64((1 << 63) - 2) == (1 << 63) - 2
    for bits, value in ((64, (1 << 63) - 2), (32, 0xFFFFFFFE), (16, 7), (64, 0)):
        assert bmv2.from_i64(value, bits) == value
    with pytest.raises(DataplaneError, match=r"agg_bitmap\[3\]: .*saturates at 2\^63-1.*bit<64>"):
        bmv2.from_i64(bmv2.I64_MAX, 64, "agg_bitmap[3]")       # what bmv2 answers for any value >= 2^63-1


def test_port_map_and_rates():
    assert bmv2.port_map([1, 3]) == "1010"
    assert bmv2.port_map([0]) == "1"
    assert bmv2.port_map([]) == ""
    assert ina_frame_bytes(64) == 336
    assert queue_rate_pps(100e6, 336) == 37202
    assert queue_rate_pps(10, 336) == 1
    assert queue_rate_pps(0, 336) == 0


# -- the Thrift mapping, against a fake client -------------------------------------------------

class FakeClient:
    """Records every call; answers what the runtime needs."""

    def __init__(self, answers=None, fail=None):
        self.calls = []
        self.answers = answers or {}
        self.fail = fail or {}

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            if name in self.fail:
                raise self.fail[name]
            answer = self.answers.get(name)
            return answer(*args) if callable(answer) else answer
        return call


@pytest.fixture
def fake():
    standard = FakeClient({"bm_mt_add_entry": 7, "bm_register_read": 0xFFFF,
                           "bm_counter_read": ttypes.BmCounterValue(bytes=0, packets=5)})
    pre = FakeClient({"bm_mc_mgrp_create": 11, "bm_mc_node_create": 3})
    sswitch = FakeClient()
    runtime = bmv2.Bmv2Runtime(switch="s1", lanes=64, slots=64, clients=(standard, pre, sswitch),
                               ttypes=(ttypes, sswitch_ttypes))
    return runtime, standard, pre, sswitch


def test_table_add_names_and_encodes(fake):
    runtime, standard, _, _ = fake
    handle = runtime.table_add(TableEntry("ipv4_lpm", "ipv4_forward", ("10.0.0.0/8",),
                                          (("dstAddr", "02:00:00:00:00:01"), ("port", 2))))
    assert handle == 7
    name, (cxt, table, match, action, data, options) = standard.calls[-1]
    assert (name, cxt, table, action) == ("bm_mt_add_entry", 0, "Ingress.ipv4_lpm", "Ingress.ipv4_forward")
    assert match[0].type == ttypes.BmMatchParamType.LPM
    assert (match[0].lpm.key, match[0].lpm.prefix_length) == (bytes([10, 0, 0, 0]), 8)
    assert data == [bytes([2, 0, 0, 0, 0, 1]), b"\x00\x02"]
    runtime.table_add(TableEntry("ina_filter", "ina_aggregate", (1, 2, 3), (
        ("switch_addr", "10.0.1.1"), ("slot_base", 0), ("slot_count", 8), ("release_mode", 1),
        ("next_agg_node", 9), ("next_fanin", 2), ("next_dst", "10.0.0.100"), ("next_slot_base", 0),
        ("next_slot_count", 0), ("bypass_dst", "10.0.0.100"), ("overflow_dst", "10.0.0.100"),
        ("overflow_agg_node", 0), ("overflow_fanin", 0), ("overflow_slot_base", 0), ("overflow_slot_count", 0))))
    _, (_, table, match, action, data, _) = standard.calls[-1]
    assert (table, action) == ("Ingress.ina_filter", "Ingress.ina_aggregate")
    assert [m.exact.key for m in match] == [b"\x00\x01", b"\x00\x02", b"\x00\x03"]
    assert [len(d) for d in data] == [4, 4, 4, 1, 2, 2, 4, 4, 4, 4, 4, 2, 2, 4, 4] and data[3] == b"\x01"
    runtime.table_add(TableEntry("route", "NoAction", ("10.0.0.1", "10.0.0.2")))
    assert standard.calls[-1][1][3] == "NoAction"
    runtime.table_add(TableEntry("ina_mcast_rewrite", "mcast_rewrite", (3,),
                                 (("dstAddr", "02:00:00:00:00:03"), ("ipDstAddr", "10.0.0.3"))))
    assert standard.calls[-1][1][1:4:2] == ("Egress.ina_mcast_rewrite", "Egress.mcast_rewrite")


def test_table_add_refuses_what_pyswitch_refuses_before_any_call(fake):
    runtime, standard, _, _ = fake
    with pytest.raises(DataplaneError, match="outside the switch's 64 slots"):
        runtime.table_add(TableEntry("ina_result", "ina_release", (1, "10.0.0.1"),
                                     (("slot_base", 60), ("slot_count", 8), ("mcast_grp", 0))))
    with pytest.raises(DataplaneError, match="unknown table"):
        runtime.table_add(TableEntry("nope", "drop", ()))
    assert standard.calls == []


def test_bmv2_errors_become_dataplane_errors(fake):
    runtime, standard, _, _ = fake
    standard.fail["bm_mt_add_entry"] = ttypes.InvalidTableOperation(code=17)
    with pytest.raises(DataplaneError, match="switch s1: bmv2 refused table_add route .*DUPLICATE_ENTRY"):
        runtime.table_add(TableEntry("route", "NoAction", ("10.0.0.1", "10.0.0.2")))


def test_registers_counters_meters_multicast_queues(fake):
    runtime, standard, pre, sswitch = fake
    assert runtime.register_read("agg_bitmap", 3) == 0xFFFF
    assert standard.calls[-1] == ("bm_register_read", (0, "Ingress.agg_bitmap", 3))
    assert runtime.register_read("agg_count", 3) == 0xFFFF
    standard.answers["bm_register_read"] = bmv2.I64_MAX            # bmv2's saturated answer
    with pytest.raises(DataplaneError, match=r"switch s1: register_read agg_bitmap\[3\]: .*saturates"):
        runtime.register_read("agg_bitmap", 3)
    assert runtime.register_read("agg_value", 3) == 0xFFFFFFFF    # narrower registers are never ambiguous
    runtime.register_write("agg_bitmap", 1, (1 << 64) - 1)
    assert standard.calls[-1] == ("bm_register_write", (0, "Ingress.agg_bitmap", 1, -1))
    runtime.register_write("ecn_threshold", 0, 20)
    assert standard.calls[-1] == ("bm_register_write", (0, "Egress.ecn_threshold", 0, 20))
    runtime.register_reset("agg_value")
    assert standard.calls[-1] == ("bm_register_reset", (0, "Ingress.agg_value"))
    with pytest.raises(DataplaneError, match="out of range"):
        runtime.register_read("agg_value", 64 * 64)
    assert runtime.counter_read("port_ina_tx", 4) == (5, 0)
    assert standard.calls[-1] == ("bm_counter_read", (0, "Egress.port_ina_tx", 4))
    runtime.meter_set_rates("agg_capacity", 0, 2000.0, 16)
    name, (cxt, meter, index, rates) = standard.calls[-1]
    assert (name, meter, index, len(rates)) == ("bm_meter_set_rates", "Ingress.agg_capacity", 0, 2)
    assert rates[0].units_per_micros == pytest.approx(0.002) and rates[0].burst_size == 16
    runtime.meter_set_rates("agg_capacity", 0, 0, 0)     # off: a cap no stream reaches
    assert standard.calls[-1][1][3][0].units_per_micros == pytest.approx(1000.0)
    runtime.mc_group_create(5, [1, 3])
    assert pre.calls == [("bm_mc_mgrp_create", (0, 5)), ("bm_mc_node_create", (0, 5, "1010", "")),
                         ("bm_mc_node_associate", (0, 11, 3))]
    runtime.set_port_shaping(2, 100e6, 64)
    assert sswitch.calls == [("set_egress_queue_rate", (2, 37202)), ("set_egress_queue_depth", (2, 64))]


def test_set_port_impairment_maps_the_mirror_session_then_writes_thresholds(fake):
    runtime, standard, _, sswitch = fake
    runtime.set_port_impairment(3, 0.25, 1.0, 0.0, 7)
    assert sswitch.calls == [("mirroring_session_add", (1003, sswitch_ttypes.MirroringSessionConfig(port=3)))]
    assert standard.calls == [("bm_register_write", (0, "Egress.impair_drop", 3, 1 << 29)),
                              ("bm_register_write", (0, "Egress.impair_duplicate", 3, 1 << 31)),
                              ("bm_register_write", (0, "Egress.impair_reorder", 3, 0))]
    sswitch.fail["mirroring_session_add"] = sswitch_ttypes.InvalidMirroringOperation(code=1)
    with pytest.raises(DataplaneError, match="switch s1: bmv2 refused mirroring_session_add 1004 .*SESSION_NOT_FOUND"):
        runtime.set_port_impairment(4, 0.1, 0.0, 0.0, 7)


def test_mirroring_add_maps_a_session_to_a_port_and_install_pushes_the_configs_sessions(fake):
    """PA-ATP's GACK sessions: mirroring_add(gack_session(p), p), checked before any call, and a switch
    config's mirror_sessions go through it on install."""
    runtime, standard, _, sswitch = fake
    runtime.mirroring_add(program.gack_session(5), 5)
    assert sswitch.calls == [("mirroring_session_add", (2005, sswitch_ttypes.MirroringSessionConfig(port=5)))]
    for session, port, message in ((0, 1, "mirror session id 0 outside"), (1 << 15, 1, "outside \\[1, 32767\\]"),
                                   (2001, 511, "port 511 must be"), (True, 1, "mirror session id True")):
        with pytest.raises(DataplaneError, match=message):
            runtime.mirroring_add(session, port)
    assert len(sswitch.calls) == 1 and standard.calls == []
    config = SwitchConfig("s1", 1, mirror_sessions=[(2001, 1), (2002, 2)])
    install(config, runtime)
    assert sswitch.calls[1:] == [("mirroring_session_add", (2001, sswitch_ttypes.MirroringSessionConfig(port=1))),
                                 ("mirroring_session_add", (2002, sswitch_ttypes.MirroringSessionConfig(port=2)))]
    assert config.to_cli_lines()[-2:] == ["mirroring_add 2001 1", "mirroring_add 2002 2"]


@pytest.mark.parametrize("args, message", [
    ((1, 1.01, 0.0, 0.0), r"port 1: drop probability 1.01 outside \[0, 1\]"),
    ((1, 0.0, -0.1, 0.0), r"port 1: duplicate probability -0.1 outside"),
    ((1, 0.0, 0.0, float("nan")), r"port 1: reorder probability nan outside"),
    ((1, 0.0, 0.0, True), r"reorder probability True outside"),
    ((64, 0.1, 0.0, 0.0), r"impairment on port 64: .* hold ports 0\.\.63"),
    ((-1, 0.1, 0.0, 0.0), r"impairment on port -1"),
])
def test_bad_impairments_are_refused_before_any_call(fake, args, message):
    runtime, standard, _, sswitch = fake
    with pytest.raises(DataplaneError, match=message):
        runtime.set_port_impairment(*args, 1)
    assert standard.calls == [] and sswitch.calls == []


def test_impairment_thresholds():
    from testbed.dataplane.entries import impairment_thresholds
    assert impairment_thresholds(0, 0.0, 1.0, 0.5) == (0, program.IMPAIR_SCALE, program.IMPAIR_SCALE // 2)
    assert program.impair_threshold(0.3) == round(0.3 * 2**31)
    assert program.impair_threshold(2**-32) == 0       # below the resolution of 2^-31: never


def test_counters_summary(fake):
    runtime, standard, _, _ = fake
    standard.answers["bm_counter_read"] = lambda cxt, name, index: ttypes.BmCounterValue(
        bytes=0, packets=index + 1 if name == "Ingress.ina_stats" or index == 4 else 0)
    thresholds = {"Egress.impair_drop": {4: 99}, "Egress.impair_reorder": {2: 1}}
    standard.answers["bm_register_read_all"] = lambda cxt, name: [thresholds.get(name, {}).get(port, 0)
                                                                  for port in range(program.MAX_PORTS)]
    stats = runtime.counters()
    assert stats["ina_rx"] == 1 and stats["result_released"] == program.STAT_INDICES["result_released"] + 1
    assert stats["port_ina_tx"] == {4: 5} and stats["ecn_marked"] == 5
    # the impaired ports (a threshold not 0) only, in pyswitch's shape
    assert stats["impairment"] == {2: {"dropped": 0, "duplicated": 0, "reordered": 0},
                                   4: {"dropped": 5, "duplicated": 5, "reordered": 5}}
    reads = [args[1] for name, args in standard.calls if name == "bm_counter_read" and "impair" in args[1]]
    assert sorted(set(reads)) == ["Egress.port_impair_dropped", "Egress.port_impair_duplicated",
                                  "Egress.port_impair_reordered"] and len(reads) == 6


def test_install_a_whole_config(fake):
    runtime, standard, pre, sswitch = fake
    config = SwitchConfig("s1", 1)
    config.entries.append(TableEntry("ipv4_lpm", "drop", ("10.9.0.0/16",)))
    config.multicast_groups = []
    config.register_writes.append(("ecn_threshold", 0, 5))
    config.meter_rates.append(("agg_capacity", 0, 100.0, 16))
    install(config, runtime)
    assert [c[0] for c in standard.calls] == ["bm_mt_add_entry", "bm_register_write", "bm_meter_set_rates"]


def test_cli_lines_name_objects_as_bmv2_does():
    config = SwitchConfig("s1", 1)
    config.port_impairments.append(PortImpairment(2, drop=0.5, duplicate=0.0, reorder=1.0, seed=9))
    assert config.to_cli_lines()[-4:] == ["mirroring_add 1002 2", "register_write Egress.impair_drop 2 1073741824",
                                          "register_write Egress.impair_duplicate 2 0",
                                          "register_write Egress.impair_reorder 2 2147483648"]
    config.port_impairments.clear()
    config.entries.append(TableEntry("route", "NoAction", ("10.0.0.1", "10.0.0.2")))
    from testbed.dataplane.entries import MulticastGroup
    config.multicast_groups = [MulticastGroup(7, (1, 2)), MulticastGroup(3, (2,))]
    lines = config.to_cli_lines()
    assert "table_add Ingress.route NoAction 10.0.0.1 10.0.0.2 =>" in lines
    assert lines[-1] == "mc_node_associate 3 1" and "mc_node_associate 7 0" in lines


def _compiled_names():
    """Names of tables (with their actions), registers, counters and meters in the JSON p4c writes for bmv2."""
    import json
    if shutil.which("p4c") is None:
        from support import skip_bmv2_case
        skip_bmv2_case("p4c not found")
    config = json.loads(p4build.compile_program(64, 64).read_text())
    tables = {t["name"]: set(t["actions"]) for pipe in config["pipelines"] for t in pipe["tables"]}
    arrays = {kind: {a["name"] for a in config[kind]} for kind in ("register_arrays", "counter_arrays", "meter_arrays")}
    return tables, arrays


def test_runtime_names_are_the_names_in_the_compiled_program():
    """Settles the naming rule of ``program.qualified_name`` against p4c's output: objects are
    ``<Control>.<name>``; core.p4's NoAction stays ``NoAction`` (one action, shared by every table)."""
    tables, arrays = _compiled_names()
    for name, table in program.TABLES.items():
        qualified = program.qualified_name(table.control, name)
        assert qualified in tables, qualified
        assert {program.qualified_name(table.control, a) for a in table.actions} == tables[qualified], qualified
    assert any("NoAction" in actions for actions in tables.values())
    for kind, declared in (("register_arrays", program.REGISTERS), ("counter_arrays", program.COUNTERS),
                           ("meter_arrays", program.METERS)):
        assert {program.qualified_name(d.control, n) for n, d in declared.items()} == arrays[kind], kind


# -- simple_switch ---------------------------------------------------------------------------

def test_simple_switch_argv(tmp_path):
    argv = bmv2.simple_switch_argv(tmp_path / "ina.json", {2: "s1-eth2", 1: "s1-eth1"}, 9091, 3, tmp_path / "s1.log",
                                   tmp_path / "s1-notifications.ipc")
    assert argv[:3] == ["simple_switch", "--device-id", "3"]
    assert argv[argv.index("--notifications-addr") + 1] == f"ipc://{tmp_path}/s1-notifications.ipc"   # not /tmp's
    assert argv[argv.index("--thrift-port") + 1] == "9091"
    assert argv[argv.index("--log-file") + 1] == str(tmp_path / "s1.log")
    assert argv[argv.index("--log-level") + 1] == "warn"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-i"] == ["1@s1-eth1", "2@s1-eth2"]
    assert argv[-1] == str(tmp_path / "ina.json")


def test_bmv2_log_lands_at_logs_switch_log(tmp_path):
    """simple_switch writes ``--log-file logs/s1.log`` as ``logs/s1.log.txt``; the node's stop moves it to
    ``logs/s1.log``, where every target's switch log is read (tests/emulation/test_quickstart.py)."""
    from collections import namedtuple
    from types import SimpleNamespace
    from testbed.emulation.bmv2_node import Bmv2SwitchNode
    intf = namedtuple("Intf", "name")
    logs = tmp_path / "logs"
    logs.mkdir()
    node = SimpleNamespace(ports={intf("lo"): 0, intf("s1-eth1"): 1},
                           json_path=tmp_path / "ina.json", thrift_port=9091, device_id=1, log_path=logs / "s1.log",
                           notifications_path=tmp_path / "run" / "s1-notifications.ipc")
    argv = Bmv2SwitchNode.switch_argv(node)
    assert argv[argv.index("--log-file") + 1] == str(logs / "s1.log")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "-i"] == ["1@s1-eth1"]
    assert argv[argv.index("--notifications-addr") + 1] == f"ipc://{tmp_path}/run/s1-notifications.ipc"
    assert bmv2.log_written_at(logs / "s1.log") == logs / "s1.log.txt"
    (logs / "s1.log.txt").write_text("[warn] something\n")
    stopped = object.__new__(Bmv2SwitchNode)      # no Mininet shell: only what stop touches
    stopped.proc, stopped.log_path = None, logs / "s1.log"
    stopped.stop(deleteIntfs=False)
    assert sorted(p.name for p in logs.iterdir()) == ["s1.log"]
    assert (logs / "s1.log").read_text() == "[warn] something\n"
    stopped.stop(deleteIntfs=False)               # stopping again changes nothing
    assert (logs / "s1.log").read_text() == "[warn] something\n"


def test_start_up_failure_tail_reads_the_txt_log(tmp_path):
    bmv2.log_written_at(tmp_path / "s1.log").write_text("[error] cannot open port\n")
    assert "cannot open port" in bmv2.log_tails([tmp_path / "s1.out", tmp_path / "s1.log"])


def test_start_up_death_names_the_port_and_log_tail(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    log = tmp_path / "s1.out"
    log.write_text("Calling target program-options parser\nNanomsg returned a exception when trying to bind\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    proc.wait()
    try:
        with pytest.raises(DataplaneError, match=rf"(?s)Thrift port {port} \(another process holds that port\)"
                                                 r".*trying to bind"):
            bmv2.wait_for_thrift(port, 5.0, alive=lambda: proc.poll() is None, switch="s1", log_paths=[log])
    finally:
        holder.close()


def test_registered_as_a_switch_target():
    from testbed.emulation.nodes import SWITCH_TARGETS
    from testbed.emulation.bmv2_node import Bmv2SwitchNode
    assert SWITCH_TARGETS["bmv2"] is Bmv2SwitchNode and Bmv2SwitchNode.target == "bmv2"


def test_pyswitch_path_needs_no_thrift():
    code = ("import sys; import testbed.emulation.nodes, testbed.dataplane.pyswitch.process; "
            "bad = [m for m in sys.modules if m.startswith(('thrift', 'bm_runtime', 'sswitch_runtime'))]; "
            "print(bad); raise SystemExit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_listening_port_is_not_ready_until_the_simple_switch_service_answers(tmp_path):
    """simple_switch registers its ``simple_switch`` service after its Thrift server accepts connections:
    a port that accepts but answers no call is not a ready switch."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]
    try:
        assert not bmv2.simple_switch_service_answers("127.0.0.1", port)
        with pytest.raises(DataplaneError, match=rf"not answering on Thrift port {port}"):
            bmv2.wait_for_thrift(port, 1.0, switch="s1", log_paths=[tmp_path / "none.log"])
    finally:
        listener.close()
