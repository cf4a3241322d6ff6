"""What the roles' single-threaded ``selectors`` loops share: the stop flag the SIGTERM/SIGINT handler sets
(its wakeup byte arrives on a socket the loops select on, and is drained), the conversion of a config's
wall-clock epochs to the monotonic clock the loops sleep on, and the sinks' loop (serve ready sockets until
a stop signal or the deadline)."""
from __future__ import annotations

import math
import selectors
import socket
import time
from typing import Optional


class _StopFlag:
    """Set by the SIGTERM/SIGINT handler; the handler's wakeup byte breaks the select."""

    def __init__(self) -> None:
        self.requested = False

    def handle(self, signum: int, frame: object) -> None:
        self.requested = True


def _monotonic_of(epoch_s: Optional[float]) -> float:
    """The monotonic-clock time of wall-clock ``epoch_s`` (seconds since the epoch); None: never (inf)."""
    return math.inf if epoch_s is None else time.monotonic() + float(epoch_s) - time.time()


def _serve_until_stopped(selector, stop: _StopFlag, wake: socket.socket, deadline_mono_s: float, on_ready) -> str:
    """A sink's loop: select until a stop signal ("signal") or ``deadline_mono_s`` ("deadline"), the reason
    returned; ``wake`` (the signal wake-up socket, registered here) is drained, every other ready key goes to
    ``on_ready(key)``."""
    selector.register(wake, selectors.EVENT_READ, "wake")
    while True:
        if stop.requested:
            return "signal"
        timeout_s = deadline_mono_s - time.monotonic()
        if timeout_s <= 0:
            return "deadline"
        for key, _ in selector.select(None if math.isinf(timeout_s) else timeout_s):
            if key.data == "wake":
                _drain(wake)
            else:
                on_ready(key)


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        pass
