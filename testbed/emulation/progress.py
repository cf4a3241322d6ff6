"""The run's progress line: each job's completed iterations and the rate into its PSs, as the run goes.

On a terminal one line is rewritten in place; otherwise a line is written
when a job completes an iteration, or every 10 s while nothing changes, so
logs stay short. Completions are counted from the agents' records
(``records/<agent>.jsonl``, one line per iteration). Under a time dilation N
(testbed/dilation.py) the line shows the wall time and the virtual time it
stands for, and the PS ingress rate in virtual time (N x the wall rate).

What a run or a sweep displays goes through :class:`ReaderSafeStream`: a reader that
goes away (``inatb run ... 2>&1 | head``) silences the display, never the
run or the sweep.
"""

import sys
import time
from pathlib import Path


def line_count(path: Path) -> int:
    """Lines in ``path`` (0 while it does not exist)."""
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def building_line(plan, run_dir) -> str:
    """The line a run says as it builds its network: switches (and the processes pyswitch shares among
    them), hosts, the time dilation, the run directory."""
    topology = plan.scenario.topology
    switches, hosts = len(topology.switches()), len(topology.hosts())
    groups = plan.budget.switch_groups if plan.target == "pyswitch" else None
    shared = f" in {len(groups)} process{'es' if len(groups) > 1 else ''}" if groups and len(groups) < switches else ""
    slowed = f", time dilation {plan.time_dilation:g}" if plan.time_dilation != 1 else ""
    return (f"building {switches} {plan.target} switch{'es' if switches != 1 else ''}{shared}, "
            f"{hosts} host{'s' if hosts != 1 else ''}{slowed} ({run_dir})")


class ReaderSafeStream:
    """A text stream for a run's display that outlives its reader: once a write or flush finds the pipe
    closed (``BrokenPipeError``), the display goes quiet (``reader_gone``) and the run goes on; the results
    are in the run directory either way."""

    def __init__(self, stream):
        self.stream = stream
        self.reader_gone = False

    def _guarded(self, call, *args):
        if self.reader_gone:
            return None
        try:
            return call(*args)
        except BrokenPipeError:
            self.reader_gone = True
            return None

    def write(self, text: str):
        self._guarded(self.stream.write, text)

    def flush(self):
        self._guarded(self.stream.flush)

    def isatty(self) -> bool:
        return not self.reader_gone and self.stream.isatty()


class Progress:
    """One status line per change (or a rewriting line on a terminal)."""

    def __init__(self, scenario, run_dir: Path, stream=sys.stderr, time_dilation: float = 1.0):
        self.scenario = scenario
        self.time_dilation = time_dilation
        self.records = run_dir / "records"
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.monotonic()
        self.last_line = ""
        self.last_state = ""
        self.last_print = 0.0
        self.with_ps = any(job.ps for job in scenario.jobs)     # ring all-reduce jobs have none

    def _count(self, node):
        return line_count(self.records / f"{node}.jsonl")

    def update(self, ps_rate_bps: float):
        """Each job's completed iterations (its slowest completion agent's records) and, when a job has a PS,
        the rate into the PSs' ports (``ps_rate_bps`` measured on the wall clock)."""
        parts = []
        for job in self.scenario.jobs:
            done = min(self._count(agent) for agent in job.completion_agents)
            parts.append(f"{job.name} ({job.scheme}) iteration {done}/{job.iterations}")
        state = ", ".join(parts)
        elapsed_s = time.monotonic() - self.t0
        if self.time_dilation == 1:
            line = f"[{elapsed_s:6.1f}s] {state}"
        else:
            line = f"[{elapsed_s:6.1f}s wall = {elapsed_s / self.time_dilation:.2f}s virtual] {state}"
        if self.with_ps:
            line += f", PS ingress {ps_rate_bps * self.time_dilation / 1e6:.1f} Mb/s"
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + line.ljust(len(self.last_line)))
            self.stream.flush()
        elif state != self.last_state or now - self.last_print > 10:
            self.stream.write(line + "\n")
            self.last_print = now
        self.last_line, self.last_state = line, state

    def finish(self):
        if self.tty and self.last_line:
            self.stream.write("\n")
