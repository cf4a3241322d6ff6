"""BPF maps from Python: the ``bpf(2)`` calls the ebpf target's runtime needs, on maps pinned in bpffs.

A :class:`PinnedMap` opens a pinned map (``BPF_OBJ_GET``), reads its key and value sizes
(``BPF_OBJ_GET_INFO_BY_FD``), and looks up, updates, deletes and lists entries as bytes; the runtime packs
and unpacks them (testbed/dataplane/ebpf/runtime.py). Values of maps whose value holds a
``bpf_spin_lock`` are read and written with ``BPF_F_LOCK`` (the kernel takes the lock). Root only.
"""

import ctypes
import errno
import os
import platform

from testbed.errors import DataplaneError

#: bpf(2)'s syscall number per architecture
_SYS_BPF = {"x86_64": 321, "aarch64": 280}
BPF_MAP_LOOKUP_ELEM, BPF_MAP_UPDATE_ELEM, BPF_MAP_DELETE_ELEM, BPF_MAP_GET_NEXT_KEY = 1, 2, 3, 4
BPF_OBJ_GET, BPF_OBJ_GET_INFO_BY_FD = 7, 15
BPF_MAP_UPDATE_BATCH = 26
BPF_MAP_TYPE_ARRAY = 2
BPF_ANY = 0
BPF_F_LOCK = 4
_ATTR_BYTES = 128       # union bpf_attr, zero-padded beyond what a command uses


class _MapInfo(ctypes.Structure):
    """struct bpf_map_info, its first fields"""
    _fields_ = [("type", ctypes.c_uint32), ("id", ctypes.c_uint32), ("key_size", ctypes.c_uint32),
                ("value_size", ctypes.c_uint32), ("max_entries", ctypes.c_uint32), ("map_flags", ctypes.c_uint32),
                ("name", ctypes.c_char * 16), ("rest", ctypes.c_uint8 * 96)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: bytes) -> int:
    number = _SYS_BPF.get(platform.machine())
    if number is None:
        raise DataplaneError(f"the ebpf target does not know bpf(2) on {platform.machine()}")
    buf = ctypes.create_string_buffer(attr.ljust(_ATTR_BYTES, b"\0"), _ATTR_BYTES)
    result = _libc().syscall(number, cmd, buf, _ATTR_BYTES)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _u64(value) -> bytes:
    return int(value).to_bytes(8, "little")


def _u32(value) -> bytes:
    return int(value).to_bytes(4, "little")


class PinnedMap:
    """A map pinned at ``path``: entries as bytes of its key and value sizes."""

    def __init__(self, path: str, locked: bool = False):
        self.path = str(path)
        self.locked = locked
        name = ctypes.create_string_buffer(self.path.encode())
        try:
            self.fd = _bpf(BPF_OBJ_GET, _u64(ctypes.addressof(name)) + _u32(0) + _u32(0))
        except OSError as exc:
            raise DataplaneError(f"cannot open the BPF map {self.path}: {exc.strerror}") from None
        info = _MapInfo()
        attr = _u32(self.fd) + _u32(ctypes.sizeof(info)) + _u64(ctypes.addressof(info))
        try:
            _bpf(BPF_OBJ_GET_INFO_BY_FD, attr)
        except OSError as exc:
            self.close()
            raise DataplaneError(f"cannot read the BPF map {self.path}: {exc.strerror}") from None
        self.key_size, self.value_size, self.max_entries = info.key_size, info.value_size, info.max_entries
        self.type = info.type

    def _attr(self, key: bytes, value_buf, flags: int):
        key_buf = ctypes.create_string_buffer(key, self.key_size)
        attr = _u32(self.fd) + _u32(0) + _u64(ctypes.addressof(key_buf)) + _u64(ctypes.addressof(value_buf)) + \
            _u64(flags)
        return attr, key_buf

    def lookup(self, key: bytes):
        """The value of ``key``, or None where there is none."""
        value = ctypes.create_string_buffer(self.value_size)
        attr, _keep = self._attr(key, value, BPF_F_LOCK if self.locked else 0)
        try:
            _bpf(BPF_MAP_LOOKUP_ELEM, attr)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise DataplaneError(f"reading {self.path}: {exc.strerror}") from None
        return value.raw

    def update(self, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
        """Write ``value`` at ``key``; ``flags`` BPF_NOEXIST refuses an existing key (EEXIST)."""
        if len(value) != self.value_size:
            raise DataplaneError(f"{self.path}: a value of {len(value)} bytes, the map's are {self.value_size}")
        buf = ctypes.create_string_buffer(value, self.value_size)
        attr, _keep = self._attr(key, buf, flags | (BPF_F_LOCK if self.locked else 0))
        try:
            _bpf(BPF_MAP_UPDATE_ELEM, attr)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                raise DataplaneError(f"writing {self.path}: the key exists already") from None
            raise DataplaneError(f"writing {self.path}: {exc.strerror}") from None

    def delete(self, key: bytes) -> None:
        key_buf = ctypes.create_string_buffer(key, self.key_size)
        try:
            _bpf(BPF_MAP_DELETE_ELEM, _u32(self.fd) + _u32(0) + _u64(ctypes.addressof(key_buf)))
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise DataplaneError(f"deleting from {self.path}: {exc.strerror}") from None

    def keys(self) -> list:
        out, key = [], None
        while True:
            next_buf = ctypes.create_string_buffer(self.key_size)
            key_buf = ctypes.create_string_buffer(key or b"", self.key_size) if key is not None else None
            attr = _u32(self.fd) + _u32(0) + _u64(ctypes.addressof(key_buf) if key_buf else 0) + \
                _u64(ctypes.addressof(next_buf))
            try:
                _bpf(BPF_MAP_GET_NEXT_KEY, attr)
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    return out
                raise DataplaneError(f"listing {self.path}: {exc.strerror}") from None
            key = next_buf.raw
            out.append(key)

    def clear(self) -> None:
        """Every entry gone: an array's values zeroed (one batch update), a hash's or trie's keys deleted."""
        if self.type != BPF_MAP_TYPE_ARRAY:
            for key in self.keys():
                self.delete(key)
            return
        count = self.max_entries
        keys = (ctypes.c_uint32 * count)(*range(count))
        values = ctypes.create_string_buffer(self.value_size * count)
        attr = _u64(0) + _u64(0) + _u64(ctypes.addressof(keys)) + _u64(ctypes.addressof(values)) + \
            _u32(count) + _u32(self.fd) + _u64(BPF_F_LOCK if self.locked else 0) + _u64(0)
        try:
            _bpf(BPF_MAP_UPDATE_BATCH, attr)
        except OSError as exc:
            raise DataplaneError(f"clearing {self.path}: {exc.strerror}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
