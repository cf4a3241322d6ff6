"""Worker transports, chosen per job by name (a scenario's ``transport:``; ``TRANSPORTS``).

- ``atp`` (:mod:`.atp`): ATP's congestion control, the default of every
  scheme but SwitchML: a window of fragments, +1 per RESULT, halved on an ECN
  echo or a loss (once per round trip), within [1, 100] and the job's
  ``window``; paced at the host link rate.
- ``switchml`` (:mod:`.switchml`): SwitchML's self-clocked fixed window (one
  fragment per slot, no congestion control) and fixed timeout (``timeout``,
  by default SwitchML's 10 ms scaled with the run).
- ``pa-atp`` (:mod:`.pa_atp`): PA-ATP's dual windows (CWD on GACKs, AWD on
  AACKs), progress-aware congestion control and asynchronous degree control;
  ``transport_options`` ``progress_aware`` / ``awd_limit`` give the ablations
  of PA-ATP §VI-D.
- ``strawasyn`` (:mod:`.pa_atp`): PA-ATP's code with both modules off, the
  strawman asynchronous congestion control PA-ATP compares against.
- ``paced`` (:mod:`.paced`): a fixed rate and a fixed window, no congestion
  control (InArt §5.3's workers replay their gradient at one rate); the rate
  is ``transport_options.rate`` or, by default, the scheme's planned rate.

Transports are not schemes: a scheme decides where fragments are
aggregated, a transport when each worker sends them; any PS-based scheme
runs with any transport (a ring scheme's workers with those
``testbed.scenario.RING_TRANSPORTS`` lists). Each class declares the ``transport_options`` it takes
(``OPTIONS``), which the scenario validates. All share
:class:`.base.Transport`: the sliding window over seq, RTT estimation,
timers and gap detection. A new transport is a sibling module registered
here.
"""

from testbed.agents.transport.atp import AtpTransport
from testbed.agents.transport.paced import PacedTransport
from testbed.agents.transport.pa_atp import PaAtpTransport, StrawAsynTransport
from testbed.agents.transport.switchml import SwitchMLTransport

TRANSPORTS = {cls.name: cls for cls in (AtpTransport, SwitchMLTransport, StrawAsynTransport, PaAtpTransport,
                                        PacedTransport)}


def default_transport(scheme: str) -> str:
    """The transport each paper pairs with a scheme: SwitchML's own, ATP's for every other."""
    return "switchml" if scheme == "switchml" else "atp"


def make_transport(name: str, **params):
    try:
        cls = TRANSPORTS[name]
    except KeyError:
        raise ValueError(f"unknown transport {name!r}; known: {', '.join(sorted(TRANSPORTS))}") from None
    return cls(**params)
