"""Match-action tables of the INA program (exact and lpm), keyed by packed bytes.

Keys are stored as the bytes the packet carries (IPv4 addresses as 4 bytes,
16-bit fields as 2 bytes) so the fast path looks an entry up with a slice of
the frame, no conversion. Action data is a tuple prepared once at install time.
"""

import socket
import struct

from testbed.dataplane import program
from testbed.dataplane.entries import encode_value
from testbed.errors import DataplaneError


class Table:
    """One table: exact keys in a dict; lpm keys in one dict per prefix length."""

    def __init__(self, decl: program.Table):
        self.decl = decl
        self.is_lpm = any(k.match == "lpm" for k in decl.keys)
        self.exact = {}
        self.lpm = {}           # prefix_len -> {masked int: action tuple}
        self.prefix_lens = []   # longest first
        self.default = (decl.default_action, ())

    def add(self, match, action: str, params: tuple):
        entry = (action, params)
        if self.is_lpm:
            (value,) = match
            addr, _, plen = str(value).partition("/")
            plen = int(plen or 32)
            key = struct.unpack("!I", socket.inet_aton(addr))[0] & _mask(plen)
            if key in self.lpm.get(plen, {}):
                raise DataplaneError(f"table {self.decl.name}: duplicate entry for {list(match)}")
            self.lpm.setdefault(plen, {})[key] = entry
            self.prefix_lens = sorted(self.lpm, reverse=True)
            if plen == 32:
                self.exact[socket.inet_aton(addr)] = entry  # /32 fast path
        else:
            key = b"".join(encode_value(k.kind, k.bits, v) for k, v in zip(self.decl.keys, match))
            if key in self.exact:
                raise DataplaneError(f"table {self.decl.name}: duplicate entry for {list(match)}")
            self.exact[key] = entry
        return len(self.exact) if not self.is_lpm else sum(len(v) for v in self.lpm.values())

    def clear(self):
        self.exact.clear()
        self.lpm.clear()
        self.prefix_lens = []

    def lookup(self, key: bytes):
        """Exact lookup (or /32 fast path for lpm); then longest prefix."""
        entry = self.exact.get(key)
        if entry is not None or not self.is_lpm:
            return entry if entry is not None else self.default
        value = int.from_bytes(key, "big")
        for plen in self.prefix_lens:
            entry = self.lpm[plen].get(value & _mask(plen))
            if entry is not None:
                return entry
        return self.default


def _mask(plen: int) -> int:
    return (0xFFFFFFFF << (32 - plen)) & 0xFFFFFFFF if plen else 0
