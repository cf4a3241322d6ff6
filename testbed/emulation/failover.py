"""Rina §IV-C2's fallback after a worker's error: the control plane's side.

A scenario's ``stragglers.failures`` kill a worker's agent (SIGKILL) at a
time; the controller has checked before the run that each is a Rina job's
worker whose fallback the installed switch entries serve
(``testbed.controller._check_rina_fallbacks``). Once the orchestrator sees
that agent's process end (its monitor loop, as a cluster manager would),
:meth:`RingFallback.after_failure` makes the job's next ring generation:

1. SIGUSR2 to every other worker of the job: each stops where it stands and
   says how many iterations it completed (``agents/<name>.halted-<g>``,
   :mod:`testbed.agents.ring_generation`);
2. the smallest count is the iteration the new ring redoes;
3. the controller writes every worker's config of the generation
   (``testbed.controller.rina_fallback_configs``: a failed agent's rack's
   other workers autonomous members in its place, a failed rack worker's
   rack without it, a failed autonomous worker's ring without it; the sum
   without the failed worker's gradient), and each resumes from that
   iteration.

No switch entry changes: a failed agent's rack's other workers now send as
autonomous members (no ToR aggregation), a rack without a worker sends
tasks of one fan-in less, and the generation in each packet's iteration
field makes the redone iteration newer to the Rina ToRs' slots.

Not handled: a second failure while the first's generation is being made
(about 0.1 s of wall time on Rina's testbed): the worker it kills never
stops, and the run ends with that one-line error.
"""

import json
import signal
import time

from testbed.agents.ring_generation import generation_path, halted_path
from testbed.atomic_io import write_text_atomic
from testbed.controller import rina_fallback_configs
from testbed.errors import EmulationError

#: How often the orchestrator looks for the workers' halted files (wall seconds).
POLL_S = 0.01


class RingFallback:
    """The ring generations of a run's Rina jobs: ``configs`` (name -> AgentConfig, the plan's agents, kept
    current), ``windows`` (job -> its ``window``), ``signal_agent(name, signum)``, ``exit_code(name)``
    (None while it runs) and ``timeout_s`` (wall seconds a worker may take to stop)."""

    def __init__(self, run_dir, configs: dict, windows: dict, signal_agent, exit_code, timeout_s: float):
        self.run_dir = run_dir
        self.configs = dict(configs)
        self.windows = windows
        self.signal_agent = signal_agent
        self.exit_code = exit_code
        self.timeout_s = timeout_s
        self.failed = set()

    def after_failure(self, failed: str) -> dict:
        """The next ring generation of ``failed``'s job without it; what happened, for the event log."""
        dead = self.configs[failed]
        self.failed.add(failed)
        survivors = [c.name for c in self.configs.values()
                     if c.job == dead.job and c.role == "rina" and c.name not in self.failed]
        if all(self.exit_code(name) == 0 for name in survivors):
            return {"job": dead.job, "fallback": "none: the job had ended"}
        generation = dead.generation + 1
        for name in survivors:
            self.signal_agent(name, signal.SIGUSR2)
        completed = self._completed(survivors, generation)
        redo_from = min(completed.values())
        current = [c for c in self.configs.values() if c.name == failed or c.name not in self.failed]
        for config in rina_fallback_configs(current, failed, self.windows[dead.job], redo_from):
            write_text_atomic(generation_path(self.run_dir, config.name, generation), config.to_json())
            self.configs[config.name] = config
        members = len(self.configs[survivors[0]].workers)
        return {"job": dead.job, "generation": generation, "redo_from_iteration": redo_from, "members": members,
                "completed": completed}

    def _completed(self, survivors: list, generation: int) -> dict:
        """Each survivor's completed iterations, as it reports them once stopped."""
        completed = {}
        limit = time.monotonic() + self.timeout_s
        while len(completed) < len(survivors):
            for name in survivors:
                path = halted_path(self.run_dir, name, generation)
                if name not in completed and path.exists():
                    completed[name] = json.loads(path.read_text())["completed"]
                elif name not in completed and self.exit_code(name) is not None:
                    raise EmulationError(f"ring fallback: {name} ended (exit {self.exit_code(name)}) before it "
                                         f"stopped for ring generation {generation}")
            if time.monotonic() > limit:
                missing = sorted(set(survivors) - set(completed))
                raise EmulationError(f"ring fallback: {', '.join(missing)} did not stop within {self.timeout_s:.0f}s")
            time.sleep(POLL_S)
        return completed
