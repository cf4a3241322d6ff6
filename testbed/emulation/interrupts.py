"""Ctrl-C and SIGTERM during a run: held off where a half-done step would leave the machine dirty
(:func:`interrupts_deferred`), remembered where Python could swallow them (:class:`InterruptLatch`)."""

import contextlib
import signal
import threading


@contextlib.contextmanager
def _interrupt_handler(handler):
    """``handler`` takes SIGINT and SIGTERM for the block, then the previous handlers are back. Python lets
    only the main thread install handlers: elsewhere the block runs with them unchanged."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def interrupts_deferred():
    """Hold SIGINT/SIGTERM until the block ends, then deliver them (main thread only)."""
    received = []
    with _interrupt_handler(lambda signum, frame: received.append(signum)):
        try:
            yield
        finally:
            if received:
                raise KeyboardInterrupt


class InterruptLatch:
    """Ctrl-C (SIGINT) and SIGTERM raise KeyboardInterrupt wherever the main thread is, as Python's own
    handler does, and are remembered. Python swallows an exception raised while a finalizer (``__del__``)
    or a weakref callback runs ("Exception ignored in ..."), so a signal handled there would be lost and
    the run go on (CI saw a quickstart run iterate on for a minute after its Ctrl-C); the run's waiting
    loops call :meth:`check`, which raises it again. Installed in the main thread only."""

    def __init__(self):
        self.requested = False

    def handle(self, signum, frame):
        self.requested = True
        raise KeyboardInterrupt

    def check(self):
        if self.requested:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self):
        """A context manager: the latch takes SIGINT and SIGTERM within it, and a signal it took is raised
        again when the block ends without an exception (swallowed after the run's last check, it would be
        forgotten as the run ends, and a sweep would go on to its next point)."""
        with _interrupt_handler(self.handle):
            yield
        self.check()
