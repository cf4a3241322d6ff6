#!/usr/bin/env python3
"""What a frame costs to send and receive on a packet socket over a veth pair, one system call per frame or in
batches (``sendmmsg`` through ctypes: Python's socket module has none): the saving batching could bring a
pyswitch process, against the 23-36 us a packet costs a switch in a run (``PACKET_COST_CURVES``). A script,
not a test.

It makes one veth pair with the packet tests' rig (:class:`testbed.dataplane.harness.VethRig`: offloads off,
as in a run; removed afterwards), sends ``--frames`` INA-sized frames from the packet socket on the rig's end
and reads them from a packet socket on the switch's end, with no process waiting at the far end: the
figures are the system calls and the kernel's delivery, without any wake-up.

Root (it makes the veth pair).

    sudo .venv/bin/python benchmarks/bench_veth_send.py
"""

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.report import write_report  # noqa: E402
from benchmarks.sendmmsg import FrameBatch  # noqa: E402
from testbed.dataplane.harness import VethRig  # noqa: E402
from testbed.dataplane.pyswitch.process import open_port_socket  # noqa: E402
from testbed.dataplane.wire import DEFAULT_LANES, ina_frame_bytes  # noqa: E402

def drain(sock) -> int:
    received = 0
    while True:
        try:
            sock.recv(2048)
        except BlockingIOError:
            return received
        received += 1


def per_frame_send_us(sender, receiver, frame: bytes, frames: int) -> tuple:
    """(us per frame sent with one send() each, us per frame received with one recv() each)."""
    start = time.perf_counter()
    for _ in range(frames):
        sender.send(frame)
    sent_s = time.perf_counter() - start
    start = time.perf_counter()
    received = drain(receiver)
    return sent_s / frames * 1e6, (time.perf_counter() - start) / max(received, 1) * 1e6


def batched_send_us(sender, receiver, frame: bytes, frames: int, batch: int) -> float:
    """us per frame sent by sendmmsg in batches of ``batch`` (the receiver drained after)."""
    batched = FrameBatch([frame] * batch)
    sent = 0
    start = time.perf_counter()
    for _ in range(frames // batch):
        sent += batched.send(sender.fileno(), 0, batch)
    elapsed = time.perf_counter() - start
    drain(receiver)
    return elapsed / sent * 1e6


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench" / "bench_veth_send.json"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench_veth_send: needs root (it makes a veth pair)")
    frame = b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + bytes(ina_frame_bytes(DEFAULT_LANES) - 14)
    with VethRig([1]) as rig:
        sender, receiver = rig.socks[1], open_port_socket(rig.switch_ifname(1))
        try:
            rounds = []
            for _ in range(args.rounds):
                send_us, recv_us = per_frame_send_us(sender, receiver, frame, args.frames)
                rounds.append({"send_us": send_us, "recv_us": recv_us,
                               "sendmmsg_us": batched_send_us(sender, receiver, frame, args.frames, args.batch)})
        finally:
            receiver.close()
    best = {key: min(r[key] for r in rounds) for key in rounds[0]}
    print(f"{len(frame)}-byte frames over a veth pair, best of {args.rounds}: send() {best['send_us']:.2f} us per "
          f"frame, recv() {best['recv_us']:.2f} us, sendmmsg in batches of {args.batch} {best['sendmmsg_us']:.2f} us")
    write_report(args.out, {"frame_bytes": len(frame), "frames": args.frames, "batch": args.batch,
                            "rounds": rounds, "best": best})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
