"""Host-induced delay: how long packets wait for the process that handles them, and how late timed sends leave.

A run at 1/1000 scale is faithful only if the processes that stand in for
hosts and switches add no delay the scenario does not have. A process can be
far from saturated (a tenth of a core) and still add delay: each packet waits
until the scheduler runs it, and a process that shares two cores with a dozen
others wakes late. A ring all-reduce, whose 2 (N - 1) steps each end with a
round trip, or PA-ATP's GACK rounds, read slow by exactly those waits, while
every CPU share looks healthy.

Every agent and every pyswitch process therefore keeps a :class:`HostDelayMeter`
(a bmv2 switch, a C++ process, counts in its ``switch_wait`` register instead:
:func:`switch_wait_summary`):

- **receive wait**: for each packet, the wall time between the kernel's
  receive timestamp (``SO_TIMESTAMPNS``, taken when the packet reached the
  host's network stack, after any modelled queue) and the moment the process
  handles it (:meth:`HostDelayMeter.received`), less the time the process's
  sends waited for its host link meanwhile (a full send buffer: a PS
  answering each of sixteen workers one by one is link-bound;
  :meth:`HostDelayMeter.sends_unblocked`): that wait is the link's, not the
  host's;
- **send lateness**: for each timed wake-up (a transport's pacing or timer,
  a shaped switch queue's next departure), how long after its due time the
  process ran (:meth:`HostDelayMeter.woke`).

The kernel turns arrival stamping on a moment after the first socket of the
machine asks for it; a datagram read before then is stamped as it is read
and counts as no wait. Agents and switches open their sockets before the
run's start signal, so their traffic is stamped on arrival.

Both are summarised as count, mean, 99th percentile and maximum, in wall
seconds (:meth:`HostDelayMeter.summary`); the run's summary gives them per
role in virtual seconds (``host_delay``), and :mod:`testbed.metrics.distortion`
marks a run whose round trips the host delayed by more than a stated share of
the scenario's own round (:func:`round_trip_delay_s`). The meter keeps a
log-spaced histogram (``BIN_EDGES_S``), folded from a small buffer with numpy,
so its memory is fixed and a packet costs an append. :func:`kernel_timestamp_s`
and :func:`enable_receive_timestamps` are the socket side.
"""

import bisect
import socket
import struct
from array import array

import numpy as np

#: ``SO_TIMESTAMPNS`` / ``SCM_TIMESTAMPNS`` (asm-generic/socket.h; Python's socket module does not name them).
SO_TIMESTAMPNS = 35
#: Ancillary space for one ``struct timespec`` (two 64-bit fields).
TIMESTAMP_CMSG_BYTES = socket.CMSG_SPACE(16)
_TIMESPEC = struct.Struct("qq")
#: Histogram bin edges, seconds: 1 us to 10 s, 24 bins a decade (10% apart); waits outside fall in the end bins.
BIN_EDGES_S = np.geomspace(1e-6, 10.0, 7 * 24 + 1)
#: Waits buffered before they are folded into the histogram.
FOLD_EVERY = 4096
#: Spells of sends held by the host link a meter keeps (:meth:`HostDelayMeter.sends_unblocked`): a PS that
#: answers each of sixteen workers one by one behind a slow link is held once a datagram, for seconds on end,
#: and a gradient may wait through all of it (24 bytes a spell).
BLOCKS_KEPT = 1 << 16


def enable_receive_timestamps(sock: socket.socket):
    """Have the kernel stamp each datagram or frame ``sock`` receives (``SO_TIMESTAMPNS``, wall clock)."""
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def kernel_timestamp_s(ancillary) -> float:
    """The receive timestamp (epoch seconds) in ``recvmsg``'s ancillary data, or 0.0 when it has none."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            return seconds + nanoseconds * 1e-9
    return 0.0


class _Series:
    """One streamed quantity: a histogram over ``BIN_EDGES_S`` plus count, sum and maximum."""

    __slots__ = ("buffer", "append", "histogram", "count", "total_s", "max_s")

    def __init__(self):
        self.buffer = array("d")
        self.append = self.buffer.append
        self.histogram = np.zeros(len(BIN_EDGES_S) + 1, dtype=np.int64)
        self.count = 0
        self.total_s = 0.0
        self.max_s = 0.0

    def fold(self):
        if not self.buffer:
            return
        values = np.frombuffer(self.buffer, dtype=np.float64)
        values = np.maximum(values, 0.0)          # a clock step back reads as no wait
        self.histogram += np.bincount(np.searchsorted(BIN_EDGES_S, values), minlength=len(self.histogram))
        self.count += len(values)
        self.total_s += float(values.sum())
        self.max_s = max(self.max_s, float(values.max()))
        del values
        del self.buffer[:]

    def summary(self) -> dict:
        self.fold()
        if not self.count:
            return {"count": 0, "mean_s": None, "p99_s": None, "max_s": None}
        return {"count": self.count, "mean_s": self.total_s / self.count, "p99_s": self.percentile_s(0.99),
                "max_s": self.max_s}

    def percentile_s(self, share: float) -> float:
        """The ``share`` percentile: the upper edge of its histogram bin (never below what was measured, at most
        10% above it), and never above the maximum."""
        rank = int(np.searchsorted(np.cumsum(self.histogram), share * self.count))
        return min(float(BIN_EDGES_S[min(rank, len(BIN_EDGES_S) - 1)]), self.max_s)


class HostDelayMeter:
    """A process's receive waits and send lateness (the module docstring), in wall seconds."""

    __slots__ = ("_receive", "_late", "_receive_append", "_late_append", "_blocked_starts_s", "_blocked_ends_s",
                 "_blocked_before_s", "_blocked_total_s")

    def __init__(self):
        self._receive, self._late = _Series(), _Series()
        self._receive_append, self._late_append = self._receive.append, self._late.append
        # the sends its host link held up, oldest first: start, end and the blocked seconds before each
        self._blocked_starts_s, self._blocked_ends_s, self._blocked_before_s = array("d"), array("d"), array("d")
        self._blocked_total_s = 0.0

    def sends_unblocked(self, blocked_since_s: float, now_epoch_s: float):
        """A send of the process, held from ``blocked_since_s`` until its host link's queue took it (a full send
        buffer), went out at ``now_epoch_s``: a packet that waited meanwhile waited for the link. The last
        ``BLOCKS_KEPT`` such spells are kept; a packet older than them counts the older ones as its own wait."""
        if len(self._blocked_ends_s) >= BLOCKS_KEPT:
            half = BLOCKS_KEPT // 2
            del self._blocked_starts_s[:half], self._blocked_ends_s[:half], self._blocked_before_s[:half]
        self._blocked_starts_s.append(blocked_since_s)
        self._blocked_ends_s.append(now_epoch_s)
        self._blocked_before_s.append(self._blocked_total_s)
        self._blocked_total_s += now_epoch_s - blocked_since_s

    def _blocked_since_s(self, kernel_ts_s: float) -> float:
        """The seconds the process's sends were held by its link after ``kernel_ts_s`` (one of them ended after it)."""
        i = bisect.bisect_right(self._blocked_ends_s, kernel_ts_s)
        return (self._blocked_total_s - self._blocked_before_s[i]
                - max(0.0, kernel_ts_s - self._blocked_starts_s[i]))

    def received(self, kernel_ts_s: float, now_epoch_s: float):
        """A packet stamped ``kernel_ts_s`` by the kernel handled at ``now_epoch_s`` (both epoch seconds), less
        the time the process's sends waited for its host link meanwhile (:meth:`sends_unblocked`); an
        unstamped packet (0.0) is not counted."""
        if kernel_ts_s:
            wait_s = now_epoch_s - kernel_ts_s
            if self._blocked_ends_s and kernel_ts_s < self._blocked_ends_s[-1]:
                wait_s -= self._blocked_since_s(kernel_ts_s)
            self._receive_append(wait_s)
            if len(self._receive.buffer) >= FOLD_EVERY:
                self._receive.fold()

    def received_for(self, kernel_ts_s: float, now_epoch_s: float, frames: int):
        """As :meth:`received`, for a packet that stands for ``frames`` packets read with it (a sample of a
        busy switch's batch): counted ``frames`` times, so that a busy spell weighs in the mean and the
        percentiles as much as its packets do."""
        if kernel_ts_s:
            wait_s = now_epoch_s - kernel_ts_s
            if self._blocked_ends_s and kernel_ts_s < self._blocked_ends_s[-1]:
                wait_s -= self._blocked_since_s(kernel_ts_s)
            self._receive.buffer.extend((wait_s,) * frames)
            if len(self._receive.buffer) >= FOLD_EVERY:
                self._receive.fold()

    def woke(self, due_s: float, now_s: float):
        """A timed wake-up due at ``due_s`` that ran at ``now_s`` (one clock, wall seconds)."""
        self._late_append(now_s - due_s)
        if len(self._late.buffer) >= FOLD_EVERY:
            self._late.fold()

    def summary(self) -> dict:
        """``{"receive_wait": {...}, "send_lateness": {...}}``, each count, ``mean_s``, ``p99_s``, ``max_s``."""
        return {"receive_wait": self._receive.summary(), "send_lateness": self._late.summary()}


def switch_wait_summary(cells) -> dict:
    """A switch's ``switch_wait`` register (``program.WAIT_*`` cells: packets, summed and longest wait in
    microseconds) as a meter's summary in wall seconds: its receive wait is the wait inside the switch, from
    the switch's receipt of a packet to its egress queue. The register keeps no histogram: ``p99_s`` is None.
    bmv2 reports its host delay this way; it has no kernel receive timestamps, so the wait before the switch
    read a packet (which pyswitch's own meter counts) is not in it."""
    packets, total_us, longest_us = (int(cell) for cell in cells[:3])
    receive = ({"count": packets, "mean_s": total_us * 1e-6 / packets, "p99_s": None, "max_s": longest_us * 1e-6}
               if packets else _Series().summary())
    return {"receive_wait": receive, "send_lateness": _Series().summary()}


def virtual_summary(summary: dict, factor: float) -> dict:
    """A meter's :meth:`HostDelayMeter.summary` in virtual seconds (time dilation ``factor``)."""
    return {kind: {key: value / factor if key.endswith("_s") and value is not None else value
                   for key, value in series.items()}
            for kind, series in summary.items()}


def by_role(processes: list, factor: float) -> dict:
    """``[(role, meter summary in wall seconds), ...]`` of a run's processes -> ``{role: merged summary}`` in
    virtual seconds (time dilation ``factor``; :func:`merge_role`)."""
    roles = {}
    for role, summary in processes:
        roles.setdefault(role, []).append(summary)
    return {role: virtual_summary(merge_role(summaries), factor) for role, summaries in sorted(roles.items())}


def merge_role(summaries: list) -> dict:
    """Several processes' summaries of one role as one: counts added, means weighted by count, the largest
    99th percentile and maximum (a role's tail is its slowest process's; a process that keeps no 99th
    percentile, a bmv2 switch, adds none)."""
    merged = {}
    for kind in ("receive_wait", "send_lateness"):
        series = [s[kind] for s in summaries if s.get(kind, {}).get("count")]
        count = sum(s["count"] for s in series)
        merged[kind] = {"count": count,
                        "mean_s": sum(s["mean_s"] * s["count"] for s in series) / count if count else None,
                        "p99_s": max((s["p99_s"] for s in series if s["p99_s"] is not None), default=None),
                        "max_s": max((s["max_s"] for s in series), default=None)}
    return merged
