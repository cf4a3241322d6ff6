"""The pyswitch process: one or several switches, bound to their Mininet interfaces.

``python -m testbed.dataplane.pyswitch.process --name s1 --control /path/s1.sock
--port 1=s1-eth1 ...`` runs one switch; ``--switch s1=/path/s1.sock --switch
s2=/path/s2.sock --port s1:1=s1-eth1 --port s2:1=s2-eth1 ...`` runs several
(:class:`SwitchProcess` says why one would).

One thread, one epoll loop: raw AF_PACKET sockets (outgoing copies ignored
with PACKET_IGNORE_OUTGOING) feed each switch's :class:`PySwitchCore`; each
switch's Unix control socket (mode 0600, owner only, whatever the umask: the verbs rewrite the
switch) takes one JSON request per line (the SwitchRuntime verbs) and
answers one JSON line. Every line gets a reply and none can end the process: a
malformed request (not JSON, not an object, nested too deep, NaN, an unknown
verb, wrong arguments, a line over MAX_REQUEST_BYTES) is an error reply, and
so is any exception a verb raises (:func:`handle_request`). The loop's
timeout is the next departure of a shaped egress queue, so shaping costs
nothing when idle. SIGTERM/SIGINT end the loop at once (the signal's wake-up
byte, ``signal.set_wakeup_fd``, wakes the poll, which would otherwise resume
its wait after the handler: PEP 475); each
switch's final counters are printed as one JSON line on stdout for the run's log.
"""

import argparse
import errno
import json
import math
import os
import select
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass

from testbed.dataplane.pyswitch.core import PySwitchCore
from testbed.errors import DataplaneError
from testbed.metrics.host_delay import (TIMESTAMP_CMSG_BYTES, HostDelayMeter, enable_receive_timestamps,
                                        kernel_timestamp_s)

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
RECV_BATCH = 128
#: How long the loop waits for a frame, a control request or a signal when no shaped queue has a departure due.
IDLE_POLL_S = 1.0
#: The first frame a wake-up finds on a port, and one frame in this many after it, is read with its kernel
#: receive timestamp for the host-delay meter: a process that keeps up measures nearly every frame, a busy one a
#: systematic sample (reading the timestamp costs ~2 us a frame, a fifth of a forwarded frame's whole cost). A
#: sampled frame counts for the frames it stands for: counted once each, a busy process's long waits weighed as
#: an eighth of its packets, and the mean read a run whose switches waited 3.4 ms a packet as 0.6 ms.
TIMESTAMP_SAMPLE_EVERY = 8
#: Longest control request line; the runtime's largest (a table entry) is well under 4 kB.
MAX_REQUEST_BYTES = 1 << 20
#: Longest error text in a reply (an exception may quote the whole request).
MAX_ERROR_CHARS = 500
#: A client that does not read its replies for this long is dropped rather than blocking the switch.
REPLY_TIMEOUT_S = 2.0
#: The control socket's mode: owner (root) only.
CONTROL_SOCKET_MODE = 0o600


#: The control socket's verbs and the JSON type of each argument (the SwitchRuntime signatures):
#: "int" (not bool), "number" (a finite int or float), "str", "list". Checked before a verb runs,
#: so a wrong type is an error reply rather than a value that fails later on the packet path.
VERB_ARGUMENTS = {
    "ping": {},
    "stats": {},
    "table_add": {"table": "str", "action": "str", "match": "list", "params": "list"},
    "table_clear": {"table": "str"},
    "register_read": {"name": "str", "index": "int"},
    "register_write": {"name": "str", "index": "int", "value": "int"},
    "register_reset": {"name": "str"},
    "register_read_all": {"name": "str"},
    "counter_read": {"name": "str", "index": "int"},
    "counter_reset": {"name": "str"},
    "mc_group_create": {"group_id": "int", "ports": "list"},
    "mirroring_add": {"session_id": "int", "port": "int"},
    "meter_set_rates": {"name": "str", "index": "int", "rate_per_s": "number", "burst": "number"},
    "set_port_shaping": {"port": "int", "rate_bps": "number", "depth_pkts": "int"},
    "set_port_impairment": {"port": "int", "drop": "number", "duplicate": "number", "reorder": "number",
                            "seed": "int"},
}
#: The verbs the process answers itself, for any switch it runs (:meth:`SwitchProcess.process_verbs`).
PROCESS_VERB_ARGUMENTS = {"host_delay": {}}


def _is_kind(value, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return isinstance(value, {"str": str, "list": list}[kind])


def argument_problem(request: dict):
    """What is wrong with a known verb's arguments (missing, unexpected, wrong type), or None."""
    op = request["op"]
    expected = VERB_ARGUMENTS.get(op, PROCESS_VERB_ARGUMENTS.get(op))
    if expected is None:
        return None   # unknown verbs are the core's to refuse (it lists what it has)
    given = {k: v for k, v in request.items() if k != "op"}
    missing = sorted(set(expected) - set(given))
    extra = sorted(set(given) - set(expected))
    if missing or extra:
        return (f"{op}: expected arguments {', '.join(sorted(expected)) or '(none)'}"
                f"{'; missing ' + ', '.join(missing) if missing else ''}"
                f"{'; unexpected ' + ', '.join(extra) if extra else ''}")
    wrong = [f"{k} must be {'a finite number' if kind == 'number' else 'an integer' if kind == 'int' else 'a ' + kind}"
             for k, kind in expected.items() if not _is_kind(given[k], kind)]
    return f"{op}: {'; '.join(wrong)}" if wrong else None


def _reject_constant(name):
    raise ValueError(f"{name} is not a number the switch accepts")


def _error(text: str) -> dict:
    text = " ".join(str(text).split())
    return {"ok": False, "error": text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS - 3] + "..."}


def handle_request(core, line: bytes, process_verbs: dict = None) -> dict:
    """One control request line -> its reply ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``.

    ``process_verbs``: verbs the process answers itself rather than the switch's core (``host_delay``: the
    process's :class:`HostDelayMeter` summary), each a callable of no argument.

    Never raises (a control request must not end the switch): parse errors,
    a request that is not a JSON object with a string ``op``, DataplaneError
    and any other exception of a verb all become error replies.
    """
    if len(line) > MAX_REQUEST_BYTES:
        return _error(f"bad request: longer than {MAX_REQUEST_BYTES} bytes")
    try:
        request = json.loads(line, parse_constant=_reject_constant)
    except RecursionError:
        return _error("bad request: nested too deeply")
    except ValueError as exc:   # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        return _error(f"bad request: not JSON ({exc})")
    if not isinstance(request, dict) or not isinstance(request.get("op"), str):
        return _error('bad request: expected a JSON object {"op": VERB, ...}')
    problem = argument_problem(request)
    if problem:
        return _error(f"bad request: {problem}")
    try:
        if process_verbs and request["op"] in process_verbs:
            return {"ok": True, "result": process_verbs[request["op"]]()}
        return {"ok": True, "result": core.control(request)}
    except DataplaneError as exc:
        return _error(exc)
    except (ValueError, KeyError) as exc:
        return _error(f"bad request: {exc}")
    except Exception as exc:  # noqa: BLE001 - any verb failure is the client's problem, not the switch's
        return _error(f"{request['op']}: {type(exc).__name__}: {exc}")


def encode_reply(reply: dict) -> bytes:
    """``reply`` as one JSON line; a result that cannot be encoded becomes an error reply."""
    try:
        return json.dumps(reply).encode() + b"\n"
    except (TypeError, ValueError, RecursionError) as exc:
        return json.dumps(_error(f"reply not encodable: {exc}")).encode() + b"\n"


def open_port_socket(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # kernels < 4.20: outgoing copies are filtered in the loop instead
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    enable_receive_timestamps(sock)
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


def bind_private_unix_socket(path: str) -> socket.socket:
    """A Unix stream socket bound at ``path``, mode 0600 whatever the umask: only root (its owner) may
    connect; the control verbs rewrite the switch. The umask is narrowed around ``bind`` (this process
    is single-threaded then) so the socket never exists with a wider mode, and the mode is set
    explicitly afterwards too."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    saved_umask = os.umask(0o177)
    try:
        sock.bind(path)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(saved_umask)
    os.chmod(path, CONTROL_SOCKET_MODE)
    return sock


class _Client:
    """A control connection: its socket, the switch it controls, the bytes of an unfinished line, and
    whether an over-long line is being skipped (it was answered once, when it passed MAX_REQUEST_BYTES)."""

    def __init__(self, conn: socket.socket, switch):
        self.conn = conn
        self.switch = switch
        self.buffer = bytearray()
        self.skipping = False


@dataclass(frozen=True)
class SwitchSpec:
    """One switch a process runs: its name, its ports (number -> interface name) and its control socket."""
    name: str
    ports: dict
    control_path: str


class HostedSwitch:
    """A switch inside a process: its model (:class:`PySwitchCore`), a packet socket per port, its control
    listener. Its frames leave through :meth:`send`; a frame toward a port with no socket is dropped."""

    def __init__(self, spec: SwitchSpec, lanes: int, slots: int):
        self.name = spec.name
        self.core = PySwitchCore(spec.name, lanes, slots)
        self.control_path = spec.control_path
        self.send_errors = 0
        self.port_socks = {}
        self.listener = None
        try:
            for port, ifname in spec.ports.items():
                self.port_socks[port] = open_port_socket(ifname)
            if os.path.exists(spec.control_path):
                os.unlink(spec.control_path)
            self.listener = bind_private_unix_socket(spec.control_path)
        except BaseException:
            self.close()
            raise
        self.listener.listen(8)
        self.listener.setblocking(False)

    def send(self, port: int, buf):
        sock = self.port_socks.get(port)
        if sock is None:
            return
        try:
            sock.send(buf)
        except OSError as exc:
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.ENXIO):
                raise
            self.send_errors += 1

    def final_stats(self) -> dict:
        stats = self.core.control({"op": "stats"})
        stats["send_errors"] = self.send_errors
        return stats

    def close(self):
        for sock in self.port_socks.values():
            sock.close()
        if self.listener is not None:
            self.listener.close()
            try:
                os.unlink(self.control_path)
            except OSError:
                pass


class SwitchProcess:
    """Several switches in one process, one epoll loop over all their ports and control sockets.

    A frame one switch sends toward another switch of the same process still
    crosses the veth between them (the link's interface counters and the
    kernel's queue see it as before), but the receiving switch's process is
    the sender itself: it finds the frame at its next poll instead of being
    woken (often on the other core) for it. Under time dilation, where a
    process sleeps between packets, that wake-up is a third of what a packet
    costs a switch (docs/guide/time-dilation.md: switch processes).
    """

    def __init__(self, switches: list, lanes: int, slots: int):
        self.running = True
        #: How long frames waited for this process, and how late its shaped queues' departures left
        #: (testbed/metrics/host_delay.py); the ``host_delay`` control verb reads it.
        self.host_delay = HostDelayMeter()
        self.switches = []
        self.fd_port = {}       # port socket fd -> (its switch's receive, its switch's send, port, socket)
        self.listeners = {}     # listener fd -> switch
        self.clients = {}       # fd -> _Client
        self.epoll = select.epoll()
        self.wakeup_fd = self._wakeup_write_fd = None    # the signals' wake-up pipe (:meth:`stop_on`)
        try:
            for spec in switches:
                switch = HostedSwitch(spec, lanes, slots)
                self.switches.append(switch)
                for port, sock in switch.port_socks.items():
                    self.fd_port[sock.fileno()] = (switch.core.receive, switch.send, port, sock)
                    self.epoll.register(sock.fileno(), select.EPOLLIN)
                self.listeners[switch.listener.fileno()] = switch
                self.epoll.register(switch.listener.fileno(), select.EPOLLIN)
        except BaseException:
            self.close()
            raise

    def stop_on(self, *signums):
        """End :meth:`serve` when one of ``signums`` arrives: its handler clears ``running`` and the signal's
        wake-up byte (``signal.set_wakeup_fd``, on a pipe the loop polls) ends the wait it arrived in."""
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wakeup_fd, self._wakeup_write_fd = read_fd, write_fd
        self.epoll.register(read_fd, select.EPOLLIN)
        signal.set_wakeup_fd(write_fd)

        def stop(signum, frame):
            self.running = False

        for signum in signums:
            signal.signal(signum, stop)

    def serve(self):
        fd_port, listeners = self.fd_port, self.listeners
        egresses = [(switch.core.egress, switch.send) for switch in self.switches]
        monotonic, wall_s = time.monotonic, time.time
        received, woke = self.host_delay.received_for, self.host_delay.woke
        next_departure = float("inf")
        frames = 0
        while self.running:
            if next_departure != float("inf") and (now := monotonic()) >= next_departure:
                woke(next_departure, now)
            next_departure = float("inf")
            for egress, send in egresses:
                if egress.queues:
                    next_departure = min(next_departure, egress.drain(monotonic(), send))
            timeout = IDLE_POLL_S if next_departure == float("inf") else max(0.0, next_departure - monotonic())
            try:
                events = self.epoll.poll(timeout)
            except InterruptedError:
                continue
            now = monotonic()
            for fd, _ in events:
                entry = fd_port.get(fd)
                if entry is not None:
                    receive, send, port, sock = entry
                    recv, recvmsg = sock.recv, sock.recvmsg
                    for k in range(RECV_BATCH):
                        frames += 1
                        try:
                            if k and frames % TIMESTAMP_SAMPLE_EVERY:
                                data = recv(2048)
                            else:
                                data, ancillary, _, _ = recvmsg(2048, TIMESTAMP_CMSG_BYTES)
                                received(kernel_timestamp_s(ancillary), wall_s(), TIMESTAMP_SAMPLE_EVERY if k else 1)
                        except BlockingIOError:
                            break
                        receive(bytearray(data), port, now, send)
                elif fd in listeners:
                    self._accept(listeners[fd])
                elif fd == self.wakeup_fd:
                    os.read(fd, 64)         # a signal's byte: its handler said whether to go on
                else:
                    self._control(fd)

    @property
    def process_verbs(self) -> dict:
        """The control verbs this process answers for every switch it runs (:func:`handle_request`)."""
        return {"host_delay": self.host_delay.summary}

    def _accept(self, switch: HostedSwitch):
        try:
            conn, _ = switch.listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self.clients[conn.fileno()] = _Client(conn, switch)
        self.epoll.register(conn.fileno(), select.EPOLLIN)

    def _control(self, fd):
        client = self.clients[fd]
        try:
            data = client.conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop_client(fd)
            return
        if client.skipping:   # the rest of an over-long line, already answered
            if b"\n" not in data:
                return
            data = data.partition(b"\n")[2]
            client.skipping = False
        buffer = client.buffer
        buffer.extend(data)
        while b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            buffer[:] = rest
            if not self._reply(fd, handle_request(client.switch.core, line, self.process_verbs)):
                return
        if len(buffer) > MAX_REQUEST_BYTES:   # no newline in sight: answer now, skip to the next newline
            buffer.clear()
            client.skipping = True
            self._reply(fd, _error(f"bad request: longer than {MAX_REQUEST_BYTES} bytes"))

    def _reply(self, fd, reply: dict) -> bool:
        """Send one reply line; a client that will not take it within REPLY_TIMEOUT_S is dropped (False)."""
        conn = self.clients[fd].conn
        try:
            conn.settimeout(REPLY_TIMEOUT_S)
            conn.sendall(encode_reply(reply))
            conn.setblocking(False)
            return True
        except OSError:
            self._drop_client(fd)
            return False

    def _drop_client(self, fd):
        conn = self.clients.pop(fd).conn
        try:
            self.epoll.unregister(fd)
        except OSError:
            pass
        conn.close()

    def close(self):
        close_at_once([sock for switch in self.switches for sock in switch.port_socks.values()])
        for switch in self.switches:
            switch.close()
        for client in self.clients.values():
            client.conn.close()
        self.epoll.close()
        if self.wakeup_fd is not None:
            signal.set_wakeup_fd(-1)
            os.close(self.wakeup_fd)
            os.close(self._wakeup_write_fd)
            self.wakeup_fd = None


def close_at_once(socks) -> None:
    """Close ``socks``, a thread each. Closing a packet socket waits for an RCU grace period (the kernel's
    ``packet_release``), and waits that overlap end together: one by one, the 48 ports of a fat-tree k=4 took
    0.6 s to close, at once 0.1 s."""
    threads = [threading.Thread(target=sock.close) for sock in socks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def parse_args(argv):
    parser = argparse.ArgumentParser(description="pyswitch: the Python model of p4/ina.p4")
    parser.add_argument("--switch", action="append", default=[], metavar="NAME=CONTROL",
                        help="a switch this process runs and its control socket's path, repeated")
    parser.add_argument("--port", action="append", default=[], metavar="NAME:PORT=IFNAME",
                        help="a port of switch NAME on interface IFNAME, repeated (PORT=IFNAME with --name)")
    parser.add_argument("--name", help="the one switch of this process (with --control)")
    parser.add_argument("--control", help="--name's control socket path")
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--slots", type=int, default=1024)
    return parser.parse_args(argv)


def switch_specs(args) -> list:
    """The :class:`SwitchSpec` list the arguments name; ValueError says which argument is wrong."""
    controls = {}
    for spec in args.switch:
        name, sep, control = spec.partition("=")
        if not sep or not name or not control:
            raise ValueError(f"--switch {spec!r}: expected NAME=CONTROL_PATH")
        if name in controls:
            raise ValueError(f"--switch {spec!r}: switch {name} given twice")
        controls[name] = control
    if args.name or args.control:
        if not (args.name and args.control) or controls:
            raise ValueError("--name and --control go together, without --switch")
        controls[args.name] = args.control
    if not controls:
        raise ValueError("no switch: give --switch NAME=CONTROL (or --name and --control)")
    ports = {name: {} for name in controls}
    for spec in args.port:
        where, sep, ifname = spec.rpartition("=")
        name, colon, number = where.rpartition(":")
        if not colon and args.name:
            name = args.name
        if not sep or not ifname or name not in ports or not number.isdigit():
            raise ValueError(f"--port {spec!r}: expected NAME:PORT=IFNAME for a switch given by --switch"
                             f"{' (or PORT=IFNAME)' if args.name else ''}")
        ports[name][int(number)] = ifname
    return [SwitchSpec(name, ports[name], control) for name, control in controls.items()]


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        specs = switch_specs(args)
    except ValueError as exc:
        print(f"pyswitch: {exc}", file=sys.stderr, flush=True)
        return 2
    names = ", ".join(spec.name for spec in specs)
    try:
        proc = SwitchProcess(specs, args.lanes, args.slots)
    except OSError as exc:
        print(f"pyswitch {names}: cannot open ports or control socket: {exc}", file=sys.stderr, flush=True)
        return 1

    proc.stop_on(signal.SIGTERM, signal.SIGINT)
    for spec in specs:
        print(f"pyswitch {spec.name}: ports {spec.ports}, lanes {args.lanes}, slots {args.slots}, "
              f"control {spec.control_path}", flush=True)
    try:
        proc.serve()
    finally:
        for switch in proc.switches:
            print(json.dumps({"switch": switch.name, "final_stats": switch.final_stats()}), flush=True)
        proc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
