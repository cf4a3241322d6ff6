"""thrift_guard closes a Thrift port to other namespaces and to non-root users, and root on lo still gets in.

Root only (tests/support.py's require_emulation rule): a plain TCP listener on a free port in the root
namespace stands for bmv2's Thrift server. Each way in is first shown to work without the guard (so a
refusal under the guard is the guard's doing), then checked with it, then again after its removal. The
namespace, its veth pair and the guard table are removed at the end, whatever happens.
"""

import os
import secrets
import socket
import subprocess
import sys

import pytest
from support import require_emulation

from testbed.emulation import thrift_guard

CONNECT_TIMEOUT_S = 1.0
NOBODY = "65534"
#: Connects to argv[1]:argv[2] within argv[3] seconds; prints connected | refused | timeout | error N.
CLIENT = """
import socket, sys
s = socket.socket()
s.settimeout(float(sys.argv[3]))
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except socket.timeout:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as exc:
    print("error", exc.errno)
"""


def system_python():
    """The interpreter behind the venv (readable by nobody), run isolated (-I) without site (-S)."""
    return [os.path.realpath(sys.executable), "-I", "-S", "-c", CLIENT]


def client_argv(host, port, prefix=()):
    return [*prefix, *system_python(), host, str(port), str(CONNECT_TIMEOUT_S)]


def attempt(argv):
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd="/")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def root_on_lo(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=CONNECT_TIMEOUT_S):
            return "connected"
    except socket.timeout:
        return "timeout"
    except ConnectionRefusedError:
        return "refused"


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


@pytest.fixture
def other_namespace():
    """A network namespace joined to the root one by a veth pair: (netns name, root-side address)."""
    require_emulation("ip", "nft", "setpriv")
    tag = secrets.token_hex(3)
    netns, root_end, ns_end = f"inatbtg-{tag}", f"tg{tag}r", f"tg{tag}n"
    subnet = f"10.254.{secrets.randbelow(250) + 1}"
    try:
        _ip("netns", "add", netns)
        _ip("link", "add", root_end, "type", "veth", "peer", "name", ns_end)
        _ip("link", "set", ns_end, "netns", netns)
        _ip("addr", "add", f"{subnet}.1/30", "dev", root_end)
        _ip("link", "set", root_end, "up")
        _ip("-n", netns, "addr", "add", f"{subnet}.2/30", "dev", ns_end)
        _ip("-n", netns, "link", "set", ns_end, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        yield netns, f"{subnet}.1"
    finally:
        _ip("link", "del", root_end, check=False)
        _ip("netns", "del", netns, check=False)


@pytest.fixture
def listener():
    """A plain TCP listener on a free port of every root-namespace address (as bmv2's Thrift server)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", 0))
    sock.listen(16)
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_guard_admits_root_on_lo_only(other_namespace, listener):
    netns, root_addr = other_namespace
    port = listener
    from_namespace = client_argv(root_addr, port, ("ip", "netns", "exec", netns))
    as_nobody = client_argv("127.0.0.1", port, ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                                "--clear-groups"))
    assert attempt(from_namespace) == "connected"          # open without the guard ...
    assert attempt(as_nobody) == "connected"
    guard = thrift_guard.ThriftGuard(f"test-{secrets.token_hex(3)}", [port])
    try:
        guard.install()
        assert thrift_guard.is_installed(guard.run_id)
        assert attempt(from_namespace) == "timeout"        # ... dropped from another namespace
        assert attempt(as_nobody) == "refused"             # ... reset for a non-root user on lo
        assert root_on_lo(port) == "connected"             # ... root on lo still gets in
    finally:
        guard.remove()
    assert not thrift_guard.is_installed(guard.run_id)
    assert attempt(from_namespace) == "connected"          # removal reopens it
