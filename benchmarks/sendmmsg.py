"""Sending many frames per system call: ``sendmmsg`` through ctypes (Python's socket module has none), for the
benchmarks whose sender must outpace what it measures (bench_veth_send.py, bench_pyswitch.py's ebpf target)."""

import ctypes
import os


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


class MsgHdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.POINTER(IoVec)),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class MMsgHdr(ctypes.Structure):
    _fields_ = [("hdr", MsgHdr), ("length", ctypes.c_uint)]


class FrameBatch:
    """``frames`` held in ctypes buffers (``buffers[i]``, writable in place between sends) and sent, a slice
    at a time, by one ``sendmmsg`` on a connected or packet socket."""

    def __init__(self, frames):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.buffers = [ctypes.create_string_buffer(bytes(f), len(f)) for f in frames]
        self.vectors = (IoVec * len(frames))(*[IoVec(ctypes.addressof(b), len(b)) for b in self.buffers])
        self.messages = (MMsgHdr * len(frames))()
        for i in range(len(frames)):
            self.messages[i].hdr.iov = ctypes.pointer(self.vectors[i])
            self.messages[i].hdr.iovlen = 1
        self.size = ctypes.sizeof(MMsgHdr)

    def send(self, fd: int, first: int, count: int) -> int:
        """Send frames ``first`` .. ``first + count - 1``; how many left (an OSError if none could)."""
        done = self.libc.sendmmsg(fd, ctypes.byref(self.messages, first * self.size), count, 0)
        if done < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return done
