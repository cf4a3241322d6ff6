"""How fast this machine moves packets, measured in a few seconds, so that the planner's costs belong to it.

The planner's packet costs (testbed/budget.py, ``PACKET_COST_CURVES``) were
measured on one machine, the *reference*. On another machine of the same
core count a packet can cost up to twice as much (an AMD EPYC at 2.6 GHz:
0.8x the reference's packets per CPU-second where packets come fast, 0.5x
where each packet wakes its process), and a plan made with the reference's
costs then runs CPU- or latency-bound. ``benchmarks/bench_packet_costs.py
--calibrate`` measures the curves themselves in emulation runs (about four
minutes); this module measures, in about three seconds and without root,
the two things those curves rest on:

- **packet work** (:func:`core_contributions_per_s`): pyswitch's model
  aggregating INA contributions in-process, one core, for ``WORK_SECONDS``:
  what a packet costs a process that is already awake;
- **wake-ups** (:func:`wake_round_trip_s`): the median round trip of a
  datagram between two processes that sleep in ``recv`` between
  datagrams (``WAKE_ROUND_TRIPS`` of them), both pinned to one core: what a
  packet costs a process that must be woken for it, as each is in a dilated
  run. Left to the scheduler, the pair lands on one core or on two from one
  trial to the next, and on a virtual machine whose idle cores halt the two
  differ several times over (an AMD EPYC guest: 13 us on one core, 100 us
  across two), which made the plan change from one command to the next. The
  round trip across two cores is measured too, pinned the same way, and
  reported (``cross_core_wake_round_trip_s``): it is latency, not CPU work,
  so it does not scale the curves.

:func:`calibrated_curves` scales the reference curves by how much slower
this machine is than the reference at each (never faster: the plan errs on
the slow side): the fastest point by the packet-work ratio, the slower
points, where every packet wakes its process, by the larger of both ratios.
:func:`testbed.budget.load_packet_costs` runs the calibration on a machine
(CPU model and core count) that has no costs of its own yet and keeps the
result beside the measured ones; ``inatb validate`` and ``inatb doctor``
say which costs the planner uses.
"""

import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from testbed.dataplane.entries import TableEntry
from testbed.dataplane.wire import FLAG_DATA, INA_OFFSET, InaHeader, build_frame, build_ina_frame
from testbed.emulation.state import stop_process

#: The stream the packet-work figure aggregates (benchmarks/bench_pyswitch.py streams the same).
LANES = 64
SLOTS = 1024
FANIN = 4
SW_MAC, SW_ADDR = "02:00:00:00:01:00", "10.0.1.1"
PS_MAC, PS_ADDR = "02:00:00:00:00:64", "10.0.0.100"
WORKER_MAC, WORKER_ADDR = "02:00:00:00:00:01", "10.0.0.1"
IN_PORT, OUT_PORT = 1, 2
#: Where a frame's iteration field lies (job, flags, elems, level, agg_node, fanin, count, submodel before it).
ITERATION_OFFSET = INA_OFFSET + 14

#: Each figure is the best of ``TRIALS`` short trials (the machine's capability, not a passing neighbour's
#: load: single measurements of either spread 1.6x on one machine within a minute).
TRIALS = 5
WORK_SECONDS = 0.25
WAKE_ROUND_TRIPS = 400
#: The reference machine's figures (the kind ``PACKET_COST_CURVES`` were measured on: "Intel Xeon Processor"
#: x 2), at the slow end of what :func:`measure` gives there (`python -m testbed.calibration`, eleven calls:
#: 80,300-141,200 contributions/s, 80,300-89,000 with the process pinned to either core; wake-up round trips
#: 6.5-10.2 us), so that the machine itself reads as no slower than the reference. The issue's AMD EPYC x 2
#: aggregates 64,200 contributions/s in-process: 1.25x, as its measured costs are where packets come fast.
REFERENCE_CONTRIBUTIONS_PER_S = 80_000.0
REFERENCE_WAKE_ROUND_TRIP_S = 10.5e-6


def aggregation_entries() -> list:
    """One switch's entries for the stream: fan-in ``FANIN`` into ``SLOTS`` slots, the aggregate to the PS."""
    return [
        TableEntry("ipv4_lpm", "ipv4_forward", (f"{PS_ADDR}/32",), (("dstAddr", PS_MAC), ("port", OUT_PORT))),
        TableEntry("ina_filter", "ina_aggregate", (1, 1, 0), (
            ("switch_addr", SW_ADDR), ("slot_base", 0), ("slot_count", SLOTS), ("release_mode", 0),
            ("next_agg_node", 100), ("next_fanin", 1), ("next_dst", PS_ADDR), ("next_slot_base", 0),
            ("next_slot_count", 0), ("bypass_dst", PS_ADDR), ("overflow_dst", PS_ADDR), ("overflow_agg_node", 0),
            ("overflow_fanin", 0), ("overflow_slot_base", 0), ("overflow_slot_count", 0))),
    ]


def aggregate_frames(fragments: int = SLOTS) -> list:
    """Every worker's contribution to ``fragments`` seqs of iteration 0, fragment by fragment; a stream bumps
    the iteration field (``ITERATION_OFFSET``) per pass so that each pass aggregates anew."""
    lanes = np.arange(LANES, dtype=np.int32)
    frames = []
    for seq in range(fragments):
        for worker in range(FANIN):
            header = InaHeader(job=1, flags=FLAG_DATA, elems=LANES, agg_node=1, fanin=FANIN, count=1, seq=seq,
                               slot=seq % SLOTS, bitmap=1 << worker)
            frames.append(build_ina_frame(SW_MAC, WORKER_MAC, WORKER_ADDR, SW_ADDR, header, lanes))
    return frames


def forward_frames(count: int = SLOTS) -> list:
    """Plain UDP frames as long as an INA frame of 64 lanes, to the PS's /32 route."""
    payload = b"\x00" * (38 + 4 * LANES)
    return [build_frame(SW_MAC, WORKER_MAC, WORKER_ADDR, PS_ADDR, payload, src_port=5000, dst_port=5001)
            for _ in range(count)]


def inproc_rate(stream: str, seconds: float) -> dict:
    """pyswitch's model (PySwitchCore.receive) in a loop over pre-built frames of ``stream`` (``aggregate`` or
    ``forward``) for ``seconds``: what it did per second (``rate_per_s``: contributions aggregated or packets
    forwarded), the frames it emitted, those offered, and for ``aggregate`` the fragments completed per second."""
    from testbed.dataplane.pyswitch.core import LocalRuntime, PySwitchCore
    core = PySwitchCore("calibration", LANES, SLOTS)
    runtime = LocalRuntime(core)
    for entry in aggregation_entries():
        runtime.table_add(entry)
    frames = [bytearray(f) for f in (aggregate_frames() if stream == "aggregate" else forward_frames())]
    out = [0]

    def send(port, buf):
        out[0] += 1

    receive = core.receive
    iteration, t0 = 0, time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        iteration += 1
        now = time.monotonic()
        for frame in frames:
            if stream == "aggregate":
                struct.pack_into("!I", frame, ITERATION_OFFSET, iteration)
            receive(bytearray(frame), IN_PORT, now, send)
    elapsed = time.perf_counter() - t0
    stats = runtime.counters()
    done = stats["aggregated"] if stream == "aggregate" else stats["forwarded"]
    return {"rate_per_s": done / elapsed, "out_frames": out[0], "offered": iteration * len(frames),
            "fragments_per_s": stats["emitted"] / elapsed if stream == "aggregate" else None}


def core_contributions_per_s(seconds: float = WORK_SECONDS) -> float:
    """Contributions per second pyswitch's model aggregates in-process: packet work, one core."""
    return inproc_rate("aggregate", seconds)["rate_per_s"]


def _echo(fd: int):
    """The far end of :func:`wake_round_trip_s`: send back every datagram until an empty one."""
    sock = socket.socket(fileno=fd)
    while data := sock.recv(64):
        sock.send(data)


def wake_round_trip_s(here_cpu: int, there_cpu: int, round_trips: int = WAKE_ROUND_TRIPS) -> float:
    """The median time for a datagram to reach a process asleep in ``recv`` and its answer to come back to
    this one, asleep in turn: two wake-ups and four system calls (a Unix datagram socket pair); this process
    runs on ``here_cpu`` meanwhile, the echo on ``there_cpu``."""
    here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    echo = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{there_cpu}}}); "
                             f"from testbed.calibration import _echo; _echo({there.fileno()})"],
                            pass_fds=[there.fileno()])
    there.close()
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {here_cpu})
    try:
        here.settimeout(10.0)
        here.send(b"start")
        here.recv(64)                 # the echo is up
        times = []
        for _ in range(round_trips):
            t0 = time.perf_counter()
            here.send(b"x")
            here.recv(64)
            times.append(time.perf_counter() - t0)
        here.send(b"")        # an empty datagram ends the echo
    finally:
        os.sched_setaffinity(0, allowed)
        here.close()
        stop_process(echo)
    return statistics.median(times)


@dataclass(frozen=True)
class Calibration:
    """What :func:`measure` found, and how much slower than the reference machine that is (>= 1 each)."""
    contributions_per_s: float
    wake_round_trip_s: float                # both processes on one core
    seconds: float
    cross_core_wake_round_trip_s: float = 0.0   # on two cores; 0 where runs may use one core only

    @classmethod
    def from_dict(cls, doc: dict) -> "Calibration":
        return cls(float(doc["contributions_per_s"]), float(doc["wake_round_trip_s"]), float(doc["seconds"]),
                   float(doc.get("cross_core_wake_round_trip_s", 0.0)))

    @property
    def work_ratio(self) -> float:
        return max(1.0, REFERENCE_CONTRIBUTIONS_PER_S / self.contributions_per_s)

    @property
    def wake_ratio(self) -> float:
        return max(1.0, self.wake_round_trip_s / REFERENCE_WAKE_ROUND_TRIP_S)

    def to_dict(self) -> dict:
        return {"contributions_per_s": round(self.contributions_per_s), "wake_round_trip_s": self.wake_round_trip_s,
                "cross_core_wake_round_trip_s": self.cross_core_wake_round_trip_s, "seconds": round(self.seconds, 2)}

    def describe(self) -> str:
        across = (f", {self.cross_core_wake_round_trip_s * 1e6:.0f} us across two cores"
                  if self.cross_core_wake_round_trip_s else "")
        return (f"calibrated on this machine in {self.seconds:.1f} s: packet work {self.work_ratio:.2f}x and "
                f"wake-ups {self.wake_ratio:.2f}x the reference's cost ({self.contributions_per_s:,.0f} "
                f"contributions/s, a wake-up round trip of {self.wake_round_trip_s * 1e6:.0f} us on one core"
                f"{across})")


def measure() -> Calibration:
    """The figures, each the best of ``TRIALS``: about three seconds (four across two cores)."""
    t0 = time.monotonic()
    work = max(core_contributions_per_s() for _ in range(TRIALS))
    cpus = sorted(os.sched_getaffinity(0))
    wake = min(wake_round_trip_s(cpus[0], cpus[0]) for _ in range(TRIALS))
    across = min(wake_round_trip_s(cpus[0], cpus[1]) for _ in range(TRIALS)) if len(cpus) > 1 else 0.0
    return Calibration(work, wake, time.monotonic() - t0, across)


def calibrated_curves(reference: dict, calibration: Calibration) -> dict:
    """``reference`` (role -> curve, ``PACKET_COST_CURVES``' form) at this machine's costs: each curve's fastest
    point divided by the packet-work ratio, its slower points by the larger of both ratios."""
    work, woken = calibration.work_ratio, max(calibration.work_ratio, calibration.wake_ratio)
    curves = {}
    for role, curve in reference.items():
        *slower, fastest = curve
        curves[role] = tuple((rate, cost / woken) for rate, cost in slower) + ((fastest[0], fastest[1] / work),)
    return curves


def main() -> int:
    """``python -m testbed.calibration``: measure and print both figures (no cache is written)."""
    calibration = measure()
    print(f"{calibration.contributions_per_s:,.0f} contributions/s, wake-up round trip "
          f"{calibration.wake_round_trip_s * 1e6:.1f} us on one core, "
          f"{calibration.cross_core_wake_round_trip_s * 1e6:.1f} us across two ({calibration.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
