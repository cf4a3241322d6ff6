"""Entry point of an agent process: ``python -m testbed.agents.run CONFIG.json``.

Exit codes: 0 done, 3 timed out (the message says which fragments were
missing), 2 bad config. Output goes to stdout/stderr, which the orchestrator
keeps in the run's ``logs/``.
"""

import signal
import sys
from pathlib import Path

from testbed.agents import ps, rina, ring, worker
from testbed.agents.config import AgentConfig

#: An agent config's role -> the agent it runs.
AGENTS = {"worker": worker.run, "ps": ps.run, "ring": ring.run, "rina": rina.run}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m testbed.agents.run CONFIG.json", file=sys.stderr)
        return 2
    try:
        config = AgentConfig.from_json(Path(argv[0]).read_text())
    except (OSError, ValueError, TypeError, KeyError) as exc:
        print(f"agent: cannot read config {argv[0]}: {exc}", file=sys.stderr)
        return 2
    run_agent = AGENTS.get(config.role)
    if run_agent is None:
        print(f"agent: config {argv[0]}: unknown role {config.role!r}; known: {', '.join(AGENTS)}", file=sys.stderr)
        return 2
    # SIGTERM from the orchestrator ends the agent through the normal cleanup path.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return run_agent(config)
    except TimeoutError as exc:
        print(str(exc), file=sys.stderr, flush=True)
        return 3


if __name__ == "__main__":
    raise SystemExit(main())
