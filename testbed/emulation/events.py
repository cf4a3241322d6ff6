"""Timed injections during a run, and the run's event log (``events.jsonl``).

A scenario's ``stragglers`` section schedules changes relative to the start
signal: a worker's NIC rate (host htb + the switch's egress queue toward it),
a worker paused and resumed (SIGSTOP / SIGCONT of its agent), a link's rate
degraded (the switch egress queues on the link, and the host's htb when one
end is a host), a worker failed (its agent killed; for good: no duration).
Each other change is undone after its duration. Every start and end
is written to the event log with its time, so plots can mark it; per-iteration
compute delays come from the workers' records.

The scheduler is given *actions* (callables) by the orchestrator, so it knows
nothing of Mininet or targets; ``htb_rate_argv`` builds the tc command that a
caller runs in a host's namespace.
"""

import json
import threading
import time
from pathlib import Path


def htb_rate_argv(ifname: str, rate_bps: float):
    """tc command changing the rate of the htb class Mininet's TCIntf creates (handle 5:, class 5:1)."""
    return ["tc", "class", "change", "dev", ifname, "parent", "5:0", "classid", "5:1", "htb",
            "rate", f"{rate_bps / 1e6:.6f}Mbit", "burst", "15k"]


class EventLog:
    """``events.jsonl``: one line per event, ``t_s`` its virtual time since the start signal ``t0`` (epoch s;
    wall time / ``time_dilation``, testbed/dilation.py) and ``wall`` its wall-clock epoch."""

    def __init__(self, path: Path, t0: float, time_dilation: float = 1.0):
        self.path = Path(path)
        self._lock = threading.Lock()
        self.t0 = t0
        self.time_dilation = time_dilation

    def write(self, kind: str, target, t_s: float = None, **fields):
        """An event ``t_s`` virtual seconds after the start (default: now)."""
        if t_s is None:
            wall = time.time()
            t_s = (wall - self.t0) / self.time_dilation
        else:
            wall = self.t0 + t_s * self.time_dilation
        record = {"t_s": t_s, "wall": wall, "kind": kind,
                  "target": list(target) if isinstance(target, (list, tuple)) else target, **fields}
        with self._lock, open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")


class InjectionScheduler(threading.Thread):
    """Fires ``apply(injection)`` at ``at_s`` and ``revert(injection)`` after ``duration_s`` (wall seconds: a
    dilated run gives it the network's injections, testbed.dilation.network_scenario)."""

    def __init__(self, injections, apply, revert, log: EventLog):
        super().__init__(name="injections", daemon=True)
        timeline = []
        for inj in injections:
            timeline.append((inj.at_s, 0, inj))
            if inj.duration_s:
                timeline.append((inj.at_s + inj.duration_s, 1, inj))
        self.timeline = sorted(timeline, key=lambda x: (x[0], x[1]))
        self.apply, self.revert, self.log = apply, revert, log
        self._stop_event = threading.Event()
        self.start_time = None
        self.errors = []
        self.pending_reverts = []

    def begin(self, start_monotonic: float):
        self.start_time = start_monotonic
        self.start()

    def run(self):
        for at_s, phase, inj in self.timeline:
            delay = self.start_time + at_s - time.monotonic()
            if delay > 0 and self._stop_event.wait(delay):
                return
            try:
                if phase == 0:
                    self.apply(inj)
                    if inj.duration_s:
                        self.pending_reverts.append(inj)
                    self.log.write(inj.kind, inj.target, phase="start", rate_bps=inj.rate_bps or None,
                                   duration_s=inj.duration_s)
                else:
                    self.revert(inj)
                    self.pending_reverts.remove(inj)
                    self.log.write(inj.kind, inj.target, phase="end")
            except Exception as exc:  # noqa: BLE001 - reported in the summary; the run goes on
                self.errors.append(f"{inj.kind} {inj.target}: {exc}")
                self.log.write(inj.kind, inj.target, phase="error", error=str(exc))

    def stop(self):
        """Stop firing; undo what is still applied (a paused agent must not stay stopped)."""
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=5)
        for inj in list(self.pending_reverts):
            try:
                self.revert(inj)
                self.log.write(inj.kind, inj.target, phase="end", reason="run ended")
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"reverting {inj.kind} {inj.target}: {exc}")
        self.pending_reverts.clear()
