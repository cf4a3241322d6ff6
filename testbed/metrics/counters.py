"""Counters sampled over time: every switch port's bytes and packets, and the switches' INA counters.

Switch ports live in the root namespace, so their kernel counters are read
from sysfs there; a switch port's tx is its neighbour host's rx. Each sample
is one line of ``metrics.jsonl``: ``{"t": epoch_s, "ifaces": {name: [rx_bytes,
rx_packets, tx_bytes, tx_packets]}}``.

The programmable switches' INA counters (``ina_stats``, p4/README.md) are
sampled by the orchestrator's monitor loop, which owns the switches' control
clients, into ``switch_stats.jsonl``: ``{"t": epoch_s, "switches": {name:
{counter: value}}}`` (:class:`SwitchStatSeries`, ``SAMPLED_STATS``): the
aggregation throughput of a switch over time is its ``aggregated``
contributions per second (PA-ATP Fig. 8).
"""

import json
import threading
import time
from pathlib import Path

_FIELDS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets")


def read_counters(ifname: str):
    base = Path("/sys/class/net") / ifname / "statistics"
    try:
        return [int((base / f).read_text()) for f in _FIELDS]
    except OSError:
        return None


class CounterSampler(threading.Thread):
    """Background sampling into a JSONL file until ``stop()``."""

    def __init__(self, ifaces, path: Path, interval_s: float):
        super().__init__(name="counter-sampler", daemon=True)
        self.ifaces = list(ifaces)
        self.path = Path(path)
        self.interval_s = interval_s
        self._stop_event = threading.Event()
        self._last_two = []   # [(t, values)] of the two most recent samples

    def sample(self, out):
        values = {}
        for name in self.ifaces:
            counters = read_counters(name)
            if counters is not None:
                values[name] = counters
        now = time.time()
        self._last_two = (self._last_two + [(now, values)])[-2:]
        out.write(json.dumps({"t": now, "ifaces": values}) + "\n")
        out.flush()

    def run(self):
        with open(self.path, "a") as out:
            self.sample(out)
            while not self._stop_event.wait(self.interval_s):
                self.sample(out)
            self.sample(out)

    def rate_bps(self, ifaces, field: str = "tx_bytes") -> float:
        """Bits/s summed over ``ifaces`` between the two most recent samples."""
        if len(self._last_two) < 2:
            return 0.0
        (t0, v0), (t1, v1) = self._last_two
        index = _FIELDS.index(field)
        delta = sum(v1[i][index] - v0[i][index] for i in ifaces if i in v0 and i in v1)
        return 8 * delta / (t1 - t0) if t1 > t0 else 0.0

    def stop(self):
        self._stop_event.set()
        self.join(timeout=5)


#: The INA counters sampled over a run: contributions summed into a slot, and aggregates sent on.
SAMPLED_STATS = ("aggregated", "emitted")


class SwitchStatSeries:
    """Samples of the switches' INA counters, one JSON line each, no more often than ``interval_s``.

    ``due(now_s)`` says whether a sample is due on the caller's monotonic clock; ``write(t_epoch_s,
    readings)`` appends ``readings`` ({switch: {counter: value}}) as one line and restarts the interval."""

    def __init__(self, path: Path, interval_s: float):
        self.path = Path(path)
        self.interval_s = interval_s
        self.next_s = None

    def due(self, now_s: float) -> bool:
        return self.next_s is None or now_s >= self.next_s

    def write(self, now_s: float, t_epoch_s: float, readings: dict):
        with open(self.path, "a") as out:
            out.write(json.dumps({"t": t_epoch_s, "switches": readings}) + "\n")
        self.next_s = now_s + self.interval_s


def stat_rate_series(samples, switch: str, counter: str, t0: float):
    """(t relative to ``t0``, counter increments per second) between consecutive ``switch_stats.jsonl``
    samples that both hold ``switch``'s ``counter``."""
    series = []
    for prev, cur in zip(samples, samples[1:]):
        before, after = prev["switches"].get(switch, {}), cur["switches"].get(switch, {})
        dt = cur["t"] - prev["t"]
        if counter in before and counter in after and dt > 0:
            series.append((cur["t"] - t0, (after[counter] - before[counter]) / dt))
    return series


def load_counter_samples(path: Path):
    samples = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                samples.append(json.loads(line))
    return samples


def interface_deltas(samples) -> dict:
    """Totals over the run per interface: {name: {rx_bytes, rx_packets, tx_bytes, tx_packets}}."""
    if not samples:
        return {}
    first, last = samples[0]["ifaces"], samples[-1]["ifaces"]
    return {name: {f: last[name][i] - first.get(name, [0] * 4)[i] for i, f in enumerate(_FIELDS)}
            for name in last}


#: A port is held by a packets-per-second shaper in an interval when it sent at least this share of its
#: packet rate while its frames averaged at most this share of the full frame the rate assumes. Below
#: 0.9: an interval (0.5 s by default) spans gaps between iterations, and PA-ATP on bmv2 (a GACK beside
#: each RESULT toward a worker) peaked at 88% of the cap in 207-byte frames while bound by it.
PACKET_RATE_BOUND_SHARE = 0.8


def packet_rate_bound_ports(samples, caps_pps: dict, full_frame_bytes: int) -> dict:
    """Switch ports whose packets-per-second shaper held them below their link rate (bmv2 shapes so:
    ``testbed.dataplane.bmv2``): per port ``caps_pps`` names, the intervals between samples in which it
    sent at least ``PACKET_RATE_BOUND_SHARE`` of its cap in frames that averaged at most that share of
    ``full_frame_bytes`` -> {port: {"intervals", "peak_share_of_cap", "mean_frame_bytes"}} (the
    interval of the peak)."""
    tx_bytes, tx_packets = _FIELDS.index("tx_bytes"), _FIELDS.index("tx_packets")
    bound = {}
    for before, after in zip(samples, samples[1:]):
        dt = after["t"] - before["t"]
        if dt <= 0:
            continue
        for port, cap in caps_pps.items():
            if port not in before["ifaces"] or port not in after["ifaces"] or cap <= 0:
                continue
            packets = after["ifaces"][port][tx_packets] - before["ifaces"][port][tx_packets]
            frame_bytes = (after["ifaces"][port][tx_bytes] - before["ifaces"][port][tx_bytes]) / packets \
                if packets else 0.0
            share = packets / dt / cap
            if share >= PACKET_RATE_BOUND_SHARE and frame_bytes <= PACKET_RATE_BOUND_SHARE * full_frame_bytes:
                entry = bound.setdefault(port, {"intervals": 0, "peak_share_of_cap": 0.0, "mean_frame_bytes": 0.0})
                entry["intervals"] += 1
                if share > entry["peak_share_of_cap"]:
                    entry["peak_share_of_cap"], entry["mean_frame_bytes"] = share, frame_bytes
    return bound


def rate_series(samples, ifname: str, field: str = "tx_bytes", t0: float = None):
    """(t relative to ``t0`` (default: the first sample), bits/s) between consecutive samples."""
    index = _FIELDS.index(field)
    if t0 is None:
        t0 = samples[0]["t"] if samples else 0
    series = []
    for prev, cur in zip(samples, samples[1:]):
        if ifname in prev["ifaces"] and ifname in cur["ifaces"]:
            dt = cur["t"] - prev["t"]
            if dt > 0:
                series.append((cur["t"] - t0, 8 * (cur["ifaces"][ifname][index] - prev["ifaces"][ifname][index]) / dt))
    return series
