"""The emulation agrees with the flow-level model: fragment counts within 10%, rates and communication
times within 25%, for ps, atp, goat and grid on GOAT's testbed and on a leaf-spine with two jobs, and for
the four transports on PA-ATP's testbed (two jobs over four parallel paths, each flow on the path the
controller's entries pick; pa-atp's and strawasyn's fragment counts are shown, not judged:
testbed/fidelity.py says why), PA-ATP's GACKs' load on the links toward the workers, and RAR and H-AR
on Rina's two-rack testbed.

The scenarios run without compute-delay stragglers (the simulator models synchronous starts; ATP's
fragment counts depend on arrival order, GOAT Fig. 2), and leave the first iteration, the transports'
slow start, out of times, rates and the per-iteration PS ingress (``metrics.warmup_iterations``).
"""

import dataclasses
import math
from pathlib import Path

import pytest
from test_quickstart import assert_clean

from testbed.emulation.orchestrator import run_scenario
from testbed.fidelity import RATE_TOLERANCE, compare, format_fidelity
from testbed.metrics.distortion import HOST_BOUND_REASONS, host_bound_reasons
from testbed.plan import make_plan, slowed_plan
from testbed.scenario import AUTO_DILATION, load_scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
GOAT_FIDELITY = REPO / "scenarios" / "papers" / "goat" / "fidelity.yaml"
PA_ATP_FIDELITY = REPO / "scenarios" / "papers" / "pa-atp" / "fidelity.yaml"
INART_EMULATION = REPO / "scenarios" / "papers" / "inart" / "emulation.yaml"

# Two jobs spanning both racks and sharing every switch; each job's PS in the rack of the other's.
LEAF_SPINE_TWO_JOBS = """\
version: 1
name: fidelity-leaf-spine
seed: 2
scale: 0.00005
run_timeout: 180s
topology: {kind: leaf-spine, link_rate: 100Gbps, spines: 2, leaves: 2, hosts_per_leaf: 5}
jobs:
  - {name: a, gradient_size: 2GB, workers: [h1, h2, h6, h7], ps: [h8], policy: goat, iterations: 7,
     compute_time: 20ms, submodels: 4}
  - {name: b, gradient_size: 2GB, workers: [h3, h4, h9, h10], ps: [h5], policy: goat, iterations: 7,
     compute_time: 20ms, submodels: 4}
metrics: {warmup_iterations: 1}
"""

SCHEME_NAMES = ("ps", "atp", "goat", "grid")


def at_the_planners_dilation(scenario):
    """``scenario`` at the time dilation ``auto`` picks for this machine, unless it names one of its own."""
    if scenario.time_dilation != 1:
        return scenario
    return dataclasses.replace(scenario, time_dilation=AUTO_DILATION)


def assert_not_host_bound(summary: dict, kinds=HOST_BOUND_REASONS):
    """A run the planner chose the dilation for is neither CPU- nor latency-bound (the distorted mark's
    reasons of ``kinds``), after the runs again at a larger N that an auto run makes of a host-bound one
    (testbed.plan.rerun_dilation, shown with the failure): if it is, the planner chose too low for this
    machine, and that is the failure (with the detector's figures), not the figures."""
    host_bound = host_bound_reasons(summary["distortion_reasons"], kinds)
    assert not host_bound, (f"time dilation {summary['time_dilation']:g} (the planner's tightest budget: "
                            f"{summary['packet_budget']['binding']}) left the run host-bound: {host_bound}; "
                            f"host delay per round trip: {summary['host_delay']['round_trips']}; "
                            f"earlier runs: {summary['superseded_runs']}")


def started_plan(scenario, start_at=None):
    """The plan of ``scenario`` on pyswitch, started at ``start_at(planner's N)`` when given and the scenario is
    at ``auto`` (where a test knows the planner picks too low for it). The scenario stays at ``auto``, so a run
    that ends host-bound runs again slower, as every auto run does (a host slower than when its costs were
    measured)."""
    plan = make_plan(scenario, "pyswitch")
    if start_at is None or scenario.time_dilation != AUTO_DILATION:
        return plan
    return slowed_plan(plan, start_at(plan.time_dilation))


def check_fidelity(scenario, tmp_path, quiet, attempts=2, host_bound=HOST_BOUND_REASONS, start_at=None):
    """Emulate (at the planner's time dilation, :func:`at_the_planners_dilation`, or from ``start_at``,
    :func:`started_plan`) and simulate ``scenario``; the run not host-bound (:func:`assert_not_host_bound` of
    the ``host_bound`` reasons) and every row within its bound. Emulated times vary from run to run on two
    shared cores (a congestion-window cut early or late in an iteration), so a run outside the bounds is
    repeated once; both runs' tables are shown if both miss, with what the distorted mark said of each."""
    scenario = at_the_planners_dilation(scenario)
    plan = started_plan(scenario, start_at)
    simulation = plan.simulation()      # of the placement the run uses, solved once (InArt's takes seconds)
    tables = []
    for attempt in range(attempts):
        summary = run_scenario(scenario, out_root=tmp_path / f"run{attempt}", plan=plan, stream=quiet).summary
        assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
        assert_clean()
        assert_not_host_bound(summary, host_bound)
        result = compare(summary, simulation)
        if result["all_within"]:
            return
        tables.append(format_fidelity(result) + f"\ndistorted: {summary['distortion_reasons']}")
    raise AssertionError("outside the bounds in every run:\n" + "\n\n".join(tables))


@pytest.mark.parametrize("scheme", SCHEME_NAMES)
def test_goat_testbed_agrees_with_the_simulator(scheme, emulation, tmp_path, quiet):
    check_fidelity(load_scenario(GOAT_FIDELITY, [f"policy={scheme}"]), tmp_path, quiet)


@pytest.mark.parametrize("scheme", SCHEME_NAMES)
def test_leaf_spine_with_two_jobs_agrees_with_the_simulator(scheme, emulation, tmp_path, quiet):
    check_fidelity(parse_scenario(LEAF_SPINE_TWO_JOBS, "fidelity-leaf-spine.yaml", [f"policy={scheme}"]),
                   tmp_path, quiet)


# pa-atp's and strawasyn's fragment counts are shown, not judged (testbed/fidelity.py), and their rates are
# judged from below only: two jobs share two of the four paths, which asynchronous windows need not split
# fairly. Their times are judged. When the jobs' iterations drift apart a job's workers send at more than
# the fair share the model gives (1.01-1.14x the modelled rate over two sets of runs of the four
# transports), so a run beyond the bounds is tried twice more.
@pytest.mark.parametrize("transport", ["atp", "switchml", "pa-atp", "strawasyn"])
def test_pa_atp_testbed_agrees_with_the_simulator(transport, emulation, tmp_path, quiet):
    check_fidelity(load_scenario(PA_ATP_FIDELITY, [f"transport={transport}"]), tmp_path, quiet, attempts=3)


def test_pa_atps_gacks_cost_what_the_simulator_says(emulation, tmp_path, quiet):
    """One job, each worker on a path of its own, no background: the links toward the workers carry a
    RESULT per fragment and, for pa-atp, a GACK (80 bytes beside 336), which the simulator makes cost pa-atp
    1.23x atp's communication time. The ratio of the two runs' times is held within 5% of the simulator's
    (the fidelity bound, 25%, on each time alone would not tell a model without GACKs from one with them):
    the ratio takes off what the host adds to every iteration of both runs alike (at the
    planner's N a run's own time read 1.05-1.08x the simulator's one run in three or four), and each time is
    held to the fidelity bound. The runs start at twice the dilation ``auto`` picks (:func:`started_plan`), as a
    bound five times tighter wants more headroom than the planner keeps for the fidelity bound."""
    comm_time_s = {}
    for transport in ("atp", "pa-atp"):
        overrides = [f"transport={transport}", "background=[]", "jobs.0.model=vgg19", "jobs.0.compute_time=0s",
                     "jobs.0.iterations=8", "metrics.warmup_iterations=1"]
        scenario = at_the_planners_dilation(load_scenario(PA_ATP_FIDELITY.with_name("single-job.yaml"), overrides))
        plan = started_plan(scenario, start_at=lambda planned: 2 * planned)
        simulated = plan.simulation()["jobs"]["job"]["comm_time_s"]
        summary = run_scenario(scenario, out_root=tmp_path, plan=plan, stream=quiet).summary
        assert summary["status"] == "ok" and summary["aggregation_exact"], summary["error"]
        assert_clean()
        assert_not_host_bound(summary)
        emulated = summary["jobs"][0]["comm_time_s"]
        assert emulated == pytest.approx(simulated, rel=RATE_TOLERANCE), transport
        comm_time_s[transport] = (emulated, simulated)
    (atp_emulated, atp_simulated), (pa_atp_emulated, pa_atp_simulated) = comm_time_s["atp"], comm_time_s["pa-atp"]
    assert pa_atp_emulated / atp_emulated == pytest.approx(pa_atp_simulated / atp_simulated, rel=0.05), comm_time_s


@pytest.mark.parametrize("overrides", [["policy=rar"], ["policy=h-ar"], ["policy=rina", "topology.programmable=none"],
                                       ["policy=rina", "topology.programmable=[t1]"], ["policy=rina"]],
                         ids=["rar", "h-ar", "rina-0%", "rina-50%", "rina-100%"])
def test_rinas_testbed_ring_all_reduce_agrees_with_the_simulator(overrides, emulation, tmp_path, quiet):
    """RAR, H-AR and Rina with no, one and both ToRs summing their racks (Rina's switch egress included: its
    racks' sums and finished chunks, not its header-only pulls)."""
    check_fidelity(load_scenario(REPO / "scenarios" / "papers" / "rina" / "testbed.yaml",
                                 overrides + ["jobs.0.iterations=6", "metrics.warmup_iterations=1"]),
                   tmp_path, quiet)


def test_atp_at_every_level_on_rinas_fat_tree_agrees_with_the_simulator(emulation, tmp_path, quiet):
    """Every switch of the fat-tree k=4 programmable and aggregating (``levels: all``, 16 workers, the PS beside
    h16's worker): VGG16, whose 111 fragments per worker let the links, not a few frames' latency, set the
    time (ResNet50's 20 read 0.65x the model's communication time with every count exact). At N = 4, or the
    planner's N where this machine needs more (held to one core: 6; at 4 it read 1.55x, marked by host delay)."""
    scenario = load_scenario(REPO / "scenarios" / "papers" / "rina" / "fat-tree-k4.yaml",
                             ["scale=0.00005", "policy=atp", "jobs.0.ps=[h16]", "jobs.0.model=vgg16",
                              "topology.programmable.count=20", "jobs.0.policy_options.atp.levels=all",
                              "jobs.0.iterations=6"])
    check_fidelity(scenario, tmp_path, quiet, start_at=lambda planned: max(4, planned))


def test_inarts_54_server_fat_tree_at_1_1000_agrees_with_the_simulator(emulation, tmp_path, quiet):
    # InArt §5.3 with ResNet-50 at the dilation auto picks: 45 switches, 54 agents, every switch's aggregation
    # capacity exceeded, which refuses whole fragments (cut per packet, the siblings of a refused contribution
    # waited in their slot for a retransmission: 3.5% resent spuriously, 1.2-4x the model's time).
    # At the dilation auto picks (12 here) the switch processes, each running several of the 45 switches, take
    # their ports' bursts of frames faster than they handle them: a round trip's five switches both ways waited
    # 5-8 ms, 41-59% of a 13.4 ms window (marked, 1.33x and 2.5x the model's communication time in two
    # runs). The planner's latency budget plans on the machine's load, not on a shared process's bursts; until
    # it does, this test starts at 1.5 times auto's N (18 here: 0.21 of a window, 1.07x), and a run host-bound
    # there runs again at twice that, as an auto run does (on a 2-core host a third slower, 24 left a round trip
    # waiting 55% of a window). The machine stays about 90% busy at any N (99 processes idling, their sampler
    # and htb's timers), so the CPU mark is not judged.
    scenario = load_scenario(INART_EMULATION, ["jobs.0.model=resnet50"])
    check_fidelity(scenario, tmp_path, quiet, host_bound=("host delay",),
                   start_at=lambda planned: math.ceil(1.5 * planned))
