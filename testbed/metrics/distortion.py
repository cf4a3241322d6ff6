"""Is a run's figure a result, or an emulator artifact? The ``distorted`` mark and its reasons.

A run is marked distorted (printed, and in ``summary.json`` as ``distorted``
plus ``distortion_reasons``) when any of these holds:

- **CPU**: a thread of a switch or agent process used at least
  ``SATURATED_CORE_SHARE`` of a core over some sampling interval (it could
  not keep up: the figure measures the machine; a single-threaded process's
  thread is the process, bmv2's pipelines are threads of their own, see
  :mod:`testbed.metrics.cpu`), or the machine as a whole was at least
  ``SATURATED_MACHINE_SHARE`` busy on average (processes waited for a core);
- **unmodelled loss**: packets were lost anywhere but a modelled switch
  queue (tail drop at ``queue_depth``) or an injected impairment: a switch
  port socket that overflowed, an agent socket receive buffer that
  overflowed (UDP ``RcvbufErrors``), a host qdisc that dropped;
- **packet-rate shaping**: a bmv2 switch port sent at its packets-per-second
  cap (bmv2 shapes a link's rate as packets per second of full INA frames)
  in frames well below full size (ACKs, GACKs), so the link ran below its
  rate (:func:`testbed.metrics.counters.packet_rate_bound_ports`);
- **host delay**: a job's round trip waited longer for the processes that
  handle its packets than ``HOST_DELAY_STEP_SHARE`` of a ring's step or
  ``HOST_DELAY_WINDOW_SHARE`` of a window (:mod:`testbed.metrics.rounds`), or, for a
  windowed job, than ``HOST_DELAY_COMM_SHARE`` of its communication time
  (a job of few windows meets it at its start and end), by the waits
  every agent and pyswitch process measured (kernel receive timestamp to
  handling, timed wake-ups against their due time:
  :mod:`testbed.metrics.host_delay`). A process need not be saturated to
  add delay: on two shared cores each waits its turn, and a ring's steps or
  PA-ATP's GACK rounds read slow by exactly those waits;
- **spurious retransmissions** above ``SPURIOUS_RETX_LIMIT`` of the
  fragments sent: retransmissions of a contribution its aggregation node
  already held (``partial_flushed`` or ``retx_held`` at a switch, a RETX
  duplicate at a PS).
  Timers firing while the original still waits in a queue make the figures
  measure timeouts, not the scheme.

The retransmission ratio is reported either way. :func:`assess` is pure.
"""

from dataclasses import dataclass, field

SATURATED_CORE_SHARE = 0.9
SATURATED_MACHINE_SHARE = 0.9
SPURIOUS_RETX_LIMIT = 0.02
#: The share of a ring's step (testbed/metrics/rounds.py) its round trip may wait for processes. A step sends
#: its range, then waits its round trip, so a step that waits ``s`` of its length runs at 1 / (1 + s) of the
#: model's rate, and the fidelity bound on rates (testbed.fidelity.RATE_TOLERANCE, 25%: at least 0.75x) allows
#: s = 1 / 0.75 - 1 = 1/3: a run past it reads outside the bounds. Seen on Rina's testbed under RAR held to one
#: core (tests/emulation/test_host_delay_runs.py): waits of 0.37 of a step read 0.72x the model's minimum
#: sending rate; on both cores 0.27 of a step read 1.02-1.07x its communication time.
HOST_DELAY_STEP_SHARE = 1 / 3
#: ... and of a window. A window's frames keep the link busy while its round trip waits, so it reads slow only
#: once the round trip and its wait outgrow the window (its rate min(1, window / (round trip + wait)) of the
#: model's): for a window much longer than its round trip the rate bound alone would allow more than the window.
#: 0.4 holds windows to about the steps' limit, as calibrated before the steps' was derived (PA-ATP's GACK
#: rounds, ATP's windows on the papers' testbeds).
HOST_DELAY_WINDOW_SHARE = 0.4
#: ... and of a windowed job's communication time (which meets it at least twice: ATP on Rina's fat-tree,
#: one window and a tenth long, read 1.55x the model's time with a round trip's delay 27% of it, 34% of a window).
HOST_DELAY_COMM_SHARE = 0.15
#: The limit per part a round trip's wait is weighed against (testbed.metrics.rounds.JobRound.spans).
HOST_DELAY_SHARES = {"ring step": HOST_DELAY_STEP_SHARE, "window": HOST_DELAY_WINDOW_SHARE,
                     "communication": HOST_DELAY_COMM_SHARE}
#: What a reason starts with, before its colon (:func:`reason_kind`): the run's CPU, and a round trip's wait for
#: its processes, are the host's; the others are the network's or the scheme's.
CPU_REASON = "CPU"
HOST_DELAY_REASON = "host delay"
UNMODELLED_LOSS_REASON = "loss outside modelled queues"
PACKET_RATE_REASON = "packet-rate shaping"
SPURIOUS_RETX_REASON = "spurious retransmissions"
HOST_BOUND_REASONS = (CPU_REASON, HOST_DELAY_REASON)
#: How a reason names the parts of a round trip's wait (testbed.metrics.rounds.round_trip_host_delay_s).
ROUND_TRIP_PARTS = {"sender_lateness_s": "sender late", "switches_s": "switches", "receiver_s": "receiver",
                    "sender_s": "sender"}


@dataclass
class Evidence:
    """What a run measured that bears on its fidelity."""
    fragments_sent: int = 0                  # original fragments, all workers and iterations
    retransmissions: int = 0
    spurious_retransmissions: int = 0
    cpu: dict = field(default_factory=dict)  # CpuSampler.shares()
    unmodelled_losses: dict = field(default_factory=dict)   # where -> packets
    packet_rate_bound: dict = field(default_factory=dict)   # port -> counters.packet_rate_bound_ports entry
    #: job -> (its JobRound, what one round trip waited by part: rounds.round_trip_host_delay_s)
    round_trip_delays: dict = field(default_factory=dict)


def assess(evidence: Evidence) -> list:
    """The reasons the run is distorted (empty: it is not)."""
    reasons = []
    for name, share in sorted(evidence.cpu.get("processes", {}).items()):
        busiest = share.get("thread_peak", share["peak"])
        if busiest >= SATURATED_CORE_SHARE:
            reasons.append(f"{CPU_REASON}: {name} used {busiest:.0%} of a core"
                           f"{' in one of its threads' if share.get('threads', 1) > 1 else ''} over one "
                           f"{evidence.cpu.get('interval_s', 1.0):g} s interval")
    machine = evidence.cpu.get("machine")
    if machine and machine["mean"] >= SATURATED_MACHINE_SHARE:
        reasons.append(f"{CPU_REASON}: the machine was {machine['mean']:.0%} busy on average over "
                       f"{evidence.cpu.get('cores', '?')} cores")
    for where, packets in sorted(evidence.unmodelled_losses.items()):
        if packets:
            reasons.append(f"{UNMODELLED_LOSS_REASON}: {packets} packets at {where}")
    for port, bound in sorted(evidence.packet_rate_bound.items()):
        reasons.append(f"{PACKET_RATE_REASON}: bmv2 port {port} sent at {bound['peak_share_of_cap']:.0%} of its "
                       f"packets-per-second cap in frames of {bound['mean_frame_bytes']:.0f} bytes on average "
                       f"({bound['intervals']} interval(s)), below its link's rate")
    for job, (job_round, parts) in sorted(evidence.round_trip_delays.items()):
        delay_s = sum(parts.values())
        for part, span_s, what in job_round.spans():
            share = HOST_DELAY_SHARES[part]
            if span_s and delay_s > share * span_s:
                by_part = ", ".join(f"{ROUND_TRIP_PARTS[part]} {value * 1e3:.2g}" for part, value in parts.items())
                reasons.append(f"{HOST_DELAY_REASON}: a round trip of job {job} waited {delay_s * 1e3:.3g} ms for "
                               f"its processes ({by_part} ms), {delay_s / span_s:.0%} of its {span_s * 1e3:.3g} ms "
                               f"{what} (limit {share:.0%}): raise time_dilation")
                break
    if evidence.fragments_sent:
        ratio = evidence.spurious_retransmissions / evidence.fragments_sent
        if ratio > SPURIOUS_RETX_LIMIT:
            reasons.append(f"{SPURIOUS_RETX_REASON}: {evidence.spurious_retransmissions} of "
                           f"{evidence.fragments_sent} fragments ({ratio:.1%} > {SPURIOUS_RETX_LIMIT:.0%})")
    return reasons


def reason_kind(reason: str) -> str:
    """What a reason of :func:`assess` is about: the words before its colon (``CPU``, ``host delay``, ...)."""
    return reason.split(":", 1)[0]


def host_bound_reasons(reasons, kinds=HOST_BOUND_REASONS) -> list:
    """Those of a run's distortion ``reasons`` whose kind is one of ``kinds`` (by default the host's: its CPU or
    its processes' waits bound the run, which a larger time dilation relieves)."""
    return [reason for reason in reasons if reason_kind(reason) in kinds]


def host_bound(reasons) -> bool:
    """Whether any of a run's distortion ``reasons`` is the host's (:func:`host_bound_reasons`)."""
    return bool(host_bound_reasons(reasons))
