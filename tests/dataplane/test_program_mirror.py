"""p4/ina.p4 and pyswitch declare the same program.

The declarations of the P4 source (tables with keys, match kinds, actions,
default action and size; actions with parameter names and widths; registers,
counters and meters with widths, sizes and controls; the ``ST_*`` indices of
``ina_stats``) are read with a small parser of the subset of P4_16 the
program uses, and compared with ``testbed/dataplane/program.py``, the list
pyswitch is built from. Any object one side has and the other lacks fails,
naming it. pyswitch itself is checked to hold a state array for every
register, counter and meter of the program.
"""

import re
from pathlib import Path

import pytest

from testbed.dataplane import p4build, program
from testbed.dataplane.pyswitch.core import PySwitchCore

P4_SOURCE = Path(__file__).resolve().parents[2] / "p4" / "ina.p4"
SIZE_EXPRS = {"INA_SLOTS * INA_LANES": "SLOTS*LANES", "INA_SLOTS": "SLOTS", "1": "1", "INA_PORTS": "PORTS",
              "INA_STATS": "STATS", "INA_PA_JOBS": "PA_JOBS", "INA_PA_JOBS * INA_PA_WORKERS": "PA_JOBS*PA_WORKERS",
              "INA_PA_JOBS * INA_PA_SEQS": "PA_JOBS*PA_SEQS", "INA_WAIT_CELLS": "WAIT_CELLS"}
BUILTIN_ACTIONS = {"NoAction"}   # core.p4
# Top-level names v1model.p4 declares: a program declaration of the same name is a p4c error
# ("Ingress duplicates Ingress"), so the program's controls cannot be named Ingress / Egress.
V1MODEL_NAMES = {"Parser", "VerifyChecksum", "Ingress", "Egress", "ComputeChecksum", "Deparser", "V1Switch",
                 "standard_metadata_t", "counter", "direct_counter", "meter", "direct_meter", "register",
                 "action_profile", "action_selector", "hash", "random", "digest", "mark_to_drop", "CounterType",
                 "MeterType", "HashAlgorithm", "CloneType", "NoAction"}
NAME_ANNOTATION = r'(?:@name\("([^"]*)"\)\s*)?'   # an optional @name("...") before a declaration


def _strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _block(text, start):
    """Text between the brace at or after ``start`` and its matching closing brace."""
    open_at = text.index("{", start)
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i]
    raise AssertionError("unbalanced braces in ina.p4")


def _bmv2_control(annotation, name, control, kind):
    """The control prefix bmv2 gives an object: from its absolute ``@name(".Ingress.<name>")``, else
    (no annotation) the name of the control that declares it."""
    if annotation is None:
        return control
    m = re.fullmatch(r"\.(\w+)\.(\w+)", annotation)
    assert m and m.group(2) == name, f'{kind} {name}: @name("{annotation}") is not ".<Control>.{name}"'
    return m.group(1)


def parse_p4(text):
    """Declarations of the program: {kind: {name: description}}; the control of each object is the
    one bmv2 names it by (its @name prefix, see _bmv2_control)."""
    text = _strip_comments(text)
    text = re.sub(r"#define[^\n]*(\\\n[^\n]*)*", "", text)   # macros (INA_LANE) are not declarations
    found = {"tables": {}, "actions": {}, "registers": {}, "counters": {}, "meters": {}, "stats": {}}
    for m in re.finditer(r"const\s+bit<32>\s+ST_([A-Z_]+)\s*=\s*(\d+)\s*;", text):
        found["stats"][m.group(1).lower()] = int(m.group(2))
    for control in re.finditer(r"\bcontrol\s+(\w+)\s*\(", text):
        name = control.group(1)
        body = _block(text, control.end())
        for m in re.finditer(NAME_ANNOTATION + r"\bregister<bit<(\d+)>>\(([^)]*)\)\s*(\w+)\s*;", body):
            found["registers"][m.group(4)] = (_bmv2_control(m.group(1), m.group(4), name, "register"),
                                              int(m.group(2)), m.group(3).strip())
        for m in re.finditer(NAME_ANNOTATION + r"\bcounter\(([^,]+),\s*CounterType\.(\w+)\)\s*(\w+)\s*;", body):
            found["counters"][m.group(4)] = (_bmv2_control(m.group(1), m.group(4), name, "counter"),
                                             m.group(2).strip(), m.group(3))
        for m in re.finditer(NAME_ANNOTATION + r"\bmeter\(([^,]+),\s*MeterType\.(\w+)\)\s*(\w+)\s*;", body):
            found["meters"][m.group(4)] = (_bmv2_control(m.group(1), m.group(4), name, "meter"),
                                           m.group(2).strip(), m.group(3))
        for m in re.finditer(NAME_ANNOTATION + r"\baction\s+(\w+)\s*\(([^)]*)\)", body):
            params = []
            for p in filter(None, (x.strip() for x in m.group(3).split(","))):
                pm = re.fullmatch(r"bit<(\d+)>\s+(\w+)", p)
                assert pm, f"action {m.group(2)}: cannot read parameter {p!r}"
                params.append((pm.group(2), int(pm.group(1))))
            found["actions"][m.group(2)] = (_bmv2_control(m.group(1), m.group(2), name, "action"), tuple(params))
        for m in re.finditer(NAME_ANNOTATION + r"\btable\s+(\w+)\s*\{", body):
            tbody = _block(body, m.end() - 1)
            keys = tuple((k, kind) for k, kind in re.findall(r"([\w.]+)\s*:\s*(exact|lpm|ternary)\s*;",
                                                            _block(tbody, tbody.index("key"))))
            actions = tuple(re.findall(r"(\w+)\s*;", _block(tbody, tbody.index("actions"))))
            default = re.search(r"default_action\s*=\s*(\w+)\s*\(", tbody).group(1)
            size = int(re.search(r"size\s*=\s*(\d+)\s*;", tbody).group(1))
            found["tables"][m.group(2)] = (_bmv2_control(m.group(1), m.group(2), name, "table"), keys, actions,
                                           default, size)
    return found


@pytest.fixture(scope="module")
def p4():
    return parse_p4(P4_SOURCE.read_text())


def _compare(kind, p4_side, py_side):
    missing_in_py = sorted(set(p4_side) - set(py_side))
    missing_in_p4 = sorted(set(py_side) - set(p4_side))
    assert not missing_in_py, f"{kind} in ina.p4 but not in program.py/pyswitch: {missing_in_py}"
    assert not missing_in_p4, f"{kind} in program.py/pyswitch but not in ina.p4: {missing_in_p4}"
    for name in p4_side:
        assert p4_side[name] == py_side[name], f"{kind} {name}: ina.p4 has {p4_side[name]}, program.py {py_side[name]}"


def test_tables(p4):
    py = {t.name: (t.control, tuple((k.field, k.match) for k in t.keys), t.actions, t.default_action, t.size)
          for t in program.TABLES.values()}
    _compare("table", p4["tables"], py)


def test_table_key_widths(p4):
    widths = {"hdr.ipv4.srcAddr": 32, "hdr.ipv4.dstAddr": 32, "hdr.ina.job": 16, "hdr.ina.agg_node": 16,
              "hdr.ina.submodel": 16, "standard_metadata.egress_port": 9, "meta.held_job": 16,
              "meta.held_submodel": 16}
    for table in program.TABLES.values():
        for key in table.keys:
            assert widths[key.field] == key.bits, f"table {table.name} key {key.field}: {key.bits} bits"


def test_actions(p4):
    py = {a.name: tuple((p.name, p.bits) for p in a.params) for a in program.ACTIONS.values()
          if a.name not in BUILTIN_ACTIONS}
    _compare("action", {n: params for n, (_, params) in p4["actions"].items()}, py)


def test_actions_live_in_their_tables_control(p4):
    for table in program.TABLES.values():
        for action in table.actions:
            if action not in BUILTIN_ACTIONS:
                assert p4["actions"][action][0] == table.control, f"action {action} of table {table.name}"


def test_registers(p4):
    py = {r.name: (r.control, r.bits, r.size_expr) for r in program.REGISTERS.values()}
    _compare("register", {n: (c, bits, SIZE_EXPRS[size]) for n, (c, bits, size) in p4["registers"].items()}, py)


def test_counters_and_meters(p4):
    _compare("counter", {n: (c, SIZE_EXPRS[size], kind) for n, (c, size, kind) in p4["counters"].items()},
             {c.name: (c.control, c.size_expr, "packets") for c in program.COUNTERS.values()})
    _compare("meter", {n: (c, SIZE_EXPRS[size], kind) for n, (c, size, kind) in p4["meters"].items()},
             {m.name: (m.control, m.size_expr, m.unit) for m in program.METERS.values()})


def test_stat_indices(p4):
    _compare("ina_stats index", p4["stats"], program.STAT_INDICES)
    assert re.search(rf"#define INA_STATS {len(program.STAT_INDICES)}\b", P4_SOURCE.read_text())
    assert re.search(rf"#define INA_PORTS {program.MAX_PORTS}\b", P4_SOURCE.read_text())
    for name in ("PA_JOBS", "PA_WORKERS", "PA_SEQS", "WAIT_CELLS"):
        assert re.search(rf"#define INA_{name} {getattr(program, name)}\b", P4_SOURCE.read_text()), name
    assert program.PA_SEQS & (program.PA_SEQS - 1) == 0      # a power of two: ina.p4 masks seq with it


def test_flags_and_release_modes_match_wire_and_program():
    from testbed.dataplane import wire
    text = P4_SOURCE.read_text()
    for name in ("DATA", "GACK", "RESULT", "RETX", "ECN_ECHO", "AECN", "COLLISION", "CAPACITY", "TASK", "PULL",
                 "GATHER", "EVICTED"):
        value = int(re.search(rf"const bit<16> FLAG_{name}\s*=\s*(0x[0-9A-Fa-f]+);", text).group(1), 16)
        assert value == getattr(wire, f"FLAG_{name}"), name
    for name in ("RELEASE_ON_EMIT", "RELEASE_ON_RESULT", "RELEASE_SHADOW", "RELEASE_HOLD"):
        value = int(re.search(rf"const bit<8> {name}\s*=\s*(\d+);", text).group(1))
        assert value == getattr(program, name), name
    assert int(re.search(r"const bit<16> INA_UDP_PORT = (\d+);", text).group(1)) == wire.INA_UDP_PORT
    assert int(re.search(r"const bit<32> MAX_ITERATION_LEAD = (\d+);", text).group(1)) == \
        program.MAX_ITERATION_LEAD
    assert int(re.search(r"const bit<32> IMPAIR_DRAW_MAX = (0x[0-9A-Fa-f]+);", text).group(1), 16) == \
        program.IMPAIR_SCALE - 1
    assert int(re.search(r"const bit<32> IMPAIR_SESSION_BASE = (\d+);", text).group(1)) == \
        program.IMPAIR_SESSION_BASE
    assert int(re.search(r"const bit<32> GACK_SESSION_BASE = (\d+);", text).group(1)) == program.GACK_SESSION_BASE
    assert int(re.search(r"const bit<8>  GACK_TTL = (\d+);", text).group(1)) == program.GACK_TTL
    assert int(re.search(r"const bit<16> GACK_IPV4_BYTES = (\d+);", text).group(1)) == program.GACK_IPV4_BYTES
    assert int(re.search(r"const bit<16> GACK_UDP_BYTES = (\d+);", text).group(1)) == program.GACK_UDP_BYTES
    # the GACK session ranges of every port stay clear of the impairments' and inside bmv2's session ids
    assert program.IMPAIR_SESSION_BASE + program.MAX_PORTS <= program.GACK_SESSION_BASE
    assert program.gack_session(510) <= program.MAX_MIRROR_SESSION
    assert f"#define INA_LANES {wire.DEFAULT_LANES}" in text
    assert f"#define INA_SLOTS {program.DEFAULT_SLOTS}" in text


def test_ina_header_layout_matches_wire():
    from testbed.dataplane.wire import INA_HEADER, INA_HEADER_BYTES, InaHeader
    text = _strip_comments(P4_SOURCE.read_text())
    body = _block(text, text.index("header ina_t"))
    fields = re.findall(r"bit<(\d+)>\s+(\w+);", body)
    assert [name for _, name in fields] == list(InaHeader.__dataclass_fields__)
    struct_bits = [{"H": 16, "B": 8, "I": 32, "Q": 64}[c] for c in INA_HEADER.format.lstrip("!")]
    assert [int(bits) for bits, _ in fields] == struct_bits
    assert sum(int(bits) for bits, _ in fields) == 8 * INA_HEADER_BYTES


def test_pyswitch_holds_every_declared_object():
    core = PySwitchCore(lanes=4, slots=8)
    for name in program.REGISTERS:
        holder = core.egress if program.REGISTERS[name].control == "Egress" else core.ingress
        assert hasattr(holder, name), f"pyswitch lacks register {name}"
    for name in program.COUNTERS:
        core.control({"op": "counter_read", "name": name, "index": 0})
    for name in program.METERS:
        core.control({"op": "meter_set_rates", "name": name, "index": 0, "rate_per_s": 0, "burst": 1})
    assert set(core.tables) == set(program.TABLES)


def test_no_declaration_duplicates_v1model():
    """p4c rejects a top-level declaration named like one of v1model.p4's (e.g. ``control Ingress``)."""
    text = _strip_comments(P4_SOURCE.read_text())
    declared = re.findall(r"^(?:control|parser|package|struct|header|header_union|enum|extern|action)\s+(\w+)",
                          text, flags=re.M)
    declared += re.findall(r"^(?:const|typedef)\s+[^=;]*?(\w+)\s*[=;]", text, flags=re.M)
    assert "InaIngress" in declared and "InaEgress" in declared, declared
    clash = sorted(set(declared) & V1MODEL_NAMES)
    assert not clash, f"ina.p4 redeclares v1model.p4 names {clash}"


def test_every_control_plane_object_is_named_for_bmv2():
    """Each table, action, register, counter and meter has its absolute @name(".<Control>.<name>")."""
    text = _strip_comments(P4_SOURCE.read_text())
    for kind, pattern in (("table", r"table\s+(\w+)\s*\{"), ("action", r"action\s+(\w+)\s*\("),
                          ("extern", r"(?:register<[^>]*>>|counter|meter)\([^;]*\)\s*(\w+)\s*;")):
        for m in re.finditer(r"(@name\(\"[^\"]*\"\)\s*)?\b" + pattern, text):
            assert m.group(1), f"{kind} {m.group(2)} has no @name(\".<Control>.{m.group(2)}\") annotation"


def test_lanes_include_is_generated():
    assert p4build.LANES_INCLUDE.read_text() == p4build.render_lanes_include(), \
        "p4/ina_lanes.p4 differs from its generator: python -m testbed.dataplane.p4build --write-lanes"


def test_parser_sees_a_missing_declaration():
    """The mirror check is not vacuous: drop a register from the source and it notices."""
    text = P4_SOURCE.read_text().replace("register<bit<32>>(INA_SLOTS) agg_seq;", "")
    parsed = parse_p4(text)
    with pytest.raises(AssertionError, match="agg_seq"):
        _compare("register", {n: (c, b, SIZE_EXPRS[s]) for n, (c, b, s) in parsed["registers"].items()},
                 {r.name: (r.control, r.bits, r.size_expr) for r in program.REGISTERS.values()})
