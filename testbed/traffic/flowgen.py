"""Background-traffic agent: real TCP flows between emulated hosts, one process per host.

Run inside a host's network namespace (a Mininet host)::

    python -m testbed.traffic.flowgen CONFIG.json

Design. The flows come from ``testbed.traffic.distributions.plan_flows`` (the
HPCC generator's rule: Poisson arrivals per sending host, sizes from a
datacenter CDF, uniform destinations; PA-ATP injects Hadoop flows this way at
loads 0.2-0.8, see REFERENCE.md "Background traffic"). A *source* opens one TCP
connection per flow at the flow's start time, writes ``size_bytes`` zero bytes,
half-closes, and waits for the *sink*'s one-byte acknowledgement that it read
every byte up to EOF. The flow completion time (FCT) is measured by the source,
from the start of the successful ``connect`` to the arrival of that
acknowledgement. Both roles run one single-threaded ``selectors`` event loop
with non-blocking sockets, so hundreds of concurrent flows cost one select per
batch of ready sockets, and a new flow starts as soon as its timer is due
(select sleeps exactly until the next start time, retry or deadline).

Readiness is never waited for with fixed sleeps: a source whose connect fails
(e.g. the sink is not listening yet) retries with a bounded exponential backoff
(10 ms doubling to 200 ms) until the deadline. Each role stops at its deadline
or on SIGTERM/SIGINT, records what was unfinished, flushes its output and exits
0. A malformed config exits 2 with a one-line message on stderr. Output is one
start line and one summary line on stdout; nothing per packet.

Config (JSON object):

``{"role": "sink", "port": 5001, "listen_ip": "0.0.0.0", "stop_epoch_s": 1700000030.0, "output": "sink.jsonl"}``
    ``port`` is required; ``listen_ip`` defaults to ``0.0.0.0``; without
    ``stop_epoch_s`` the sink runs until SIGTERM; without ``output`` it records
    nothing. A sink record is one JSON line per connection:
    ``{"peer": "10.0.0.1:40312", "bytes": 1460, "duration_s": 0.0021, "completed": true}``
    (``completed``: EOF reached and acknowledged; ``duration_s`` from accept to EOF).

``{"role": "source", "src": "h1", "start_epoch_s": ..., "stop_epoch_s": ..., "output": "flows.jsonl", "flows": [...]}``
    ``flows`` is a list of ``{"dst": "10.0.0.2", "port": 5001, "start_s": 0.013, "size_bytes": 1460}``
    where ``dst`` is an IPv4 address and ``start_s`` the offset from
    ``start_epoch_s`` (wall clock, seconds since the epoch). ``stop_epoch_s``
    is the deadline; ``src`` is a label copied into each record (default: the
    host name). The source exits as soon as every flow is recorded. Each flow
    is one JSON line, written when it ends:
    ``{"src": "h1", "dst": "10.0.0.2", "size_bytes": 1460, "start_s": 0.013, "fct_s": 0.0021, "completed": true}``
    with ``start_s`` the planned offset and ``fct_s`` null when not completed
    (connection refused until the deadline, reset, or still running at stop).
"""
from __future__ import annotations

import errno
import heapq
import ipaddress
import json
import math
import resource
import selectors
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import IO, Dict, List, Optional, Sequence

CHUNK_BYTES = 64 * 1024  # per send/recv call: bounds the work one ready socket costs a loop turn
ACK = b"\x01"
RETRY_FIRST_S = 0.01
RETRY_MAX_S = 0.2
PERCENTILES = (50, 95, 99)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Percentile with linear interpolation between order statistics (numpy's default)."""
    position = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(position)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def summarise_flows(records: Sequence[dict], duration_s: float, link_rate_bps: float) -> Dict[str, Optional[float]]:
    """Summary of source records over a window of ``duration_s`` on ``link_rate_bps`` of capacity.

    ``achieved_load`` = bytes of *completed* flows / (link_rate_bps * duration_s / 8)
    (a flow cut off at the deadline contributes nothing: the sender cannot know
    how much of it arrived); ``offered_load`` is the same ratio for the bytes of
    all flows. For records of several senders pass the sum of their link
    rates. FCT percentiles (linear interpolation) are over completed flows and
    None when no flow completed; ``mean_size_bytes`` is over all flows.
    """
    if duration_s <= 0 or link_rate_bps <= 0:
        raise ValueError(f"duration_s and link_rate_bps must be > 0, got {duration_s}, {link_rate_bps}")
    capacity_bytes = link_rate_bps * duration_s / 8.0
    completed = [r for r in records if r["completed"]]
    offered_bytes = sum(r["size_bytes"] for r in records)
    delivered_bytes = sum(r["size_bytes"] for r in completed)
    fcts_s = sorted(r["fct_s"] for r in completed)
    summary: Dict[str, Optional[float]] = {
        "flow_count": len(records),
        "completed_count": len(completed),
        "offered_bytes": offered_bytes,
        "delivered_bytes": delivered_bytes,
        "offered_load": offered_bytes / capacity_bytes,
        "achieved_load": delivered_bytes / capacity_bytes,
        "mean_size_bytes": offered_bytes / len(records) if records else None,
    }
    for q in PERCENTILES:
        summary[f"fct_p{q}_s"] = _percentile(fcts_s, q) if fcts_s else None
    return summary


class _StopFlag:
    """Set by the SIGTERM/SIGINT handler; the handler's wakeup byte breaks the select."""

    def __init__(self) -> None:
        self.requested = False

    def handle(self, signum: int, frame: object) -> None:
        self.requested = True


@dataclass
class _Flow:
    dst: str
    port: int
    start_s: float
    size_bytes: int
    sock: Optional[socket.socket] = None
    state: str = "pending"  # pending -> connecting -> sending -> awaiting_ack -> done
    sent_bytes: int = 0
    connect_mono_s: float = 0.0
    backoff_s: float = RETRY_FIRST_S
    attempts: int = 0


class _Source:
    """Starts each flow at its time, sends, half-closes, waits for the ACK byte, records."""

    def __init__(self, config: dict, out: IO[str], stop: _StopFlag, wake: socket.socket) -> None:
        self.src = config.get("src") or socket.gethostname()
        self.flows = [_Flow(f["dst"], int(f["port"]), float(f["start_s"]), int(f["size_bytes"]))
                      for f in config["flows"]]
        now_mono_s, now_epoch_s = time.monotonic(), time.time()
        self.t0_mono_s = now_mono_s + float(config["start_epoch_s"]) - now_epoch_s
        self.deadline_mono_s = now_mono_s + float(config["stop_epoch_s"]) - now_epoch_s
        self.out, self.stop, self.wake = out, stop, wake
        self.selector = selectors.DefaultSelector()
        self.payload = memoryview(bytes(CHUNK_BYTES))
        self.timers = [(self.t0_mono_s + flow.start_s, i) for i, flow in enumerate(self.flows)]
        heapq.heapify(self.timers)
        self.records: List[dict] = []
        self.max_start_lag_s = 0.0

    def _record(self, flow: _Flow, fct_s: Optional[float]) -> None:
        if flow.sock is not None:
            if flow.state in ("connecting", "sending", "awaiting_ack"):
                self.selector.unregister(flow.sock)
            flow.sock.close()
            flow.sock = None
        flow.state = "done"
        record = {"src": self.src, "dst": flow.dst, "size_bytes": flow.size_bytes, "start_s": flow.start_s,
                  "fct_s": fct_s, "completed": fct_s is not None}
        self.records.append(record)
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def _retry(self, index: int) -> None:
        flow = self.flows[index]
        if flow.sock is not None:
            if flow.state == "connecting":
                self.selector.unregister(flow.sock)
            flow.sock.close()
            flow.sock = None
        flow.state = "pending"
        heapq.heappush(self.timers, (time.monotonic() + flow.backoff_s, index))
        flow.backoff_s = min(2 * flow.backoff_s, RETRY_MAX_S)

    def _connect(self, index: int) -> None:
        flow = self.flows[index]
        flow.attempts += 1
        if flow.attempts == 1:  # how late is the start?
            self.max_start_lag_s = max(self.max_start_lag_s, time.monotonic() - self.t0_mono_s - flow.start_s)
        try:
            flow.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            flow.sock.setblocking(False)
            flow.connect_mono_s = time.monotonic()
            err = flow.sock.connect_ex((flow.dst, flow.port))
        except OSError:  # e.g. EMFILE: try again shortly
            self._retry(index)
            return
        if err not in (0, errno.EINPROGRESS):
            self._retry(index)
            return
        flow.state = "connecting"
        self.selector.register(flow.sock, selectors.EVENT_WRITE, index)

    def _on_ready(self, index: int) -> None:
        flow = self.flows[index]
        try:
            if flow.state == "connecting":
                if flow.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self._retry(index)
                    return
                flow.state = "sending"
            if flow.state == "sending":
                remaining = flow.size_bytes - flow.sent_bytes
                if remaining:
                    flow.sent_bytes += flow.sock.send(self.payload[: min(remaining, CHUNK_BYTES)])
                if flow.sent_bytes == flow.size_bytes:
                    flow.sock.shutdown(socket.SHUT_WR)
                    flow.state = "awaiting_ack"
                    self.selector.modify(flow.sock, selectors.EVENT_READ, index)
            elif flow.state == "awaiting_ack":
                ack = flow.sock.recv(1)
                self._record(flow, time.monotonic() - flow.connect_mono_s if ack == ACK else None)
        except BlockingIOError:
            pass
        except OSError:  # reset or refused mid-flow: the flow failed
            self._record(flow, None)

    def _start_due_flows(self) -> None:
        now_mono_s = time.monotonic()
        while self.timers and self.timers[0][0] <= now_mono_s:
            self._connect(heapq.heappop(self.timers)[1])

    def run(self) -> str:
        """Run until every flow is recorded, the deadline, or a stop signal; returns the reason."""
        self.selector.register(self.wake, selectors.EVENT_READ, None)
        reason = "all flows ended"
        while len(self.records) < len(self.flows):
            now_mono_s = time.monotonic()
            if self.stop.requested:
                reason = "signal"
                break
            if now_mono_s >= self.deadline_mono_s:
                reason = "deadline"
                break
            self._start_due_flows()
            next_mono_s = min(self.timers[0][0], self.deadline_mono_s) if self.timers else self.deadline_mono_s
            for key, _ in self.selector.select(max(0.0, next_mono_s - time.monotonic())):
                if key.data is None:
                    _drain(self.wake)
                else:
                    self._on_ready(key.data)
                self._start_due_flows()  # a long batch of ready sockets must not delay a start
        for flow in self.flows:
            if flow.state != "done":
                self._record(flow, None)
        self.selector.close()
        return reason


class _Sink:
    """Accepts connections, reads each to EOF, acknowledges with one byte, records."""

    def __init__(self, config: dict, out: Optional[IO[str]], stop: _StopFlag, wake: socket.socket) -> None:
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((config.get("listen_ip", "0.0.0.0"), int(config["port"])))
        self.listener.listen(socket.SOMAXCONN)
        self.listener.setblocking(False)
        stop_epoch_s = config.get("stop_epoch_s")
        self.deadline_mono_s = (math.inf if stop_epoch_s is None
                                else time.monotonic() + float(stop_epoch_s) - time.time())
        self.out, self.stop, self.wake = out, stop, wake
        self.selector = selectors.DefaultSelector()
        self.buffer = bytearray(CHUNK_BYTES)
        self.connections = 0
        self.completed = 0
        self.bytes_received = 0

    def _finish(self, conn: socket.socket, state: dict, completed: bool) -> None:
        self.selector.unregister(conn)
        conn.close()
        self.connections += 1
        self.completed += completed
        self.bytes_received += state["bytes"]
        if self.out is not None:
            record = {"peer": state["peer"], "bytes": state["bytes"],
                      "duration_s": time.monotonic() - state["accept_mono_s"], "completed": completed}
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()

    def _on_readable(self, conn: socket.socket, state: dict) -> None:
        try:
            n = conn.recv_into(self.buffer)
        except BlockingIOError:
            return
        except OSError:
            self._finish(conn, state, False)
            return
        if n:
            state["bytes"] += n
            return
        try:
            conn.send(ACK)
        except OSError:
            self._finish(conn, state, False)
            return
        self._finish(conn, state, True)

    def run(self) -> str:
        self.selector.register(self.wake, selectors.EVENT_READ, "wake")
        self.selector.register(self.listener, selectors.EVENT_READ, "listen")
        while True:
            if self.stop.requested:
                reason = "signal"
                break
            timeout_s = self.deadline_mono_s - time.monotonic()
            if timeout_s <= 0:
                reason = "deadline"
                break
            for key, _ in self.selector.select(None if math.isinf(timeout_s) else timeout_s):
                if key.data == "wake":
                    _drain(self.wake)
                elif key.data == "listen":
                    try:
                        conn, (host, port) = self.listener.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    state = {"peer": f"{host}:{port}", "bytes": 0, "accept_mono_s": time.monotonic()}
                    self.selector.register(conn, selectors.EVENT_READ, state)
                else:
                    self._on_readable(key.fileobj, key.data)
        for key in list(self.selector.get_map().values()):
            if isinstance(key.data, dict):
                self._finish(key.fileobj, key.data, False)
        self.selector.close()
        self.listener.close()
        return reason


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass


def load_config(path: str) -> dict:
    """Read and check a flowgen config; ValueError names the file and the bad field."""
    with open(path) as f:
        config = json.load(f)
    if not isinstance(config, dict) or config.get("role") not in ("sink", "source"):
        raise ValueError(f"{path}: 'role' must be 'sink' or 'source'")
    required = ("port",) if config["role"] == "sink" else ("start_epoch_s", "stop_epoch_s", "output", "flows")
    missing = [k for k in required if k not in config]
    if missing:
        raise ValueError(f"{path}: {config['role']} config lacks {', '.join(missing)}")
    for i, flow in enumerate(config.get("flows", [])):
        try:
            ipaddress.IPv4Address(flow["dst"])
            if int(flow["port"]) <= 0 or float(flow["start_s"]) < 0 or int(flow["size_bytes"]) < 0:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{path}: flows[{i}] needs dst (IPv4), port > 0, start_s >= 0, size_bytes >= 0: {flow}"
            ) from None
    return config


def _raise_fd_limit(needed: int) -> None:
    """Lift the soft open-files limit to the hard one when the flows could exceed it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1:
        print("usage: python -m testbed.traffic.flowgen CONFIG.json", file=sys.stderr)
        return 2
    try:
        config = load_config(args[0])
    except (OSError, ValueError) as exc:
        print(f"flowgen: bad config: {exc}", file=sys.stderr)
        return 2
    stop = _StopFlag()
    wake, wake_writer = socket.socketpair()
    wake.setblocking(False)
    wake_writer.setblocking(False)
    signal.set_wakeup_fd(wake_writer.fileno())
    signal.signal(signal.SIGTERM, stop.handle)
    signal.signal(signal.SIGINT, stop.handle)
    try:
        if config["role"] == "sink":
            out = open(config["output"], "w") if config.get("output") else None
            try:
                sink = _Sink(config, out, stop, wake)
                print(f"flowgen sink: listening on {config.get('listen_ip', '0.0.0.0')}:{config['port']}", flush=True)
                reason = sink.run()
            finally:
                if out is not None:
                    out.close()
            print(f"flowgen sink: stopped ({reason}); {sink.connections} connections, "
                  f"{sink.completed} completed, {sink.bytes_received} bytes received", flush=True)
        else:
            _raise_fd_limit(len(config["flows"]) + 64)
            with open(config["output"], "w") as out:
                source = _Source(config, out, stop, wake)
                total_bytes = sum(flow.size_bytes for flow in source.flows)
                print(f"flowgen source {source.src}: {len(source.flows)} flows, {total_bytes} bytes to "
                      f"{len({flow.dst for flow in source.flows})} destinations; starts in "
                      f"{source.t0_mono_s - time.monotonic():.3f} s, deadline in "
                      f"{source.deadline_mono_s - time.monotonic():.3f} s", flush=True)
                reason = source.run()
            fcts_s = sorted(r["fct_s"] for r in source.records if r["completed"])
            p50 = f"{_percentile(fcts_s, 50):.4f} s" if fcts_s else "n/a"
            p99 = f"{_percentile(fcts_s, 99):.4f} s" if fcts_s else "n/a"
            print(f"flowgen source {source.src}: stopped ({reason}); {len(fcts_s)}/{len(source.records)} flows "
                  f"completed; fct p50 {p50}, p99 {p99}; starts at most {source.max_start_lag_s * 1e3:.1f} ms late",
                  flush=True)
    except OSError as exc:  # e.g. the sink's port is taken
        print(f"flowgen: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.set_wakeup_fd(-1)
        wake.close()
        wake_writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
