"""The flowgen process (``python -m testbed.traffic.flowgen CONFIG.json``): reads its config, runs the one
role it names until it ends, its deadline or SIGTERM/SIGINT (the signal's wakeup byte breaks the role's
select), writes the role's records, and prints one start line and one summary line; exit 2 on a bad
config, 1 when the role cannot start (e.g. the sink's port is taken), else 0."""
from __future__ import annotations

import json
import resource
import signal
import socket
import sys
import time
from typing import Optional, Sequence

from testbed.traffic.flowgen.config import load_config
from testbed.traffic.flowgen.eventloop import _StopFlag
from testbed.traffic.flowgen.stats import _percentile
from testbed.traffic.flowgen.tcp import _Sink, _Source
from testbed.traffic.flowgen.udp import _UdpSink, _UdpSource


def _raise_fd_limit(needed: int) -> None:
    """Lift the soft open-files limit to the hard one when the flows could exceed it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass


def _run_sink(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
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


def _run_source(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
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


def _run_udp_sink(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
    with open(config["output"], "w") as out:
        sink = _UdpSink(config, stop, wake)
        print(f"flowgen udp-sink: listening on {config.get('listen_ip', '0.0.0.0')}:{config['port']} "
              f"(receive buffer {sink.rcvbuf_bytes} bytes)", flush=True)
        reason = sink.run()
        records = sink.records()
        for record in records:
            out.write(json.dumps(record) + "\n")
    print(f"flowgen udp-sink: stopped ({reason}); {sum(r['datagrams'] for r in records)} datagrams, "
          f"{sum(r['bytes'] for r in records)} bytes from {len(records)} flows, "
          f"{sum(r['lost'] for r in records)} lost, {sink.foreign} foreign", flush=True)


def _run_udp_source(config: dict, stop: _StopFlag, wake: socket.socket) -> None:
    _raise_fd_limit(len(config["flows"]) + 64)
    with open(config["output"], "w") as out:
        source = _UdpSource(config, stop, wake)
        print(f"flowgen udp-source {source.src}: {len(source.flows)} flows, "
              f"{sum(flow.rate_bps for flow in source.flows) / 1e6:.3f} Mb/s in all (IP bytes) to "
              f"{len({flow.dst for flow in source.flows})} destinations; starts in "
              f"{source.t0_mono_s - time.monotonic():.3f} s, deadline in "
              f"{source.deadline_mono_s - time.monotonic():.3f} s", flush=True)
        reason = source.run()
        records = source.records()
        for record in records:
            out.write(json.dumps(record) + "\n")
    lags_s = [r["max_start_lag_s"] for r in records if r["max_start_lag_s"] is not None]
    print(f"flowgen udp-source {source.src}: stopped ({reason}); {sum(r['completed'] for r in records)}/"
          f"{len(records)} flows completed; {sum(r['sent_datagrams'] for r in records)} datagrams, "
          f"{sum(r['sent_bytes'] for r in records)} bytes sent, {sum(r['send_drops'] for r in records)} send drops; "
          f"departures at most {max(lags_s, default=0.0) * 1e3:.1f} ms late", flush=True)


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
        if config["role"] == "udp-sink":
            _run_udp_sink(config, stop, wake)
        elif config["role"] == "udp-source":
            _run_udp_source(config, stop, wake)
        elif config["role"] == "sink":
            _run_sink(config, stop, wake)
        else:
            _run_source(config, stop, wake)
    except OSError as exc:  # e.g. the sink's port is taken
        print(f"flowgen: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.set_wakeup_fd(-1)
        wake.close()
        wake_writer.close()
    return 0
