"""The pyswitch process: one per switch, bound to the switch's Mininet interfaces.

``python -m testbed.dataplane.pyswitch.process --name s1 --port 1=s1-eth1 ...
--control /path/s1.sock``

One thread, one epoll loop: raw AF_PACKET sockets (outgoing copies ignored
with PACKET_IGNORE_OUTGOING) feed :class:`PySwitchCore`; the Unix control
socket takes one JSON request per line (the SwitchRuntime verbs) and answers
one JSON line. The loop's timeout is the next departure of a shaped egress
queue, so shaping costs nothing when idle. SIGTERM/SIGINT end the loop; the
final counters are printed as one JSON line on stdout for the run's log.
"""

import argparse
import errno
import json
import os
import select
import signal
import socket
import sys
import time

from testbed.dataplane.pyswitch.core import PySwitchCore
from testbed.errors import DataplaneError

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_IGNORE_OUTGOING = 23
RECV_BATCH = 128


def open_port_socket(ifname: str) -> socket.socket:
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass  # kernels < 4.20: outgoing copies are filtered in the loop instead
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.bind((ifname, 0))
    sock.setblocking(False)
    return sock


class SwitchProcess:
    def __init__(self, name: str, ports: dict, control_path: str, lanes: int, slots: int):
        self.core = PySwitchCore(name, lanes, slots)
        self.ports = ports
        self.control_path = control_path
        self.running = True
        self.send_errors = 0
        self.port_socks = {}
        self.fd_port = {}
        self.epoll = select.epoll()
        for port, ifname in ports.items():
            sock = open_port_socket(ifname)
            self.port_socks[port] = sock
            self.fd_port[sock.fileno()] = (port, sock)
            self.epoll.register(sock.fileno(), select.EPOLLIN)
        if os.path.exists(control_path):
            os.unlink(control_path)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(control_path)
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.epoll.register(self.listener.fileno(), select.EPOLLIN)
        self.clients = {}  # fd -> (socket, buffer)

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

    def serve(self):
        core, send, fd_port, egress = self.core, self.send, self.fd_port, self.core.egress
        monotonic = time.monotonic
        while self.running:
            timeout = -1
            if egress.queues or egress.impairments:
                nxt = egress.drain(monotonic(), send)
                if nxt != float("inf"):
                    timeout = max(0.0, nxt - monotonic())
            try:
                events = self.epoll.poll(timeout if timeout >= 0 else 1.0)
            except InterruptedError:
                continue
            now = monotonic()
            for fd, _ in events:
                entry = fd_port.get(fd)
                if entry is not None:
                    port, sock = entry
                    for _ in range(RECV_BATCH):
                        try:
                            data = sock.recv(2048)
                        except BlockingIOError:
                            break
                        core.receive(bytearray(data), port, now, send)
                elif fd == self.listener.fileno():
                    self._accept()
                else:
                    self._control(fd)

    def _accept(self):
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        conn.setblocking(False)
        self.clients[conn.fileno()] = (conn, bytearray())
        self.epoll.register(conn.fileno(), select.EPOLLIN)

    def _control(self, fd):
        conn, buffer = self.clients[fd]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.epoll.unregister(fd)
            conn.close()
            del self.clients[fd]
            return
        buffer.extend(data)
        while b"\n" in buffer:
            line, _, rest = bytes(buffer).partition(b"\n")
            buffer[:] = rest
            try:
                reply = {"ok": True, "result": self.core.control(json.loads(line))}
            except DataplaneError as exc:
                reply = {"ok": False, "error": str(exc)}
            except (ValueError, KeyError) as exc:
                reply = {"ok": False, "error": f"bad request: {exc}"}
            conn.setblocking(True)
            conn.sendall(json.dumps(reply).encode() + b"\n")
            conn.setblocking(False)

    def close(self):
        for sock in self.port_socks.values():
            sock.close()
        for conn, _ in self.clients.values():
            conn.close()
        self.listener.close()
        try:
            os.unlink(self.control_path)
        except OSError:
            pass


def parse_args(argv):
    parser = argparse.ArgumentParser(description="pyswitch: the Python model of p4/ina.p4")
    parser.add_argument("--name", required=True)
    parser.add_argument("--port", action="append", default=[], help="PORT=IFNAME, repeated")
    parser.add_argument("--control", required=True, help="Unix socket path for the runtime")
    parser.add_argument("--lanes", type=int, default=64)
    parser.add_argument("--slots", type=int, default=1024)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    ports = {}
    for spec in args.port:
        number, _, ifname = spec.partition("=")
        ports[int(number)] = ifname
    try:
        proc = SwitchProcess(args.name, ports, args.control, args.lanes, args.slots)
    except OSError as exc:
        print(f"pyswitch {args.name}: cannot open ports or control socket: {exc}", file=sys.stderr, flush=True)
        return 1

    def stop(signum, frame):
        proc.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"pyswitch {args.name}: ports {ports}, lanes {args.lanes}, slots {args.slots}, control {args.control}",
          flush=True)
    try:
        proc.serve()
    finally:
        stats = proc.core.control({"op": "stats"})
        stats["send_errors"] = proc.send_errors
        print(json.dumps({"switch": args.name, "final_stats": stats}), flush=True)
        proc.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
