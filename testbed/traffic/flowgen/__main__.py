"""``python -m testbed.traffic.flowgen CONFIG.json``: runs :func:`testbed.traffic.flowgen.agent.main`."""
from testbed.traffic.flowgen.agent import main

if __name__ == "__main__":
    raise SystemExit(main())
