"""A new ring generation after a worker's error (Rina §IV-C2), as a Rina job's agent takes part in it.

§IV-C2: "Upon the occurrence of an agent error, the other workers in the
corresponding rack can default to regular RAR, ensuring uninterrupted
training"; a Rina rack's other worker is excluded by its agent, an
autonomous worker bypassed. The testbed's control plane (the orchestrator,
which sees the worker's process end) makes the new ring; the agents only
stop and resume:

1. The orchestrator sends SIGUSR2 to every other worker of the job. The
   handler (:class:`HaltRequest`) only sets a flag; the agent's wait loop
   raises :class:`RingHalted` at its next wake-up (at most the agents'
   ``IDLE_WAIT_S`` of wall time later), wherever the iteration stood.
2. The agent writes ``agents/<name>.halted-<g>`` (``g`` the generation to
   come) with the iterations it completed, and waits for
   ``agents/<name>.generation-<g>.json`` (:func:`await_next_generation`).
3. The orchestrator takes the smallest count as the iteration to redo, has
   the controller write each worker's config of generation ``g``
   (``testbed.controller.rina_fallback_configs``: the members
   ``testbed.schemes.ring.fallback_members`` gives, the gradients summed
   without the failed worker's), and the agent resumes from that iteration with a new
   member object on the same socket, records and clock. An iteration it had
   completed is redone and recorded again; the summary keeps the later
   record (``testbed.metrics.summary.load_records``).

Every Rina packet carries its generation in the iteration field
(``wire.rina_iteration``), so an agent drops what the old ring still had in
flight and a Rina ToR takes the redone iteration as newer than what its
slots hold.
"""

import json
import signal
import time
from pathlib import Path

from testbed.agents.config import AgentConfig
from testbed.atomic_io import write_text_atomic

#: How often a halted agent looks for its next generation's config (wall seconds).
POLL_S = 0.01


class RingHalted(Exception):
    """The orchestrator stopped this agent's ring: a new generation follows."""


class HaltRequest:
    """SIGUSR2, the orchestrator's request to stop the ring: a flag the agent's wait loop reads
    (:meth:`check`); installed once per agent process."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGUSR2, self._request)

    def _request(self, signum, frame):
        self.requested = True

    def check(self):
        """Raise :class:`RingHalted` once requested (and forget the request)."""
        if self.requested:
            self.requested = False
            raise RingHalted()


def halted_path(run_dir, name: str, generation: int) -> Path:
    """Where agent ``name`` says it stopped, before generation ``generation``: its completed iterations."""
    return Path(run_dir) / "agents" / f"{name}.halted-{generation}"


def generation_path(run_dir, name: str, generation: int) -> Path:
    """Agent ``name``'s config of ring generation ``generation``."""
    return Path(run_dir) / "agents" / f"{name}.generation-{generation}.json"


def await_next_generation(config, completed: int, timeout_s: float) -> AgentConfig:
    """Say this agent stopped with ``completed`` iterations done, then wait (at most ``timeout_s`` wall
    seconds) for its config of the next generation."""
    generation = config.generation + 1
    write_text_atomic(halted_path(config.run_dir, config.name, generation), json.dumps({"completed": completed}))
    path = generation_path(config.run_dir, config.name, generation)
    limit = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > limit:
            raise TimeoutError(f"{config.name}: no config of ring generation {generation} within {timeout_s:.0f}s "
                               f"of stopping")
        time.sleep(POLL_S)
    return AgentConfig.from_json(path.read_text())
