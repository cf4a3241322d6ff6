"""A scenario's plan, made once: what ``validate`` prints is what ``run`` and ``fidelity`` use.

:func:`plan_scenario` makes what every command needs of a scenario, a
:class:`ScenarioPlan`: the scenario, its placement (solved once) and, when
asked for, the flow-level simulation of that placement; ``inatb simulate`` and
a simulated sweep consume it. :func:`make_plan` takes a scenario and a
target and, after every check that refuses a scenario before any network
exists, returns a :class:`RunPlan`, the scenario plan and what an emulation
adds: the resolved target, the packet budget and the time dilation it picks,
the control plan at that dilation and the slowed world. ``inatb validate``
prints it (:func:`describe`, as ``inatb run`` does before it builds the
network), ``inatb run``, ``inatb fidelity`` and an emulated sweep's points
run it (:func:`testbed.emulation.orchestrator.run_scenario`), ``fidelity``
compares the run with its simulation.
"""

from dataclasses import dataclass, field

from testbed import bpf_build, controller
from testbed.agents.transport import TRANSPORTS
from testbed.budget import (PacketBudget, bmv2_installed, dilation_factor, expected_run_wall_s, expected_wall_s,
                            packet_budget, run_set_up_s, target_choice)
from testbed.dataplane import program
from testbed.dilation import network_scenario
from testbed.errors import EnvironmentMissingError, PlacementError, ScenarioError
from testbed.metrics.distortion import host_bound
from testbed.schemes import compute_placement
from testbed.scenario import AUTO_DILATION, MAX_TIME_DILATION, TARGETS, require_emulable

#: A run at ``time_dilation: auto`` that comes out host-bound runs again at this many times its N
#: (:func:`rerun_dilation`): its waits for processes shrink by that factor in virtual time, as its packet rates
#: per wall second do (a wait of 0.4 of a ring step, past the limit of a third, is 0.2 at twice the N) ...
AUTO_RERUN_FACTOR = 2.0
#: ... at most this many times (four times the planned N at most).
AUTO_RERUNS = 2

#: The targets a run can use (``auto`` resolves to one of them).
RUN_TARGETS = tuple(t for t in TARGETS if t != "auto")


@dataclass
class ScenarioPlan:
    """What every command plans of ``scenario`` (the module docstring)."""
    scenario: object
    placement: object                   # testbed.schemes.base.Placement
    _simulation: dict = field(default=None, init=False, repr=False)

    def simulation(self) -> dict:
        """The flow-level model's figures for the plan's placement (:func:`testbed.sim.evaluate`), computed once."""
        if self._simulation is None:
            from testbed import sim
            self._simulation = sim.evaluate(self.scenario, self.placement)
        return self._simulation


@dataclass
class RunPlan(ScenarioPlan):
    """What a run of ``scenario`` uses (the module docstring)."""
    target: str                      # resolved: one of RUN_TARGETS
    budget: PacketBudget
    time_dilation: float
    control: controller.ControlPlan  # at ``time_dilation``
    world: object                    # the scenario's wall-clock world at ``time_dilation`` (testbed/dilation.py)
    target_reason: str = ""          # why ``target`` (testbed.budget.target_choice)

    def expected_wall_s(self) -> float:
        """The wall time the whole run is expected to take: its iterations at ``time_dilation``, as the simulator
        predicts them, and the set-up and teardown of its network (:func:`testbed.budget.expected_run_wall_s`)."""
        return expected_run_wall_s(self.scenario, self.simulation(), self.time_dilation)


def plan_scenario(scenario) -> ScenarioPlan:
    """The :class:`ScenarioPlan` of ``scenario``: its placement solved."""
    return ScenarioPlan(scenario, compute_placement(scenario))


def resolve_target(requested: str, installed_only: bool = True) -> str:
    """The target a run uses (``auto`` as :func:`testbed.budget.target_choice` says); with ``installed_only``,
    an explicit bmv2 or ebpf must be able to run here."""
    return choose_target(requested, installed_only)[0]


def choose_target(requested: str, installed_only: bool = True) -> tuple:
    """(the target a run uses, why, as a phrase), checked as :func:`resolve_target` says."""
    chosen, reason = target_choice(requested)
    if chosen not in RUN_TARGETS:
        raise EnvironmentMissingError(f"unknown target {requested!r}; known: {', '.join(RUN_TARGETS)}")
    if installed_only and chosen == "bmv2" and not bmv2_installed():
        raise EnvironmentMissingError("target bmv2 needs simple_switch and p4c on PATH (see "
                                      "docs/guide/vm.md); use --target pyswitch or auto")
    if installed_only and chosen == "ebpf" and (missing := bpf_build.missing_prerequisite()):
        raise EnvironmentMissingError(f"target ebpf cannot be built here: {missing}; use --target pyswitch or auto")
    return chosen, reason


def check_emulable(scenario, placement):
    """Refuse, before any network exists, what the emulation would silently run as something else: the
    data plane never evicts for a contribution whose job reads GACKs (PA-ATP's switch side would owe it
    one), so a preempting (ESA) job with such a transport would run without ESA's preemption."""
    for job in scenario.jobs:
        if placement.jobs[job.name].collision == "preempt" and job.transport in program.PA_ATP_TRANSPORTS:
            others = sorted(set(TRANSPORTS) - set(program.PA_ATP_TRANSPORTS))
            raise PlacementError(f"jobs.{job.name}.transport: {job.scheme} preempts slots, which the data plane does "
                              f"not do for a job whose transport reads GACKs ({job.transport}); expected one of "
                              f"{', '.join(others)}")


def make_plan(scenario, target=None, installed_only: bool = True) -> RunPlan:
    """The :class:`RunPlan` of ``scenario`` on ``target`` (the scenario's when None): what only the simulator
    can run is refused, the placement solved, the time dilation picked, the control plan built at it."""
    require_emulable(scenario)
    chosen, reason = choose_target(target or scenario.target, installed_only)
    placement = plan_scenario(scenario).placement
    check_emulable(scenario, placement)
    budget = packet_budget(scenario, chosen, placement)
    return _plan_at(scenario, placement, chosen, budget, dilation_factor(scenario, budget), reason)


def _plan_at(scenario, placement, target: str, budget: PacketBudget, factor: float, reason: str) -> RunPlan:
    """The :class:`RunPlan` at time dilation ``factor``: the slowed world (whose links must be shapeable too)
    and the control plan made at it."""
    world = network_scenario(scenario, factor)
    if factor != 1:
        require_emulable(world)
    return RunPlan(scenario, placement, target, budget, factor, controller.control_plan(scenario, placement, factor),
                   world, reason)


def slowed_plan(plan: RunPlan, factor: float) -> RunPlan:
    """``plan`` at time dilation ``factor``: the same scenario, placement, target and packet budget, the control
    plan and the slowed world made again at ``factor`` (a world whose links cannot be shaped there is refused
    as :func:`make_plan` refuses it); its simulation, if made, kept."""
    slowed = _plan_at(plan.scenario, plan.placement, plan.target, plan.budget, factor, plan.target_reason)
    slowed._simulation = plan._simulation
    return slowed


def rerun_dilation(plan: RunPlan, summary: dict, reruns_done: int):
    """The time dilation to run ``plan`` again at, after a run of it ended with ``summary``, or None: only a
    scenario at ``time_dilation: auto`` whose run ended ``ok`` but host-bound
    (:func:`testbed.metrics.distortion.host_bound`), ``AUTO_RERUN_FACTOR`` times its N, at most
    ``AUTO_RERUNS`` times (``MAX_TIME_DILATION`` at most). The plan's N is the planner's prediction from this
    machine's measured costs; a host slower during the run than when it was measured (a busy neighbour, a
    virtual machine's CPU steal) makes the run host-bound, and the run is what says so."""
    if (plan.scenario.time_dilation != AUTO_DILATION or reruns_done >= AUTO_RERUNS or summary.get("status") != "ok"
            or not host_bound(summary.get("distortion_reasons") or ())):
        return None
    factor = min(AUTO_RERUN_FACTOR * plan.time_dilation, MAX_TIME_DILATION)
    return factor if factor > plan.time_dilation else None


def rerun_plan(plan: RunPlan, summary: dict, reruns_done: int):
    """The plan to run again after a run of ``plan`` ended with ``summary`` (:func:`rerun_dilation`), or None,
    also when the slowed world's links cannot be shaped (the run stands as it is)."""
    factor = rerun_dilation(plan, summary, reruns_done)
    if factor is None:
        return None
    try:
        return slowed_plan(plan, factor)
    except ScenarioError:
        return None


def describe(plan: RunPlan) -> list:
    """The plan in lines, as ``inatb validate`` and ``inatb run`` print it: the network and the jobs, the
    packet budget's busiest switch and packet costs, the switches that share a pyswitch process, the time
    dilation (the one ``auto`` picks, with the budget that binds) and the wall time it makes, and a warning
    per budget the time dilation leaves exceeded."""
    scenario, budget, factor = plan.scenario, plan.budget, plan.time_dilation
    topo = scenario.topology
    lines = [f"plan: {topo.name}: {len(topo.switches())} switches ({len(topo.programmable_switches())} "
             f"programmable), {len(topo.hosts())} hosts; {len(scenario.jobs)} job(s): " + ", ".join(
                 f"{j.name} {j.scheme} {len(j.workers)}w/{len(j.ps)}ps {j.gradient_bytes / 1e3:.1f} kB x "
                 f"{j.iterations} it" for j in scenario.jobs) + f"; target {plan.target}"
             + (f" ({plan.target_reason})" if plan.target_reason else "")]
    busiest = max(budget.switch_pps, key=budget.switch_pps.get)
    lines.append(f"busiest switch {busiest}: about {budget.switch_pps[busiest]:,.0f} packets/s while its jobs "
                 f"communicate ({budget.target})")
    lines.append(f"packet costs: {budget.costs.source}")
    if budget.training_cores:
        lines.append(f"training: the workers' real work keeps {sum(budget.training_cores.values()):.2f} cores busy at "
                     f"time dilation 1 (measured on this machine; in the machine's budget)")
    groups = budget.switch_process_pps()
    if len(groups) < len(topo.switches()):
        lines.append(f"switch processes: {len(groups)} for {len(topo.switches())} switches (switch.processes "
                     f"{scenario.switch.processes}): " + "; ".join(" ".join(group) for group in groups))
    if scenario.time_dilation == AUTO_DILATION:
        lines.append(f"time_dilation auto: {factor:g} (the tightest budget: {budget.binding()})")
    if factor != 1:
        virtual_s = expected_wall_s(scenario, plan.simulation(), 1.0)
        lines.append(f"time dilation {factor:g}: the run takes about {virtual_s * factor:,.1f} s of wall time "
                     f"({virtual_s:,.2f} s of virtual time: its iterations as the simulator predicts them, or a "
                     f"background of its own duration), plus about {run_set_up_s(scenario):,.0f} s to build and "
                     f"tear down the network")
    lines += [f"warning: {warning}" for warning in budget.warnings(factor)]
    return lines
