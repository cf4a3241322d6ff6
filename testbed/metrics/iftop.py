"""iftop-style per-host-pair traffic meter and table (the tool GOAT/InArt measured PS traffic with).

Design
------
Two halves, kept apart so the table can be rebuilt from a run's files:

* **Meter agent** (``python -m testbed.metrics.iftop --iface IFACE --out FILE.jsonl``),
  started inside a host's network namespace. One ``AF_PACKET`` socket
  (``ETH_P_ALL``, cooked ``SOCK_DGRAM`` so any link type works) bound to the
  interface sees incoming and outgoing packets; the packet type from
  ``recvfrom`` tells the direction (``PACKET_OUTGOING`` = sent by this host).
  For every IPv4 packet it adds the IP packet length to a counter keyed by the
  directed pair ``"src>dst"``. Every ``--interval-s`` it appends one JSON line
  ``{"t": epoch_s, "pairs": {"a.b.c.d>e.f.g.h": cumulative_bytes, ...}}`` and
  flushes it; the first line (empty ``pairs``) is written as soon as the socket
  is bound, so callers can poll the file for readiness. It stops on
  SIGTERM/SIGINT or after ``--duration-s``, writing a final line. Fast path:
  ``recvfrom_into`` a 64-byte buffer (the kernel truncates the copy; only the
  headers are needed), integer slicing, a big receive buffer, no logging.
  It sleeps between drains (every ``POLL_S``, or a quarter of the interval)
  instead of waiting on the socket: a process blocked on a socket is woken for
  every packet, in the system call of whoever sent it (the PS's, for every
  RESULT it sends), where a sleeping one costs the sender nothing; the
  receive buffer holds what arrives in between.
  Non-IPv4 frames are ignored (measured: ~100k packets/s on a 2-core VM with
  no loss, sender on the same cores). On loopback, outgoing copies are skipped (every
  packet is seen twice there), as libpcap does for iftop. One agent run per
  file: counters start at zero when the agent starts.

* **Pure functions**: ``load_samples`` reads the JSON lines; ``pair_rates``
  turns cumulative samples into per-pair rates over iftop's 2 s / 10 s / 40 s
  windows; ``format_iftop_table`` prints them laid out exactly as ``iftop -t``
  does (tui.c), with iftop's unit formatting (``readable_size``, ui_common.c);
  ``parse_iftop_output`` reads that layout back (from real iftop or from the
  formatter); ``run_iftop_command`` only *builds* the argv of a real iftop run
  in text mode (running it is the caller's business).

What byte length iftop counts
-----------------------------
iftop counts the **IP packet length**: in ``handle_ip_packet`` (iftop.c) the
accounted length is ``ntohs(iptr->ip_len)`` for IPv4 (IPv6: ``ip6_plen + 40``),
i.e. IP header + payload, without the Ethernet header, VLAN tag or FCS; the
pcap capture length (256 B snap) does not matter. Verified against iftop
1.0pre4 (Debian 12) in two veth namespaces: 2000 UDP datagrams with a 972-byte
payload (IP total length 1000 B) were reported as cumulative ``1.91MB``
(2,000,000 B; Ethernet frames would be 2,028,000 B = ``1.93MB``), and 1-byte
UDP datagrams as 29 B each. The meter counts the same field, so with TSO/GSO
enabled both count the kernel's pre-segmentation super-packet the same way.

iftop semantics reproduced
--------------------------
* A rate column is the bytes seen in the last 2/10/40 s divided by that
  window, or by the time elapsed since the start when that is shorter (iftop
  divides by ``min(history_len, window)``). ``pair_rates`` uses the sample
  closest to ``t_end - window`` and divides by the real time span.
* Peak rate is the largest 2 s slot (sent, received and total separately).
* Rates print in bits (``b``, ``Kb``, ``Mb``, ``Gb``; powers of 1024, as iftop
  does) or, with ``rate_unit="bytes"`` (iftop ``-B``), in ``B``, ``KB``, ...;
  cumulative columns are always bytes. Three significant digits.
* Each line pair is oriented from the host's point of view: ``host => peer``
  is what the host sent, ``peer <=`` what it received. The host is
  ``local_ip`` when given; otherwise the lexically smaller address of the pair
  is taken as the host (iftop uses MAC addresses for this, which a file of IP
  pairs does not record). Lines are sorted like iftop's default (``-o 10s``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

# ---------------------------------------------------------------------------
# Constants (immutable)
# ---------------------------------------------------------------------------

IFTOP_WINDOWS_S: Tuple[float, float, float] = (2.0, 10.0, 40.0)
IFTOP_PEAK_SLOT_S = 2.0  # iftop's RESOLUTION: history slots are 2 s long
PAIR_SEPARATOR = ">"

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_8021Q = 0x8100
PACKET_OUTGOING = 4
ARPHRD_LOOPBACK = 772
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)

DEFAULT_RCVBUF_BYTES = 32 * 1024 * 1024
CAPTURE_SNAP_BYTES = 64  # 4 (VLAN) + 20 (IPv4 header) is all that is read
POLL_S = 0.05  # how often the meter drains its socket and looks at the clock and its stop flag
DRAIN_PACKETS = 4096  # the most packets one drain counts before the meter looks at the clock again

_PRINT_WIDTH = 40  # tui.c PRINT_WIDTH
_DIVIDER_WIDTH = _PRINT_WIDTH + 52
_LABEL_LONG_WIDTH = _PRINT_WIDTH + 8  # snprintf(labellong, PRINT_WIDTH + 9, ...) keeps 48 chars
_UNIT_LABELS = MappingProxyType({
    "bits": ("b", "Kb", "Mb", "Gb"),
    "bytes": ("B", "KB", "MB", "GB"),
})
_UNIT_POWER = MappingProxyType({"": 0, "K": 1, "M": 2, "G": 3})

Sample = Tuple[float, Dict[str, int]]


# ---------------------------------------------------------------------------
# Meter agent
# ---------------------------------------------------------------------------

def open_capture_socket(iface: str, rcvbuf_bytes: int = DEFAULT_RCVBUF_BYTES) -> socket.socket:
    """An AF_PACKET/ETH_P_ALL socket bound to ``iface`` with a big receive buffer.

    Non-blocking: the meter drains it between sleeps.
    """
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    try:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf_bytes)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        sock.setblocking(False)
        sock.bind((iface, ETH_P_ALL))
    except BaseException:
        sock.close()
        raise
    return sock


def _pair_names(counts: Dict[bytes, int], names: Dict[bytes, str]) -> Dict[str, int]:
    out = {}
    for key, total_bytes in counts.items():
        name = names.get(key)
        if name is None:
            name = socket.inet_ntoa(key[:4]) + PAIR_SEPARATOR + socket.inet_ntoa(key[4:])
            names[key] = name
        out[name] = total_bytes
    return out


def run_meter(iface: str, out_path: str, interval_s: float = 1.0,
              duration_s: Optional[float] = None,
              should_stop: Optional[Callable[[], bool]] = None,
              rcvbuf_bytes: int = DEFAULT_RCVBUF_BYTES) -> int:
    """Count IPv4 bytes per directed pair on ``iface``; append samples to ``out_path``.

    Returns the number of lines written. Stops when ``should_stop()`` is true
    or after ``duration_s``; always writes a final line.
    """
    if interval_s <= 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s}")
    poll_s = min(POLL_S, interval_s / 4.0)
    sock = open_capture_socket(iface, rcvbuf_bytes=rcvbuf_bytes)
    counts: Dict[bytes, int] = {}
    names: Dict[bytes, str] = {}
    lines_written = 0
    buf = bytearray(CAPTURE_SNAP_BYTES)
    recv_into = sock.recvfrom_into
    clock = time.monotonic

    def drain() -> bool:
        """Count the packets waiting on the socket, at most ``DRAIN_PACKETS``; whether it is empty now (under
        a stream the socket never empties, and the meter must still look at its clock and stop flag)."""
        for _ in range(DRAIN_PACKETS):
            try:
                nbytes, addr = recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return True
            proto = addr[1]
            off = 0
            if proto == ETH_P_8021Q and nbytes >= 4:  # in-band tag (no VLAN offload)
                proto = (buf[2] << 8) | buf[3]
                off = 4
            if (proto == ETH_P_IP and nbytes >= off + 20 and (buf[off] >> 4) == 4
                    and not (addr[2] == PACKET_OUTGOING and addr[3] == ARPHRD_LOOPBACK)):
                key = bytes(buf[off + 12:off + 20])
                counts[key] = counts.get(key, 0) + ((buf[off + 2] << 8) | buf[off + 3])
        return False

    try:
        with open(out_path, "a", encoding="utf-8") as out:
            def emit() -> None:
                nonlocal lines_written
                line = json.dumps({"t": round(time.time(), 6), "pairs": _pair_names(counts, names)},
                                  separators=(",", ":"), sort_keys=True)
                out.write(line + "\n")
                out.flush()
                lines_written += 1

            emit()  # readiness marker: the socket is bound
            start_mono = clock()
            next_emit_mono = start_mono + interval_s
            end_mono = math.inf if duration_s is None else start_mono + duration_s
            while True:
                emptied = drain()
                now_mono = clock()
                if (should_stop is not None and should_stop()) or now_mono >= end_mono:
                    break
                if now_mono >= next_emit_mono:
                    emit()
                    next_emit_mono += interval_s
                    if next_emit_mono <= now_mono:  # fell behind: do not burst
                        next_emit_mono = now_mono + interval_s
                if emptied:
                    time.sleep(max(0.0, min(poll_s, next_emit_mono - clock(), end_mono - clock())))
            drain()
            emit()  # final line
    finally:
        sock.close()
    return lines_written


# ---------------------------------------------------------------------------
# Samples and rates (pure)
# ---------------------------------------------------------------------------

def load_samples(path: str) -> List[Sample]:
    """Read a meter file: list of ``(t_epoch_s, {"a>b": cumulative_bytes})`` in file order.

    Blank lines and a torn last line (agent killed mid-write) are skipped.
    """
    samples: List[Sample] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            samples.append((float(record["t"]),
                            {str(k): int(v) for k, v in record.get("pairs", {}).items()}))
    return samples


@dataclass(frozen=True)
class PairRate:
    """Rates of one directed pair over each window, and its cumulative bytes at the end."""

    rates_bps: Tuple[float, ...]
    cumulative_bytes: int


def _as_windows(window_s: Union[float, Sequence[float]]) -> Tuple[float, ...]:
    if isinstance(window_s, (int, float)):
        return (float(window_s),)
    return tuple(float(w) for w in window_s)


def _reference_index(times_s: Sequence[float], window_s: float) -> int:
    """Index of the earlier sample that starts a window of ``window_s`` ending at the last sample."""
    t_end = times_s[-1]
    target = t_end - window_s
    if target <= times_s[0]:
        return 0  # less history than the window: average over all of it (as iftop)
    best = 0
    for i in range(len(times_s) - 1):
        if abs(times_s[i] - target) <= abs(times_s[best] - target):
            best = i
    return best


def pair_rates(samples: Sequence[Sample],
               window_s: Union[float, Sequence[float]] = IFTOP_WINDOWS_S) -> Dict[str, PairRate]:
    """Per directed pair: rate in bits/s over each window ending at the last sample.

    ``window_s`` is one window or a sequence (default iftop's 2/10/40 s). A
    window longer than the recorded history is averaged over the history.
    Pairs absent from a sample count as 0 bytes at that time.
    """
    windows_s = _as_windows(window_s)
    if not samples:
        return {}
    times_s = [t for t, _ in samples]
    end_pairs = samples[-1][1]
    refs = [_reference_index(times_s, w) for w in windows_s]
    result: Dict[str, PairRate] = {}
    for pair, end_bytes in end_pairs.items():
        rates_bps = []
        for ref in refs:
            span_s = times_s[-1] - times_s[ref]
            if span_s <= 0:
                rates_bps.append(0.0)
                continue
            delta_bytes = end_bytes - samples[ref][1].get(pair, 0)
            rates_bps.append(max(delta_bytes, 0) * 8.0 / span_s)
        result[pair] = PairRate(tuple(rates_bps), int(end_bytes))
    return result


def _split_pair(pair: str) -> Tuple[str, str]:
    src, sep, dst = pair.partition(PAIR_SEPARATOR)
    if not sep:
        raise ValueError(f"pair {pair!r} is not 'src>dst'")
    return src, dst


def _host_of(src: str, dst: str, local_ips: frozenset) -> str:
    """Which end of a pair is 'this host' (the left column of iftop's table)."""
    if src in local_ips:
        return src
    if dst in local_ips:
        return dst
    return min(src, dst)


def _slot_peak_bps(times_s: Sequence[float], cum_bytes: Sequence[float], slot_s: float) -> float:
    """Largest rate over consecutive slots of about ``slot_s`` (iftop's peak)."""
    if len(times_s) < 2:
        return 0.0
    gaps = sorted(b - a for a, b in zip(times_s, times_s[1:]))
    tolerance_s = 0.5 * gaps[len(gaps) // 2]
    peak_bps = 0.0
    start = 0
    for j in range(1, len(times_s)):
        span_s = times_s[j] - times_s[start]
        if span_s >= slot_s - tolerance_s and span_s > 0:
            peak_bps = max(peak_bps, (cum_bytes[j] - cum_bytes[start]) * 8.0 / span_s)
            start = j
    return peak_bps


# ---------------------------------------------------------------------------
# iftop's text layout
# ---------------------------------------------------------------------------

def readable_size(n_bytes: float, unit: str = "bits") -> str:
    """iftop's ``readable_size``: ``n_bytes`` shown in bits or bytes, 1024 steps, 3 digits.

    Returns the string iftop puts in its 10-char column (at most 9 chars,
    leading space included), e.g. ``'  576B'``, ``' 1.12KB'``, ``' 9.54Mb'``.
    """
    labels = _UNIT_LABELS[unit]
    n = float(n_bytes) * (8.0 if unit == "bits" else 1.0)
    i = 0
    size = 1.0
    while True:
        if n < size * 1000 or i >= len(labels) - 1:
            text = " %4.0f%s" % (n / size, labels[i])
            break
        i += 1
        size *= 1024
        if n < size * 10:
            text = " %4.2f%s" % (n / size, labels[i])
            break
        if n < size * 100:
            text = " %4.1f%s" % (n / size, labels[i])
            break
    return text[:9]


_SIZE_TOKEN = re.compile(r"^([0-9]+(?:\.[0-9]*)?)([KMG]?)([bBp])$")


def parse_readable_size(token: str) -> float:
    """Inverse of ``readable_size``: ``'1.12KB'`` -> 1146.88 (bytes); bit units are divided by 8."""
    match = _SIZE_TOKEN.match(token.strip())
    if not match:
        raise ValueError(f"not an iftop size: {token!r}")
    value = float(match.group(1)) * 1024 ** _UNIT_POWER[match.group(2)]
    if match.group(3) == "p":
        raise ValueError(f"packet counts are not sizes: {token!r}")
    return value / 8.0 if match.group(3) == "b" else value


def _label_long(text: str) -> str:
    return ("%-*s" % (_LABEL_LONG_WIDTH, text))[:_LABEL_LONG_WIDTH]


def _host_col(host: str) -> str:
    return "%-*s" % (_PRINT_WIDTH, host)


def format_iftop_table(samples: Sequence[Sample], iface: str,
                       local_ip: Union[None, str, Iterable[str]] = None,
                       rate_unit: str = "bits", max_lines: Optional[int] = None) -> str:
    """The table ``iftop -t`` prints (one block, as with ``-s``), built from meter samples.

    ``local_ip``: the address(es) of the host owning ``iface``; pairs are
    oriented from its point of view (lexically when not given). ``rate_unit``:
    ``"bits"`` (iftop default) or ``"bytes"`` (iftop ``-B``). ``max_lines``:
    iftop's ``-L`` (its default is 10); None prints every pair.
    """
    if rate_unit not in _UNIT_LABELS:
        raise ValueError(f"rate_unit must be 'bits' or 'bytes', got {rate_unit!r}")
    if isinstance(local_ip, str):
        local_ips = frozenset([local_ip])
    else:
        local_ips = frozenset(local_ip or ())
    rates = pair_rates(samples, IFTOP_WINDOWS_S)
    n_windows = len(IFTOP_WINDOWS_S)

    # host pair -> [sent rates, recv rates, sent cum, recv cum]
    lines: Dict[Tuple[str, str], list] = {}
    sent_pairs, recv_pairs = [], []
    for pair, rate in rates.items():
        src, dst = _split_pair(pair)
        host = _host_of(src, dst, local_ips)
        peer = dst if host == src else src
        line = lines.setdefault((host, peer), [[0.0] * n_windows, [0.0] * n_windows, 0, 0])
        column = 0 if src == host else 1
        for j in range(n_windows):
            line[column][j] += rate.rates_bps[j]
        line[2 + column] += rate.cumulative_bytes
        (sent_pairs if column == 0 else recv_pairs).append(pair)

    ordered = sorted(lines.items(), key=lambda item: (
        -(item[1][0][1] + item[1][1][1]), -(item[1][0][2] + item[1][1][2]), item[0]))
    if max_lines is not None:
        ordered = ordered[:max_lines]

    def rate_col(bps: float) -> str:
        return "%10s" % readable_size(bps / 8.0, rate_unit)

    def cum_col(n_bytes: float) -> str:
        return "%10s" % readable_size(n_bytes, "bytes")

    out: List[str] = ["Listening on %s" % iface]
    out.append("%s %s     %10s %10s %10s %10s" % (
        "   #", ("%-*s" % (_PRINT_WIDTH, "Host name (port/service if enabled)"))[:_PRINT_WIDTH - 1],
        "last 2s", "last 10s", "last 40s", "cumulative"))
    out.append("-" * _DIVIDER_WIDTH)
    for number, ((host, peer), (sent_bps, recv_bps, sent_bytes, recv_bytes)) in enumerate(ordered, 1):
        out.append("%4d %s =>" % (number, _host_col(host))
                   + "".join(" " + rate_col(r) for r in sent_bps) + " " + cum_col(sent_bytes))
        out.append("     %s <=" % _host_col(peer)
                   + "".join(" " + rate_col(r) for r in recv_bps) + " " + cum_col(recv_bytes))
    out.append("-" * _DIVIDER_WIDTH)

    total_sent_bps = [sum(line[0][j] for line in lines.values()) for j in range(n_windows)]
    total_recv_bps = [sum(line[1][j] for line in lines.values()) for j in range(n_windows)]
    for label, values in (("Total send rate:", total_sent_bps),
                          ("Total receive rate:", total_recv_bps),
                          ("Total send and receive rate:",
                           [s + r for s, r in zip(total_sent_bps, total_recv_bps)])):
        out.append(_label_long(label) + " " + " ".join(rate_col(v) for v in values))
    out.append("-" * _DIVIDER_WIDTH)

    times_s = [t for t, _ in samples]
    sent_series = [sum(p.get(k, 0) for k in sent_pairs) for _, p in samples]
    recv_series = [sum(p.get(k, 0) for k in recv_pairs) for _, p in samples]
    total_series = [s + r for s, r in zip(sent_series, recv_series)]
    peaks_bps = [_slot_peak_bps(times_s, series, IFTOP_PEAK_SLOT_S)
                 for series in (sent_series, recv_series, total_series)]
    out.append(_label_long("Peak rate (sent/received/total):") + " "
               + " ".join(rate_col(v) for v in peaks_bps))
    cum_sent_bytes = sum(line[2] for line in lines.values())
    cum_recv_bytes = sum(line[3] for line in lines.values())
    out.append(_label_long("Cumulative (sent/received/total):") + " "
               + " ".join(cum_col(v) for v in (cum_sent_bytes, cum_recv_bytes,
                                               cum_sent_bytes + cum_recv_bytes)))
    out.append("=" * _DIVIDER_WIDTH)
    return "\n".join(out) + "\n\n"


# ---------------------------------------------------------------------------
# Real iftop: argv builder and output parser
# ---------------------------------------------------------------------------

def run_iftop_command(iface: str, seconds: int, rate_unit: str = "bits",
                      max_lines: int = 1000, config_path: str = "/dev/null") -> List[str]:
    """Build (do not run) the argv of one real ``iftop`` text-mode measurement.

    ``-t`` text output, ``-n`` no DNS, ``-N`` no port names, no ``-P`` (one line
    pair per host pair, like the meter), ``-s SECONDS`` print one table then
    quit, ``-L`` enough lines for every pair, ``-i IFACE``, ``-B`` when
    ``rate_unit == "bytes"``, ``-c /dev/null`` so a user's ``~/.iftoprc`` cannot
    change the output. Run it inside the host's namespace
    (``ip netns exec NS`` + argv). Note: iftop only advances its clock when an
    IP packet arrives, so with ``-s`` it prints (and exits) at the first packet
    after ``SECONDS`` (in practice at the next 2 s slot boundary): guard the
    run with a timeout and keep some traffic flowing.
    """
    if rate_unit not in _UNIT_LABELS:
        raise ValueError(f"rate_unit must be 'bits' or 'bytes', got {rate_unit!r}")
    seconds_int = int(seconds)
    if seconds_int < 1:
        raise ValueError(f"seconds must be >= 1, got {seconds}")
    argv = ["iftop", "-t", "-n", "-N", "-s", str(seconds_int), "-L", str(int(max_lines)),
            "-i", iface, "-c", config_path]
    if rate_unit == "bytes":
        argv.insert(4, "-B")
    return argv


_PAIR_SENT = re.compile(r"^\s*\d+\s+(\S+)\s+=>\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
_PAIR_RECV = re.compile(r"^\s+(\S+)\s+<=\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$")
_TOTAL_LINES = (
    ("Total send rate:", "send_rate_bps"),
    ("Total receive rate:", "receive_rate_bps"),
    ("Total send and receive rate:", "total_rate_bps"),
    ("Peak rate (sent/received/total):", "peak_bps"),
)
_CUMULATIVE = "Cumulative (sent/received/total):"


def parse_iftop_output(text: str) -> dict:
    """Parse ``iftop -t`` output (the last complete table) or ``format_iftop_table`` output.

    Returns ``{"sent_bytes", "received_bytes", "total_bytes"}`` (cumulative
    totals), ``"pairs"`` (directed ``"a>b"`` -> cumulative bytes: a ``host =>``
    line is ``host>peer``, its ``peer <=`` line is ``peer>host``),
    ``"pair_rates_bps"`` (same keys -> 2/10/40 s rates in bit/s) and the
    ``"send_rate_bps"``, ``"receive_rate_bps"``, ``"total_rate_bps"``,
    ``"peak_bps"`` tuples. Values carry iftop's display precision (3 digits).
    Raises ValueError when no complete table is found.
    """
    last: Optional[dict] = None
    block: Optional[dict] = None
    host: Optional[str] = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("# Host name"):
            block = {"pairs": {}, "pair_rates_bps": {}}
            host = None
            continue
        if block is None:
            continue
        match = _PAIR_SENT.match(raw)
        if match:
            host = match.group(1)
            block["_pending"] = match.groups()
            continue
        match = _PAIR_RECV.match(raw)
        if match and host is not None and "_pending" in block:
            sent = block.pop("_pending")
            peer = match.group(1)
            for key, fields in ((host + PAIR_SEPARATOR + peer, sent[1:]),
                                (peer + PAIR_SEPARATOR + host, match.groups()[1:])):
                block["pairs"][key] = block["pairs"].get(key, 0) + int(round(parse_readable_size(fields[3])))
                block["pair_rates_bps"][key] = tuple(parse_readable_size(f) * 8.0 for f in fields[:3])
            host = None
            continue
        for label, name in _TOTAL_LINES:
            if stripped.startswith(label):
                block[name] = tuple(parse_readable_size(f) * 8.0
                                    for f in stripped[len(label):].split())
                break
        else:
            if stripped.startswith(_CUMULATIVE):
                sent_b, recv_b, total_b = (int(round(parse_readable_size(f)))
                                           for f in stripped[len(_CUMULATIVE):].split())
                block.update(sent_bytes=sent_b, received_bytes=recv_b, total_bytes=total_b)
                block.pop("_pending", None)
                last = block
                block = None
    if last is None:
        raise ValueError("no complete iftop table (no 'Cumulative (sent/received/total):' line)")
    return last


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testbed.metrics.iftop",
        description="Count IPv4 bytes per (src, dst) pair on an interface, iftop-style; "
                    "append one JSON line of cumulative bytes per interval.")
    parser.add_argument("--iface", required=True, help="interface to capture on")
    parser.add_argument("--out", required=True, help="JSON-lines file to append samples to")
    parser.add_argument("--interval-s", type=float, default=1.0, help="seconds between lines")
    parser.add_argument("--duration-s", type=float, default=None,
                        help="stop after this many seconds (default: until SIGTERM/SIGINT)")
    args = parser.parse_args(argv)
    if args.interval_s <= 0:
        parser.error("--interval-s must be > 0")

    stop = threading.Event()

    def _on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        run_meter(args.iface, args.out, interval_s=args.interval_s,
                  duration_s=args.duration_s, should_stop=stop.is_set)
    except OSError as exc:
        print(f"iftop meter: cannot capture on {args.iface!r} into {args.out!r}: {exc}",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
