"""Worker transports, chosen by name like the policies (``TRANSPORTS``).

- ``atp`` (:mod:`.atp`): ATP's congestion control, the default of every
  scheme but SwitchML: a window of fragments, +1 per RESULT, halved on an ECN
  echo or a loss (once per round trip), within [1, 100] and the job's
  ``window``; paced at the host link rate.
- ``switchml`` (:mod:`.switchml`): SwitchML's self-clocked fixed window (one
  fragment per slot, no congestion control).

Both share :class:`.base.Transport`: the sliding window over seq, RTT
estimation, timers and gap detection. A new transport is a sibling module
registered here.
"""

from testbed.agents.transport.atp import AtpTransport
from testbed.agents.transport.switchml import SwitchMLTransport

TRANSPORTS = {cls.name: cls for cls in (AtpTransport, SwitchMLTransport)}


def default_transport(policy: str) -> str:
    """The transport each paper pairs with a scheme: SwitchML's own, ATP's for every other."""
    return "switchml" if policy == "switchml" else "atp"


def make_transport(name: str, **params):
    try:
        cls = TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"unknown transport {name!r}; known: {', '.join(sorted(TRANSPORTS))}") from None
    return cls(**params)
