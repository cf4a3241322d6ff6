"""What the worker and PS agents share: the UDP endpoint, readiness handshake, records."""

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path

from testbed.dataplane.wire import INA_UDP_PORT

SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
ECN_ECT0 = 0x02      # IPv4 ECN field: ECN-capable transport, so switch queues mark CE instead of dropping
ECN_CE = 0x03


def open_endpoint(ip: str) -> socket.socket:
    """UDP socket on the INA port, bound to any address so broadcast results arrive too.

    Every datagram leaves ECN-capable (ECT(0)); the socket reports each arriving
    datagram's TOS byte (IP_RECVTOS) so the PS can echo the CE marks of the switch queues.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, ECN_ECT0)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    for opt, fallback in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, 8 << 20)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, fallback, 8 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    sock.bind(("0.0.0.0", INA_UDP_PORT))
    sock.setblocking(False)
    return sock


def announce_ready_and_wait(run_dir: str, name: str, deadline_s: float) -> float:
    """Touch ``agents/<name>.ready``, then poll for ``agents/go`` (written once every agent is ready).

    Returns the start time (epoch seconds) the orchestrator wrote into ``go``.
    """
    agents = Path(run_dir) / "agents"
    (agents / f"{name}.ready").write_text(str(os.getpid()))
    go = agents / "go"
    limit = time.monotonic() + deadline_s
    while time.monotonic() < limit:
        if go.exists():
            text = go.read_text().strip()
            if text:
                # Everything (agents, background flows, injections) starts at the same epoch.
                start = float(text)
                if start > time.time():
                    time.sleep(start - time.time())
                return start
        time.sleep(0.005)
    raise TimeoutError(f"{name}: no start signal within {deadline_s:.0f}s")


class RecordWriter:
    """One JSON object per line, flushed at once so the orchestrator can follow progress."""

    def __init__(self, run_dir: str, name: str):
        path = Path(run_dir) / "records" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "a", buffering=1)

    def write(self, record: dict):
        self._file.write(json.dumps(record) + "\n")

    def close(self):
        self._file.close()


@contextlib.contextmanager
def agent_session(config):
    """The endpoint, record file and start time (epoch seconds) of an agent, after the common start signal;
    closed on exit."""
    sock = open_endpoint(config.ip)
    records = RecordWriter(config.run_dir, config.name)
    try:
        start_epoch_s = announce_ready_and_wait(config.run_dir, config.name, config.deadline_s)
        yield sock, records, start_epoch_s
    finally:
        records.close()
        sock.close()


def install_status_dump(run_dir: str, name: str, describe):
    """On SIGUSR1 write ``describe()`` to ``agents/<name>.status.json`` (what the agent waits for).

    The orchestrator asks every agent for it when a run stalls; the file appears whole
    (written aside, then renamed) so a reader never sees half of it.
    """
    path = Path(run_dir) / "agents" / f"{name}.status.json"

    def dump(signum, frame):
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(describe(), default=str))
        os.replace(tmp, path)

    signal.signal(signal.SIGUSR1, dump)
