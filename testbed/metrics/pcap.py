"""Packet capture of one interface into a pcap file (a scenario's ``metrics.pcap``).

Two halves, kept apart so the file format is tested without root:

* :class:`PcapWriter` writes the classic libpcap format (microsecond timestamps, link type Ethernet) that
  tcpdump, tshark, Wireshark and scapy's ``rdpcap`` read, and stops at a size cap: it writes a record only
  while the file stays within ``max_bytes`` (global header and record headers counted), and keeps at most
  ``snap_bytes`` of each frame (the record says the frame's real length).
* The capture agent (``python -m testbed.metrics.pcap --iface IFACE --out FILE.pcap``), started in the
  namespace the interface lives in (a host's own interface in the host's, a switch port in the root
  namespace) by :mod:`testbed.emulation.launch`. One ``AF_PACKET`` raw socket (``ETH_P_ALL``) bound to the
  interface sees the frames it receives and sends, as libpcap does, each stamped by the kernel
  (``SO_TIMESTAMPNS``). The global header is written and flushed as soon as the socket is bound, so the
  caller polls the file's size for readiness. Records are flushed at least every ``FLUSH_INTERVAL_S``; on
  SIGTERM/SIGINT the file is flushed and closed whole. When the cap is reached the agent closes the file and
  exits. Its last log line says how many frames it wrote, how many the cap refused and how many the kernel
  dropped (its receive buffer was full: the capture could not keep up).

The default snap length keeps a whole INA frame with the most lanes the wire allows
(:data:`PCAP_SNAP_BYTES`), so every INA packet dissects in full, lanes included; longer frames (background
TCP) are cut to their headers and first bytes.
"""

from __future__ import annotations

import argparse
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.dataplane import wire

PCAP_MAGIC_MICROSECONDS = 0xA1B2C3D4
PCAP_VERSION = (2, 4)
LINKTYPE_ETHERNET = 1
PCAP_GLOBAL_HEADER = struct.Struct("<IHHiIII")    # magic, version, tz offset, sigfigs, snaplen, link type
PCAP_RECORD_HEADER = struct.Struct("<IIII")       # seconds, microseconds, captured length, original length
#: Bytes kept of each frame: a whole INA frame of the most lanes the wire carries (1100 bytes).
PCAP_SNAP_BYTES = wire.ina_frame_bytes(wire.MAX_LANES)
#: How often at most buffered records reach the file (seconds).
FLUSH_INTERVAL_S = 1.0
#: How long one wait for a frame lasts before the agent looks at its stop flag (seconds).
RECEIVE_TIMEOUT_S = 0.2
#: The capture socket's receive buffer (bytes): bursts wait here while the agent writes.
RECEIVE_BUFFER_BYTES = 8 << 20
ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
TPACKET_STATS = struct.Struct("II")                # packets, drops (reset by each read)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
TIMESPEC = struct.Struct("qq")


def interface_node(interface: str) -> str:
    """The node an interface ``<node>-eth<N>`` belongs to (node names hold no '-')."""
    return interface.rsplit("-eth", 1)[0]


def pcap_global_header(snap_bytes: int) -> bytes:
    return PCAP_GLOBAL_HEADER.pack(PCAP_MAGIC_MICROSECONDS, *PCAP_VERSION, 0, 0, snap_bytes, LINKTYPE_ETHERNET)


def pcap_record(time_ns: int, frame: bytes, original_bytes: int) -> bytes:
    """One record: ``frame`` (already cut to the snap length) seen at ``time_ns`` (epoch), ``original_bytes``
    long on the wire."""
    seconds, rest_ns = divmod(time_ns, 10**9)
    return PCAP_RECORD_HEADER.pack(seconds, rest_ns // 1000, len(frame), original_bytes) + bytes(frame)


@dataclass
class CaptureCounts:
    written: int = 0       # frames in the file
    refused: int = 0       # frames the size cap left out (the agent stops at the first)
    dropped: int = 0       # frames the kernel dropped (the agent fell behind)


class PcapWriter:
    """A pcap file of at most ``max_bytes`` bytes whose records keep at most ``snap_bytes`` of each frame."""

    def __init__(self, stream, snap_bytes: int, max_bytes: int):
        self.stream = stream
        self.snap_bytes = snap_bytes
        self.max_bytes = max_bytes
        self.counts = CaptureCounts()
        header = pcap_global_header(snap_bytes)
        self.stream.write(header)
        self.size_bytes = len(header)

    def write(self, time_ns: int, frame, original_bytes: int) -> bool:
        """Append one frame; False (nothing written) when it would take the file past its cap."""
        kept = bytes(frame[:self.snap_bytes])
        record_bytes = PCAP_RECORD_HEADER.size + len(kept)
        if self.size_bytes + record_bytes > self.max_bytes:
            self.counts.refused += 1
            return False
        self.stream.write(pcap_record(time_ns, kept, original_bytes))
        self.size_bytes += record_bytes
        self.counts.written += 1
        return True


def _kernel_time_ns(ancillary) -> int:
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            seconds, nanoseconds = TIMESPEC.unpack(data[:TIMESPEC.size])
            return seconds * 10**9 + nanoseconds
    return time.time_ns()


def capture(interface: str, out: Path, snap_bytes: int, max_bytes: int, stop) -> CaptureCounts:
    """Write the frames ``interface`` sends and receives to ``out`` until ``stop()`` or the cap."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((interface, 0))
        sock.settimeout(RECEIVE_TIMEOUT_S)
        buffer = bytearray(snap_bytes)
        ancillary_bytes = socket.CMSG_SPACE(TIMESPEC.size)
        with open(out, "wb") as stream:
            writer = PcapWriter(stream, snap_bytes, max_bytes)
            stream.flush()                                     # the header: the caller's sign of readiness
            flushed_at = time.monotonic()
            while not stop():
                try:
                    # MSG_TRUNC: the frame's real length, though only snap_bytes are copied
                    length, ancillary, _, _ = sock.recvmsg_into([buffer], ancillary_bytes, socket.MSG_TRUNC)
                except socket.timeout:
                    length = None
                except InterruptedError:
                    continue
                if length is not None and not writer.write(_kernel_time_ns(ancillary),
                                                           memoryview(buffer)[:min(length, snap_bytes)], length):
                    break                                      # the cap: the file is complete
                if time.monotonic() - flushed_at >= FLUSH_INTERVAL_S:
                    stream.flush()
                    flushed_at = time.monotonic()
        counts = writer.counts
        counts.dropped = TPACKET_STATS.unpack(sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, TPACKET_STATS.size))[1]
        return counts
    finally:
        sock.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Capture one interface's frames into a pcap file.")
    parser.add_argument("--iface", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--snap-bytes", type=int, default=PCAP_SNAP_BYTES)
    parser.add_argument("--max-bytes", type=int, required=True)
    args = parser.parse_args(argv)
    stopping = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.append(True))
    try:
        counts = capture(args.iface, args.out, args.snap_bytes, args.max_bytes, lambda: bool(stopping))
    except OSError as exc:
        print(f"pcap capture on {args.iface}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    cap = f", stopped at its cap of {args.max_bytes} B" if counts.refused else ""
    print(f"pcap capture on {args.iface}: {counts.written} frames written to {args.out}{cap}, "
          f"{counts.dropped} dropped by the kernel", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
