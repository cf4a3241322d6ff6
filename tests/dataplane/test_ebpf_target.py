"""What only the ebpf target has: its maps' layouts against the runtime's, its commands, and 100,000 hostile
frames through the kernel (the packet suite, test_packets.py, runs every case on it as on the others)."""

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from packet_targets import LANES, SLOTS, make_target
from test_packets import aggregate_entry, assert_job_1_aggregates_exactly_in_its_slots, fuzzed_frames, \
    install_routes, stat

from testbed.dataplane import program, wire
from testbed.dataplane.ebpf import commands, runtime as ebpf_runtime

SOURCE = Path(ebpf_runtime.__file__).with_name("ina.bpf.c")


def test_the_commands_are_built_apart_from_running_them():
    assert commands.load_argv(Path("o"), Path("p"), Path("m")) == ["bpftool", "prog", "loadall", "o", "p",
                                                                     "pinmaps", "m"]
    assert commands.filter_argv("s1-eth1", "ingress", Path("p/ina_ingress"))[-3:] == [
        "direct-action", "object-pinned", "p/ina_ingress"]
    argvs = commands.shaping_argvs("s1-eth1", 10_000_000, 64)
    assert argvs[0][-3:] == ["htb", "default", "10"] and argvs[1][argvs[1].index("rate") + 1] == "10000000bit"
    assert [a[a.index("classid") + 1] for a in argvs if "classid" in a] == ["1:1", "1:10", "1:20"]
    assert all(a[-1] == "144" for a in argvs if "pfifo" in a)        # twice the depth, and some


def test_the_runtimes_structs_and_the_programs_constants_agree():
    """The Python layouts have the sizes of ina.bpf.c's structs (as BTF will tell the kernel), and the
    constants the runtime shares with the program are the program's."""
    text = SOURCE.read_text()

    def define(name):
        return int(re.search(rf"#define {name}\s+(\w+)", text).group(1), 0)
    assert (define("INA_GROUP_PORTS"), define("INA_QUEUE_RING")) == (ebpf_runtime.GROUP_PORTS,
                                                                    ebpf_runtime.QUEUE_RING)
    assert (define("ACT_FORWARD"), define("ACT_ECMP"), define("ACT_DROP")) == (1, 2, 3)
    assert (define("ACT_MULTICAST"), define("ACT_RELEASE"), define("ACT_SHADOW")) == (1, 2, 3)
    stats = re.search(r"enum ina_stat \{([^}]*)\}", text).group(1).replace(",", " ").split()
    assert [name.removeprefix("ST_").lower() for name in stats] == list(program.STAT_INDICES)
    for name in re.findall(r"#define (FLAG_\w+)", text):
        assert define(name) == getattr(wire, name), name
    assert (define("GACK_SESSION_BASE"), define("IMPAIR_SESSION_BASE")) == (program.GACK_SESSION_BASE,
                                                                              program.IMPAIR_SESSION_BASE)
    assert (define("INA_PA_JOBS"), define("INA_PA_SEQS"), define("MAX_ITERATION_LEAD")) == (
        program.PA_JOBS, program.PA_SEQS, program.MAX_ITERATION_LEAD)


@pytest.fixture
def ebpf(tmp_path):
    target = make_target("ebpf", tmp_path)
    try:
        yield target
    finally:
        target.close()


def test_the_maps_have_the_runtimes_layouts(ebpf):
    rt = ebpf.runtime
    sizes = {"agg_slots": ebpf_runtime._SLOT.size + 4 * LANES + 4, "route": ebpf_runtime._FORWARD.size,
             "ipv4_lpm": ebpf_runtime._FORWARD.size, "ina_filter": ebpf_runtime._AGGREGATE.size,
             "ina_result": ebpf_runtime._RESULT.size, "rina_gather": ebpf_runtime._RESULT.size,
             "esa_evict": ebpf_runtime._EVICT.size, "rina_rack": ebpf_runtime._RINA.size,
             "ina_mcast_rewrite": ebpf_runtime._REWRITE.size, "agg_capacity": ebpf_runtime._METER.size,
             "port_counts": ebpf_runtime._PORT_COUNTS.size, "port_impair": ebpf_runtime._PORT_IMPAIR.size,
             "port_queue": ebpf_runtime._PORT_QUEUE.size + 8 * ebpf_runtime.QUEUE_RING,
             "mc_groups": 4 + 4 * ebpf_runtime.GROUP_PORTS, "ina_stats": 8 * len(ebpf_runtime.program.STAT_INDICES)}
    assert {name: rt.map(name).value_size for name in sizes} == sizes
    assert rt.map("agg_slots").max_entries == SLOTS


def _kernel_warnings() -> list:
    out = subprocess.run(["dmesg"], capture_output=True, text=True).stdout.splitlines()
    return [line for line in out if re.search(r"WARNING:|BUG:|Oops|general protection|bpf.*(fault|leak)", line)]


def test_100000_fuzzed_frames_are_counted_and_leave_the_kernel_unwarned_and_the_switch_exact(ebpf):
    """The reliability fuzz at its full size against the kernel's data path: every frame is parsed and
    counted or dropped, the kernel logs no warning, and a job aggregates exactly afterwards."""
    before = _kernel_warnings()
    rt = ebpf.runtime
    install_routes(rt)
    rt.table_add(aggregate_entry(job=1, base=0, count=8))
    frames = fuzzed_frames(np.random.default_rng(2026), 100_000)
    for port, frame in frames:
        ebpf.send(port, frame)
    ebpf.quiet(1.0)
    ina = stat(ebpf, "ina_rx") + stat(ebpf, "malformed_dropped")
    assert 0 < ina <= len(frames)
    assert _kernel_warnings() == before
    assert_job_1_aggregates_exactly_in_its_slots(ebpf)
