"""What a job's timing rests on: its round, and how much of it the host's delay took.

A job's communication time is a chain of rounds: a ring all-reduce's
2 (N - 1) steps each end with a round trip (the last fragment there, its ACK
back); a windowed INA transport sends a window, then waits a round trip for
the RESULTs that open the next. Whatever delay the processes add to a round
trip adds to every round that waits for it. :func:`job_rounds` derives each
job's round from the scenario, its placement and its default routes, in
virtual seconds:

- ``round_trip_s``: the unloaded round trip of the job's longest worker path
  (to its PS, or to its next ring member): a full frame serialized on every
  link both ways (:func:`testbed.paths.rtt_estimate_s` with no queue);
- ``round_s``: one round. A ring step: a step's range of fragments (on
  average over the scheme's steps: :func:`ring_steps`) at the host
  link's rate plus the round trip. A window: the window's frames at the
  host link's rate, or the round trip where that is longer;
- ``comm_s``: the job's communication, a chain of such rounds: a ring's
  steps one after another; a window's gradient at the rate the fluid model
  gives the job's slowest worker (:func:`testbed.sim.synchronous_rates_bps`)
  plus one round trip. A windowed job of few windows meets a round trip's
  delay at its start and its end whatever its window, so its delay is
  weighed against this too.

:func:`round_trip_host_delay_s` adds up the measured waits (testbed/metrics/host_delay.py)
that one round trip meets: the sender's lateness, each switch's receive
wait on the way there and back, and the receive waits of the agent at each
end. :mod:`testbed.metrics.distortion` weighs one against the other.
"""

from dataclasses import dataclass

from testbed.agents.ring_schedule import job_phases
from testbed.paths import link_rates_along, rtt_estimate_s
from testbed.dataplane.wire import ina_frame_bytes, ring_frame_bytes
from testbed.gradient_profiles import fragments_per_submodel
from testbed.topology import DefaultRoutes

@dataclass(frozen=True)
class JobRound:
    """One job's round (the module docstring), virtual seconds."""
    job: str
    kind: str               # "ring step" or "window"
    sender: str             # the role that sends the job's gradients ("worker", "ring", "rina")
    receiver: str           # the role at the far end of a round trip ("ps", or the sender's own)
    switch_hops: int        # switches a packet passes one way on the longest path
    round_trip_s: float
    round_s: float
    comm_s: float
    steps_summed_in_switches: bool = False   # a ring whose ToRs sum their racks' shards each step (Rina's racks)
    merging_switches: int = 0   # a windowed job's switches on the way that merge other switches' partial sums

    def spans(self) -> tuple:
        """What a round trip's wait for processes is weighed against, as (part, span_s, how a message names
        it): its round (part ``"ring step"`` or ``"window"``, its kind), and for a windowed job its
        communication, which meets the wait at its start and its end whatever its window (a ring meets it
        once a step, which its round weighs exactly). The distortion detector and the planner's latency
        budget each apply their own share per part."""
        spans = ((self.kind, self.round_s, self.kind),)
        return spans + (("communication", self.comm_s, "communication"),) if self.kind == "window" else spans

    def to_dict(self) -> dict:
        return {"kind": self.kind, "switch_hops": self.switch_hops, "round_trip_s": self.round_trip_s,
                "round_s": self.round_s, "comm_s": self.comm_s}


def ring_steps(scheme: str, notes: dict, workers: int, total: int) -> tuple:
    """(steps, the frames a worker sends in a step on average over them) of a ring job: RAR's 2 (N - 1) of
    ``total / N``, H-AR's over its racks' phases (:func:`testbed.agents.ring_schedule.job_phases`), Rina's
    RAR over its members (a rack whose ToR sums it is one: ``notes["members"]``)."""
    if scheme == "rina":
        members = max(2, len(notes["members"]))
        return 2 * (members - 1), total / members
    phases = job_phases(scheme, workers, total, notes.get("racks", []))
    steps = sum(phase.steps for phase in phases)
    return steps, max(sum(phase.fragments[rank] for phase in phases) for rank in range(workers)) / steps


def job_rounds(scenario, placement, job_rates_bps: dict) -> list:
    """Each job's :class:`JobRound` in ``scenario`` under ``placement`` (virtual seconds): its longest worker path
    by default routes, its host link's rate, its window or its ring's step, its gradient's fragments, and
    ``job_rates_bps``, the rate the fluid model gives it (:func:`testbed.sim.synchronous_rates_bps`, or the
    packet budget's :class:`testbed.sim.PacketRates`, from the solve it makes anyway)."""
    topology = scenario.topology
    routes = DefaultRoutes(topology)
    rates = topology.capacity_bps()
    lanes = scenario.switch.lanes
    rounds = []
    for job in scenario.jobs:
        if job.is_ring:
            sender = "rina" if job.scheme == "rina" else "ring"
            pairs = list(zip(job.workers, job.workers[1:] + job.workers[:1]))
            frame_bytes = ring_frame_bytes(lanes)
        else:
            sender = "worker"
            pairs = [(w, ps) for w in job.workers for ps in job.ps]
            frame_bytes = ina_frame_bytes(lanes)
        paths = [p for p in (routes.path(src, dst) for src, dst in pairs if src != dst) if p]
        round_trip_s = max((rtt_estimate_s(link_rates_along(rates, p), frame_bytes, 0) for p in paths), default=0.0)
        hops = max((sum(topology.nodes[n].kind == "switch" for n in p) for p in paths), default=0)
        frame_s = 8.0 * frame_bytes / min(topology.host_link(w).rate_bps for w in job.workers)
        fragments = sum(fragments_per_submodel(job.submodel_elements, lanes))
        if job.is_ring:
            jp = placement.jobs[job.name]
            steps, step_frames = ring_steps(jp.scheme, jp.notes, len(job.workers), fragments)
            step_s = step_frames * frame_s + round_trip_s
            rounds.append(JobRound(job.name, "ring step", sender, sender, hops, round_trip_s, step_s, steps * step_s,
                                   steps_summed_in_switches=bool(jp.notes.get("ina"))))
        else:
            rate_bps = job_rates_bps.get(job.name) or 0.0
            comm_s = (fragments * 8.0 * frame_bytes / rate_bps if rate_bps else fragments * frame_s) + round_trip_s
            # Aggregation nodes past the first switch, less the PS: the switches that merge partial sums.
            merging = max(0, placement.jobs[job.name].aggregation_depth() - 2)
            rounds.append(JobRound(job.name, "window", sender, "ps", hops, round_trip_s,
                                   max(round_trip_s, min(job.window, fragments) * frame_s), comm_s,
                                   merging_switches=merging))
    return rounds


def _mean(host_delay: dict, role: str, kind: str) -> float:
    return (host_delay.get(role, {}).get(kind, {}).get("mean_s")) or 0.0


def round_trip_host_delay_s(job_round: JobRound, host_delay: dict) -> dict:
    """What one round trip of ``job_round``'s job waited for its processes, virtual seconds, by part:
    the sender's mean lateness, every switch's mean receive wait on the way and back, and the mean receive
    wait at each end; ``host_delay`` is the run's per-role summary (:func:`testbed.metrics.host_delay.by_role`)."""
    return {"sender_lateness_s": _mean(host_delay, job_round.sender, "send_lateness"),
            "switches_s": 2 * job_round.switch_hops * _mean(host_delay, "switch", "receive_wait"),
            "receiver_s": _mean(host_delay, job_round.receiver, "receive_wait"),
            "sender_s": _mean(host_delay, job_round.sender, "receive_wait")}


def round_trip_summary(round_trip_delays: dict) -> dict:
    """The summary's ``host_delay.round_trips``: per job its round (:meth:`JobRound.to_dict`), what one round
    trip waited for its processes (``wait_s``, and by part) and that wait's share of the round and of the
    job's communication."""
    out = {}
    for job, (job_round, parts) in sorted(round_trip_delays.items()):
        wait_s = sum(parts.values())
        out[job] = {**job_round.to_dict(), "wait_s": wait_s, "wait_by_part_s": parts,
                    "share_of_round": wait_s / job_round.round_s if job_round.round_s else None,
                    "share_of_comm": wait_s / job_round.comm_s if job_round.comm_s else None}
    return out
