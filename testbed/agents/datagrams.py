"""Datagrams in batches: what waits on an agent's endpoint, taken by one ``recvmmsg(2)`` per batch.

An agent that reads one datagram per ``recvmsg`` pays a system call, a bytes
object and a list of ancillary tuples per packet, and one more call that
finds the socket empty and raises. :class:`ReceiveBatch` takes up to
``BATCH_DATAGRAMS`` waiting datagrams in one call (Python's socket module has
no ``recvmmsg``, so it goes through ctypes) into buffers it keeps, allocated
and addressed once with numpy, and stops when a batch comes back short of
full. Per datagram it reads what it needs with ``struct`` straight from those
buffers: the lengths the kernel wrote into the message's header, the INA
header, the kernel receive timestamp and the TOS byte. An agent wakes for a
datagram or two at a time at the rates a run plans for, and numpy's fixed
cost per call is more than the datagrams' own there (measured: a batch
decoded with numpy cost a worker 90 µs a wake-up), so numpy stays out of the
per-call path.

The kernel writes a datagram's ancillary data in a fixed order (the
``SO_TIMESTAMPNS`` stamp, then ``IP_TOS``: ``udp_recvmsg``), which is read in
one ``struct`` call; a datagram whose ancillary data is laid out otherwise
(no stamp yet: the kernel turns stamping on a moment after the first socket
asks) is parsed cmsg by cmsg (:func:`parse_control`, counted in
``parsed_apart``).

How long each datagram waited for its process goes to the endpoint's
:class:`testbed.metrics.host_delay.HostDelayMeter` as it is handed over
(:meth:`ReceiveBatch.drain`), as :func:`testbed.agents.common.pending_datagrams`
does one at a time. Linux on 64-bit machines (the layouts above).
"""

import ctypes
import errno
import os
import socket
import struct
import time

import numpy as np

from testbed.agents.common import ECN_CE
from testbed.dataplane.wire import INA_HEADER, INA_HEADER_BYTES
from testbed.metrics.host_delay import SO_TIMESTAMPNS, TIMESTAMP_CMSG_BYTES

#: Datagrams one ``recvmmsg`` takes at most.
BATCH_DATAGRAMS = 64
#: Bytes a datagram may have (an INA frame of 256 lanes is 1,062; larger ones are cut and dropped).
DATAGRAM_BYTES = 4096
#: Ancillary space per datagram: its timestamp, then its TOS byte.
CONTROL_BYTES = TIMESTAMP_CMSG_BYTES + socket.CMSG_SPACE(1)
_CMSG_HEADER = struct.Struct("@Nii")        # struct cmsghdr: length (size_t), level, type
_TIMESPEC = struct.Struct("@qq")


class _MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", _MsgHdr), ("length", ctypes.c_uint)]


def _record_of(structure) -> list:
    """(name, numpy format, offset) of each field of a ctypes ``structure``, nested ones flattened."""
    fields = []
    for name, kind in structure._fields_:
        offset = getattr(structure, name).offset
        if isinstance(kind, type) and issubclass(kind, ctypes.Structure):
            fields += [(n, f, offset + o) for n, f, o in _record_of(kind)]
        else:
            fields.append((name, np.dtype(kind).str, offset))
    return fields


_MMSG_FIELDS = _record_of(_MMsgHdr)
#: ``struct mmsghdr`` as a numpy record (field offsets as the C library lays them out).
MMSGHDR_DTYPE = np.dtype({"names": [n for n, _, _ in _MMSG_FIELDS], "formats": [f for _, f, _ in _MMSG_FIELDS],
                          "offsets": [o for _, _, o in _MMSG_FIELDS], "itemsize": ctypes.sizeof(_MMsgHdr)})
_CONTROLLEN_OFFSET, _FLAGS_OFFSET, _LENGTH_OFFSET = (MMSGHDR_DTYPE.fields[name][1]
                                                     for name in ("controllen", "flags", "length"))
#: What the kernel writes back into a message's header: its ancillary length, flags and datagram length.
_RECEIVED = struct.Struct(f"=Q{_FLAGS_OFFSET - _CONTROLLEN_OFFSET - 8}xi{_LENGTH_OFFSET - _FLAGS_OFFSET - 4}xI")
#: A stamped datagram's ancillary data as the kernel lays it out: the stamp's cmsghdr and timespec, then the
#: TOS byte's cmsghdr and byte.
_STAMP_THEN_TOS = struct.Struct(f"@Niiqq{TIMESTAMP_CMSG_BYTES - _CMSG_HEADER.size - 16}xNiiB")
_SOCKADDR_IN = struct.Struct("!2xH4s")
#: ``MSG_TRUNC`` as a plain int: ``socket.MSG_TRUNC`` is an enum flag, and ``int & flag`` builds a flag member
#: (about 1 us a datagram on the receive path).
_MSG_TRUNC = int(socket.MSG_TRUNC)


def _libc_recvmmsg():
    libc = ctypes.CDLL(None, use_errno=True)
    recvmmsg = libc.recvmmsg
    recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    recvmmsg.restype = ctypes.c_int
    return recvmmsg


def parse_control(control: bytes) -> tuple:
    """(kernel timestamp in epoch seconds or 0.0, TOS byte or 0) from one datagram's ancillary data."""
    stamp_s, tos, offset = 0.0, 0, 0
    while offset + _CMSG_HEADER.size <= len(control):
        length, level, kind = _CMSG_HEADER.unpack_from(control, offset)
        if length < _CMSG_HEADER.size:
            break
        data = offset + _CMSG_HEADER.size
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and length >= _CMSG_HEADER.size + 16:
            seconds, nanoseconds = _TIMESPEC.unpack_from(control, data)
            stamp_s = seconds + nanoseconds * 1e-9
        elif level == socket.IPPROTO_IP and kind == socket.IP_TOS and length > _CMSG_HEADER.size:
            tos = control[data]
        offset += socket.CMSG_SPACE(length - _CMSG_HEADER.size)
    return stamp_s, tos


class ReceiveBatch:
    """What ``recvmmsg`` takes from ``sock`` (an :class:`testbed.agents.common.Endpoint`), in buffers reused
    from call to call: a datagram's bytes are valid until the batch takes the next ones."""

    def __init__(self, sock, capacity: int = BATCH_DATAGRAMS, datagram_bytes: int = DATAGRAM_BYTES):
        self.sock, self.capacity, self.datagram_bytes = sock, capacity, datagram_bytes
        self.meter = sock.host_delay
        self._recvmmsg = _libc_recvmmsg()
        self.data = np.zeros((capacity, datagram_bytes), dtype=np.uint8)
        control = np.zeros((capacity, CONTROL_BYTES), dtype=np.uint8)
        names = np.zeros((capacity, _SOCKADDR_IN.size), dtype=np.uint8)
        iovecs = np.zeros((capacity, 2), dtype=np.uintp)
        iovecs[:, 0] = self.data.ctypes.data + np.arange(capacity) * datagram_bytes
        iovecs[:, 1] = datagram_bytes
        messages = np.zeros(capacity, dtype=MMSGHDR_DTYPE)
        messages["name"] = names.ctypes.data + np.arange(capacity) * _SOCKADDR_IN.size
        messages["namelen"] = _SOCKADDR_IN.size
        messages["iov"] = iovecs.ctypes.data + np.arange(capacity) * iovecs.itemsize * 2
        messages["iovlen"] = 1
        messages["control"] = control.ctypes.data + np.arange(capacity) * CONTROL_BYTES
        messages["controllen"] = CONTROL_BYTES
        self._buffers = (control, names, iovecs, messages)          # kept alive: the kernel writes into them
        self._fresh = messages.tobytes()                             # what a message's header is before a call
        self._messages_address = messages.ctypes.data
        self._data, self._control = memoryview(self.data).cast("B"), memoryview(control).cast("B")
        self._messages, self._names = memoryview(messages.view(np.uint8)).cast("B"), memoryview(names).cast("B")
        self.count = 0
        self._lengths, self._tos = [0] * capacity, [0] * capacity
        #: Datagrams whose ancillary data was not laid out as usual (parsed by :func:`parse_control`).
        self.parsed_apart = 0

    def receive(self) -> int:
        """Take what waits on the socket now, up to the batch's capacity, without blocking; how many."""
        if self.count:     # the kernel wrote the lengths of the messages it filled: restore them
            ctypes.memmove(self._messages_address, self._fresh, self.count * MMSGHDR_DTYPE.itemsize)
        count = self._recvmmsg(self.sock.fileno(), self._messages_address, self.capacity, socket.MSG_DONTWAIT,
                               None)
        if count < 0:
            code = ctypes.get_errno()
            if code not in (errno.EAGAIN, errno.EINTR):
                raise OSError(code, os.strerror(code))
            count = 0
        self.count = count
        return count

    def drain(self, listening_since_s: float = 0.0):
        """(index, INA header tuple) of each datagram waiting on the socket, batch after batch until one
        finds fewer than the batch holds, skipping those too short for a header (or cut short). Each is
        handed over in turn: how long it waited since the kernel stamped it (from ``listening_since_s``
        at the earliest, as :func:`testbed.agents.common.pending_datagrams`) goes to the endpoint's meter
        then."""
        received, wall_s, header_of = self.meter.received, time.time, INA_HEADER.unpack_from
        lengths, marks = self._lengths, self._tos
        while True:
            count = self.receive()
            for i in range(count):
                control_bytes, flags, length = _RECEIVED.unpack_from(self._messages,
                                                                     i * MMSGHDR_DTYPE.itemsize + _CONTROLLEN_OFFSET)
                (_, stamp_level, stamp_type, seconds, nanoseconds, _, tos_level, tos_type,
                 tos) = _STAMP_THEN_TOS.unpack_from(self._control, i * CONTROL_BYTES)
                if (control_bytes == CONTROL_BYTES and stamp_level == socket.SOL_SOCKET
                        and stamp_type == SO_TIMESTAMPNS and tos_level == socket.IPPROTO_IP
                        and tos_type == socket.IP_TOS):
                    stamp_s = seconds + nanoseconds * 1e-9
                else:
                    self.parsed_apart += 1
                    stamp_s, tos = parse_control(bytes(self._control[i * CONTROL_BYTES:
                                                                     i * CONTROL_BYTES + control_bytes]))
                lengths[i], marks[i] = (0 if flags & _MSG_TRUNC else length), tos
                received(max(stamp_s, listening_since_s) if stamp_s else 0.0, wall_s())
                if lengths[i] >= INA_HEADER_BYTES:
                    yield i, header_of(self._data, i * self.datagram_bytes)
            if count < self.capacity:
                return

    def length(self, i: int) -> int:
        """Datagram ``i``'s bytes (0 for one cut short)."""
        return self._lengths[i]

    def ce(self, i: int) -> bool:
        """Whether a switch queue marked datagram ``i`` CE (its TOS byte's ECN field)."""
        return self._tos[i] & ECN_CE == ECN_CE

    def lanes(self, i: int, count: int) -> np.ndarray:
        """``count`` big-endian 32-bit lanes after datagram ``i``'s header (a view: copy what must outlive
        the batch)."""
        return self.data[i, INA_HEADER_BYTES:INA_HEADER_BYTES + 4 * count].view(">i4")

    def lane_bytes(self, i: int, count: int) -> memoryview:
        """The bytes of ``count`` lanes after datagram ``i``'s header, as they arrived (a view, valid until the
        batch takes the next datagrams)."""
        start = i * self.datagram_bytes + INA_HEADER_BYTES
        return self._data[start:start + 4 * count]

    def sender(self, i: int) -> tuple:
        """Datagram ``i``'s sender, (address, port) as ``recvmsg`` gives it."""
        port, address = _SOCKADDR_IN.unpack_from(self._names, i * _SOCKADDR_IN.size)
        return socket.inet_ntoa(address), port
