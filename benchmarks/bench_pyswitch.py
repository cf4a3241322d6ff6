#!/usr/bin/env python3
"""Packet budget of one switch: contributions and fragments aggregated per second, packets forwarded per
second, on every target from one command (a script, not a test).

Streams (the same for every target):

- ``aggregate``: job 1, fan-in 4 workers, 64 lanes (336-byte frames), each
  fragment's 4 contributions back to back (a *contribution* is one worker's
  frame summed into a slot; four make one complete *fragment*, the aggregate
  the switch emits: the table reports both), seq i in slot i mod 1024, the
  iteration advancing every 1024 fragments (a slot is reused by the next
  iteration, as in a training run);
- ``forward``: plain 336-byte UDP frames to a /32 lpm route.

Targets:

- ``inproc``: PySwitchCore.receive in a loop over pre-built frames (the
  pyswitch fast path alone, one core);
- ``process``: the real pyswitch process on veth pairs (harness.VethRig):
  a sender process and a receiver process in the rig's namespace on core 0,
  the switch pinned to core 1. Two figures, both from the switch's own
  counters (``aggregated`` / ``forwarded``) over the sender's run time:
  *saturated*, while the sender blasts as fast as it can (the kernel drops
  what the switch cannot take; with both cores busy this can read lower than
  the next figure), and *lossless*, the highest paced rate at which at most
  0.5 % of the offered packets went unprocessed (rates grow by 1.5x from 10k/s,
  then three bisections). The receiver's count of frames that came out is
  kept in the JSON as a cross-check;
- ``bmv2``: ``simple_switch`` with p4/ina.p4 on the same rig, when
  simple_switch and p4c are installed;
- ``ebpf``: ina.bpf.c at TC ingress and egress of the rig's switch ends
  (testbed/dataplane/ebpf): the kernel's work runs in the sender's and
  receiver's softirqs, on core 0, so here the sender (one Python process)
  may be the bound: its ``sent`` over the run time is in the JSON.

Prints a table and writes JSON (``--out``). Root for the veth targets.

    sudo .venv/bin/python benchmarks/bench_pyswitch.py --seconds 5
"""

import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import write_report  # noqa: E402
from benchmarks.sendmmsg import FrameBatch  # noqa: E402
from testbed.budget import bmv2_installed  # noqa: E402
from testbed.emulation.state import stop_process  # noqa: E402
from testbed.calibration import (FANIN, IN_PORT, ITERATION_OFFSET, LANES, OUT_PORT, SLOTS,  # noqa: E402
                                 aggregate_frames, aggregation_entries as entries, forward_frames, inproc_rate)

PACE_BATCH = 32
LOSS_LIMIT = 0.005           # "lossless": at most 0.5 % of the offered packets not processed
SEARCH_START_PER_S = 10_000
SEARCH_GROWTH = 1.5
SEARCH_BISECTIONS = 3


# -- roles run inside the rig's namespace -------------------------------------------------------

def role_send(args):
    """Send the stream, ``PACE_BATCH`` frames per ``sendmmsg`` (a pace of ``--rate`` frames/s between
    batches, or as fast as it goes), the iteration advancing once every frame of the stream left."""
    from testbed.dataplane.pyswitch.process import open_port_socket
    sock = open_port_socket(args.iface)
    sock.setblocking(True)
    batch = FrameBatch(aggregate_frames() if args.stream == "aggregate" else forward_frames())
    total, fd = len(batch.buffers), sock.fileno()
    sent, iteration = 0, 0
    t0 = time.monotonic()
    deadline = t0 + args.seconds
    pace = args.rate > 0
    while time.monotonic() < deadline:
        iteration += 1
        if args.stream == "aggregate":
            for buffer in batch.buffers:
                struct.pack_into("!I", buffer, ITERATION_OFFSET, iteration)
        for first in range(0, total, PACE_BATCH):
            try:
                sent += batch.send(fd, first, min(PACE_BATCH, total - first))
            except OSError:
                pass
            if pace:
                ahead = t0 + sent / args.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - t0}), flush=True)


def role_recv(args):
    from testbed.dataplane.pyswitch.process import open_port_socket
    sock = open_port_socket(args.iface)
    sock.setblocking(True)
    sock.settimeout(0.5)
    received = 0
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        try:
            sock.recv(2048)
            received += 1
        except socket.timeout:
            pass
    print(json.dumps({"received": received}), flush=True)


# -- targets -----------------------------------------------------------------------------------

#: What the benchmark can measure: pyswitch's core in this process, a pyswitch process on veths, bmv2 and ebpf on
#: veths.
TARGETS = ("inproc", "process", "bmv2", "ebpf")

def _pin(cpu):
    return ["taskset", "-c", str(cpu)] if shutil.which("taskset") and os.cpu_count() > 1 else []


def bench_veth(kind, stream, seconds, tmp):
    """Saturated rate (the switch's counter while the sender blasts), then the highest paced
    rate the switch sustains losing at most LOSS_LIMIT (grow by SEARCH_GROWTH, then bisect)."""
    saturated = _veth_run(kind, stream, seconds, tmp, rate=0)
    runs = []
    ok, bad, rate = None, None, SEARCH_START_PER_S
    while bad is None and rate < 4 * max(saturated["rate_per_s"], SEARCH_START_PER_S):
        run = _veth_run(kind, stream, seconds, tmp, rate=rate)
        runs.append(run)
        if run["loss"] <= LOSS_LIMIT:
            ok, rate = run, rate * SEARCH_GROWTH
        else:
            bad = rate
    low = ok["offered_per_s"] if ok else 0.0
    for _ in range(SEARCH_BISECTIONS if bad else 0):
        rate = (low + bad) / 2
        run = _veth_run(kind, stream, seconds, tmp, rate=rate)
        runs.append(run)
        if run["loss"] <= LOSS_LIMIT:
            ok, low = run, rate
        else:
            bad = rate
    return {**saturated, "lossless": ok, "search": [(round(r["offered_per_s"]), round(r["loss"], 4)) for r in runs]}


def _veth_run(kind, stream, seconds, tmp, rate):
    from testbed.dataplane.harness import VethRig
    with VethRig([IN_PORT, OUT_PORT]) as rig:
        proc, runtime, switch = None, None, None
        log = open(Path(tmp) / f"{kind}.log", "w")
        try:
            if kind == "ebpf":
                from testbed.dataplane.ebpf.switch import EbpfSwitch
                switch = EbpfSwitch("bench", rig.switch_ports(), LANES, SLOTS, owner=f"bench-{os.getpid()}")
                switch.start()
                runtime = switch.runtime()
            elif kind == "process":
                from testbed.dataplane.runtime import PySwitchRuntime
                control = str(Path(tmp) / "bench.sock")
                argv = _pin(1) + [sys.executable, "-m", "testbed.dataplane.pyswitch.process", "--name", "bench",
                                  "--control", control, "--lanes", str(LANES), "--slots", str(SLOTS)]
                argv += [f"--port={p}={i}" for p, i in rig.switch_ports().items()]
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(ROOT))
                runtime = PySwitchRuntime.wait_for(control, "bench", 20.0, alive=lambda: proc.poll() is None)
            else:
                from testbed.dataplane.bmv2 import Bmv2Runtime, simple_switch_argv, wait_for_thrift
                from testbed.dataplane.p4build import compile_program
                port = 23000 + os.getpid() % 5000
                argv = _pin(1) + simple_switch_argv(compile_program(LANES, SLOTS), rig.switch_ports(), port, 7,
                                                    Path(tmp) / "bmv2-switch.log")
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
                wait_for_thrift(port, 30.0, alive=lambda: proc.poll() is None, switch="bench",
                                log_paths=[Path(tmp) / f"{kind}.log"])
                runtime = Bmv2Runtime(port, switch="bench", lanes=LANES, slots=SLOTS)
            for e in entries():
                runtime.table_add(e)
            me = [sys.executable, str(Path(__file__).resolve())]
            ns = ["ip", "netns", "exec", rig.netns]
            recv = subprocess.Popen(ns + _pin(0) + me + ["--role", "recv", "--iface", rig.host_ifname(OUT_PORT),
                                                          "--seconds", str(seconds + 2)],
                                    stdout=subprocess.PIPE, cwd=str(ROOT))
            time.sleep(0.5)
            before = runtime.counters()
            t0 = time.monotonic()
            send = subprocess.run(ns + _pin(0) + me + ["--role", "send", "--stream", stream,
                                                        "--iface", rig.host_ifname(IN_PORT),
                                                        "--seconds", str(seconds), "--rate", str(rate)],
                                  capture_output=True, text=True, cwd=str(ROOT))
            elapsed = time.monotonic() - t0
            time.sleep(0.3)          # let the switch finish what is queued in its socket
            after = runtime.counters()
            received = json.loads(recv.communicate(timeout=seconds + 10)[0] or "{}").get("received", 0)
            report = json.loads(send.stdout.strip().splitlines()[-1]) if send.stdout.strip() else {}
            sent, elapsed = report.get("sent", 0), report.get("seconds", elapsed)
            key = "aggregated" if stream == "aggregate" else "forwarded"
            done = after[key] - before[key]
            emitted = after["emitted"] - before["emitted"]
            return {"rate_per_s": done / elapsed, "offered_per_s": sent / elapsed, "sent_per_s": sent / elapsed,
                    "out_frames": received,
                    "emitted": emitted, "fragments_per_s": emitted / elapsed if stream == "aggregate" else None,
                    "seconds": elapsed, "loss": 1.0 - done / sent if sent else None,
                    "complete_aggregates": (FANIN * emitted / done if done else None) if stream == "aggregate"
                    else None}
        finally:
            if runtime is not None:
                runtime.close()
            stop_process(proc)
            if switch is not None:
                switch.stop()
            log.close()


def _cell(run, stream):
    """One measurement in honest units: contributions/s (one worker's fragment summed at the switch) and
    complete 64-lane fragments/s (aggregates emitted, fan-in 4) for ``aggregate``; packets/s for
    ``forward``; with the share of offered packets the switch did not process."""
    if not run:
        return "none found"
    loss = "" if run.get("loss") is None else f", {100 * run['loss']:.1f}% lost"
    if stream == "aggregate":
        fragments = run.get("fragments_per_s")
        whole = "" if fragments is None else f" = {fragments:,.0f} fragments/s"
        return f"{run['rate_per_s']:,.0f} contributions/s{whole}{loss}"
    return f"{run['rate_per_s']:,.0f} packets/s{loss}"


def format_table(rows) -> str:
    lines = [f"{'target':9s} {'stream':9s} {'saturated':<52s} lossless (<= {100 * LOSS_LIMIT:g} % lost)"]
    for row in rows:
        if "skipped" in row:
            lines.append(f"{row['target']:9s} {row['stream']:9s} skipped: {row['skipped']}")
            continue
        lossless = _cell(row.get("lossless"), row["stream"]) if "search" in row else "-"
        lines.append(f"{row['target']:9s} {row['stream']:9s} {_cell(row, row['stream']):<52s} {lossless}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each measurement")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {', '.join(TARGETS)}")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_pyswitch.json"))
    parser.add_argument("--role", choices=("send", "recv"), help=argparse.SUPPRESS)
    parser.add_argument("--iface", help=argparse.SUPPRESS)
    parser.add_argument("--stream", default="aggregate", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "send":
        return role_send(args)
    if args.role == "recv":
        return role_recv(args)

    targets = args.targets.split(",")
    if unknown := [t for t in targets if t not in TARGETS]:
        parser.error(f"--targets: unknown {', '.join(unknown)}; expected some of {', '.join(TARGETS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="inatb-bench-") as tmp:
        for target in targets:
            for stream in ("aggregate", "forward"):
                if target == "bmv2" and not bmv2_installed():
                    rows.append({"target": target, "stream": stream, "skipped": "simple_switch and p4c not found"})
                    continue
                if target != "inproc" and os.geteuid() != 0:
                    rows.append({"target": target, "stream": stream, "skipped": "needs root"})
                    continue
                result = inproc_rate(stream, args.seconds) if target == "inproc" else \
                    bench_veth(target, stream, args.seconds, tmp)
                rows.append({"target": target, "stream": stream, **result})
                print(f"  {target:8s} {stream:9s} {result['rate_per_s']:>12,.0f} /s", file=sys.stderr, flush=True)

    print(format_table(rows))
    write_report(args.out, {"lanes": LANES, "fanin": FANIN, "slots": SLOTS, "seconds": args.seconds, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
