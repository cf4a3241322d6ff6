"""An emulated run's results: its directory's inputs, what the live run observed, and the summary, plots and
tables made from them.

The run directory holds, before the run, what it will run (:func:`write_inputs`: ``scenario.yaml``,
``placement.json``, ``entries/``, ``agents/``); during it, what the agents, meters and samplers record
(``records/``, ``metrics.jsonl``, ``switch_stats.jsonl``, ``events.jsonl``, ``iftop/``, ``background/``);
after it, what only the orchestrator saw (:class:`RunObservations`, ``observations.json``: the switches'
final counters, the CPU shares, the kernel's losses, the ring fallbacks). :func:`summarise` turns the
directory plus the run's plan into ``summary.json`` (through :func:`testbed.metrics.summary.run_summary`,
the one producer of a summary, a simulated run's too), ``iterations.csv`` and the iftop tables;
:func:`draw_plots` draws the plots from the directory alone, when they are asked for. Neither needs root
or a network, so the same run directory gives the same summary and plots again.
"""

import dataclasses
import datetime
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import yaml

from testbed import dilation
from testbed.atomic_io import write_text_atomic
from testbed.dataplane.entries import queue_rate_pps
from testbed.dataplane.wire import ina_frame_bytes
from testbed.agents.common import host_delay_path
from testbed.emulation import background
from testbed.errors import EmulationError
from testbed.metrics import counters, summary as summary_mod
from testbed.metrics.distortion import assess
from testbed.metrics.host_delay import by_role
from testbed.metrics.iftop import format_iftop_table, load_samples
from testbed.metrics.rounds import round_trip_host_delay_s, round_trip_summary
from testbed.provenance import git_commit, p4_program_sha256, run_versions

#: How many times a new run id is drawn when a run directory of that name exists.
RUN_DIR_ATTEMPTS = 5
OBSERVATIONS_FILE = "observations.json"


@dataclass
class RunObservations:
    """What only the live run saw, kept in the run directory as ``observations.json`` (epoch times in wall
    seconds; ``start_epoch_s`` the agents' common start signal, None when the run never reached it)."""
    run_id: str
    target: str
    time_dilation: float
    started_epoch_s: float
    wall_s: float = 0.0
    status: str = "ok"
    error: Optional[str] = None
    start_epoch_s: Optional[float] = None
    end_epoch_s: Optional[float] = None
    switch_stats: dict = field(default_factory=dict)        # switch -> its final counters
    switch_host_delay: dict = field(default_factory=dict)   # switch process -> its host-delay meter
    # (a pyswitch process's own; a bmv2 switch's from its switch_wait register)
    host_losses: dict = field(default_factory=dict)         # host -> {"udp_rcvbuf": n, "qdisc": n}
    cpu_shares: dict = field(default_factory=dict)          # testbed.metrics.cpu.CpuSampler.shares
    failed_workers: list = field(default_factory=list)      # killed by stragglers.failures
    fallbacks: list = field(default_factory=list)           # what each failure led to
    injection_errors: list = field(default_factory=list)
    metered_hosts: list = field(default_factory=list)       # the hosts whose interface an iftop meter watched
    #: earlier runs of the same plan that ended host-bound (testbed.plan.rerun_dilation): run id, time dilation,
    #: distortion reasons
    superseded_runs: list = field(default_factory=list)

    def write(self, run_dir: Path) -> None:
        write_text_atomic(Path(run_dir) / OBSERVATIONS_FILE,
                          json.dumps(dataclasses.asdict(self), indent=1, default=str) + "\n")

    @classmethod
    def read(cls, run_dir: Path) -> "RunObservations":
        return cls(**json.loads((Path(run_dir) / OBSERVATIONS_FILE).read_text()))


def make_run_dir(out_root: Path, scenario_name: str, run_id: str) -> tuple:
    """``(run id, its directory)``: ``out_root/<scenario>/<run id>`` (``run_id``, or a new one if that
    exists), created exclusively (an existing directory is never reused) and owner-only whatever the umask;
    always inside ``out_root`` (scenario names are checked to allow it)."""
    out_root = Path(out_root)
    try:
        (out_root / scenario_name).mkdir(parents=True, exist_ok=True)
        for _ in range(RUN_DIR_ATTEMPTS):
            run_dir = out_root / scenario_name / run_id
            try:
                os.mkdir(run_dir, 0o700)
                break
            except FileExistsError:
                run_id = summary_mod.new_run_id()
        else:
            raise EmulationError(f"--out {out_root}: could not create a new run directory under "
                                 f"{out_root / scenario_name}")
        os.chmod(run_dir, 0o700)
    except OSError as exc:
        raise EmulationError(f"--out {out_root}: cannot create the run directory: {exc.strerror or exc}") from None
    if out_root.resolve() not in run_dir.resolve().parents:
        raise EmulationError(f"--out {out_root}: the run directory {run_dir} would lie outside it")
    return run_id, run_dir


def write_inputs(run_dir: Path, plan) -> None:
    """What the run will run, written before it: the scenario, the placement, every switch's entries and
    every agent's config."""
    for sub in ("logs", "agents", "records", "entries", "iftop"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / "scenario.yaml").write_text(yaml.safe_dump(plan.scenario.resolved, sort_keys=False))
    (run_dir / "placement.json").write_text(plan.placement.to_json())
    for name, config in plan.control.switches.items():
        (run_dir / "entries" / f"{name}.txt").write_text("\n".join(config.to_cli_lines()) + "\n")
    for agent in plan.control.agents:
        agent.run_dir = str(run_dir)
        (run_dir / "agents" / f"{agent.name}.json").write_text(agent.to_json())


def ps_port_interfaces(scenario) -> list:
    """The switch interfaces facing the PSs (their tx is what the PSs receive)."""
    return [scenario.topology.host_port_interface(ps) for job in scenario.jobs for ps in job.ps]


def log_compute_delays(events, scenario, records: dict, start_epoch_s: float) -> None:
    """One ``compute_delay`` event per iteration a worker's straggler delay held up (from its records: in
    virtual time, ``t_start`` the virtual clock's epoch reading)."""
    for job in scenario.jobs:
        for w in job.workers:
            for r in records.get(w, []):
                if r.get("straggler_delay_s"):
                    events.write("compute_delay", w, t_s=r["t_start"] - start_epoch_s, iteration=r["iteration"],
                                 delay_s=r["straggler_delay_s"])


def summarise(run_dir: Path, plan, seen: RunObservations, records: dict = None) -> dict:
    """The run's summary (written as ``summary.json``) from its directory, its plan (the scenario, placement and
    packet budget it ran) and what the live run saw; also ``iterations.csv`` (and ``accuracy.csv``) and the
    iftop tables. Figures are virtual (testbed/dilation.py). ``records``: the agents' records
    (:func:`testbed.metrics.summary.load_records`), read from the directory when not given. The plots are
    drawn apart, from the directory alone (:func:`draw_plots`)."""
    scenario, placement = plan.scenario, plan.placement
    run_dir = Path(run_dir)
    records = summary_mod.load_records(run_dir) if records is None else records
    jobs = [summary_mod.job_metrics(job, records, placement.jobs[job.name].participants,
                                    scenario.metrics.warmup_iterations, failed=set(seen.failed_workers),
                                    aggregation_depth=placement.jobs[job.name].aggregation_depth())
            for job in scenario.jobs]
    metrics_path = run_dir / "metrics.jsonl"
    wall_samples = counters.load_counter_samples(metrics_path) if metrics_path.exists() else []
    ps_ports = ps_port_interfaces(scenario)
    figures, evidence = summary_mod.honest_figures(jobs, seen.switch_stats, seen.host_losses, seen.cpu_shares,
                                                   _packet_rate_bound(plan, seen, wall_samples))
    host_delay = _host_delay(run_dir, plan, seen)
    evidence.round_trip_delays = {r.job: (r, round_trip_host_delay_s(r, host_delay)) for r in plan.budget.rounds}
    distortion = assess(evidence)
    summary = summary_mod.run_summary(
        scenario, seen.target, jobs, status=seen.status, error=seen.error, distortion_reasons=distortion,
        run_level={**summary_mod.run_metrics(jobs, seen.switch_stats, counters.interface_deltas(wall_samples),
                                             ps_ports, ina_frame_bytes(scenario.switch.lanes)), **figures},
        wall_s=seen.wall_s, time_dilation=seen.time_dilation,
        packet_budget=plan.budget.to_dict(seen.time_dilation),
        host_delay={"by_role": host_delay, "round_trips": round_trip_summary(evidence.round_trip_delays)},
        background=_background_summary(run_dir, scenario, seen),
        stragglers=_straggler_summary(scenario, records, seen),
        failures=seen.fallbacks, switches=seen.switch_stats, superseded_runs=seen.superseded_runs,
        solver={name: jp.notes.get("solver") for name, jp in placement.jobs.items()},
        started=datetime.datetime.fromtimestamp(seen.started_epoch_s).isoformat(timespec="seconds"),
        run_id=seen.run_id, versions=run_versions(seen.target), git_commit=git_commit(),
        p4_program_sha256=p4_program_sha256(),
        host={"cpus": os.cpu_count(), "kernel": platform.release()})
    summary_mod.write_iterations_csv(run_dir / "iterations.csv", scenario, records)
    summary_mod.write_accuracy_csv(run_dir / "accuracy.csv", scenario, records, seen.start_epoch_s)
    _write_iftop_tables(run_dir, scenario, seen)
    summary_mod.write_summary(run_dir, summary)
    return summary


def _packet_rate_bound(plan, seen: RunObservations, wall_samples: list) -> dict:
    """bmv2's ports that its packets-per-second shaping held below their link rate (none on pyswitch, which
    shapes bytes); the links at their wall-clock rates, as the samples are."""
    if seen.target != "bmv2":
        return {}
    frame_bytes = ina_frame_bytes(plan.scenario.switch.lanes)
    caps = {port: queue_rate_pps(link.rate_bps, frame_bytes)
            for port, link in plan.world.topology.switch_port_interfaces().items()}
    return counters.packet_rate_bound_ports(wall_samples, caps, frame_bytes)


def _host_delay(run_dir: Path, plan, seen: RunObservations) -> dict:
    """Per role (worker, ps, ring, rina, switch), how long packets waited for their process and how late
    timed sends left, in virtual seconds (testbed/metrics/host_delay.py)."""
    processes = []
    for agent in plan.control.agents:
        path = host_delay_path(run_dir, agent.name)
        if path.exists():
            processes.append((agent.role, json.loads(path.read_text())))
    processes += [("switch", meter) for meter in seen.switch_host_delay.values()]
    return by_role(processes, seen.time_dilation)


def _background_summary(run_dir: Path, scenario, seen: RunObservations) -> list:
    if not scenario.background or seen.start_epoch_s is None:
        return []
    records, sink_records, windows = {}, {}, {}
    elapsed_s = (seen.end_epoch_s - seen.start_epoch_s) / seen.time_dilation  # virtual, as the flow records become

    def rows_of(pattern):
        return [dilation.virtual_record(json.loads(line), seen.time_dilation)
                for path in (run_dir / "background").glob(pattern)
                for line in path.read_text().splitlines() if line.strip()]

    for index, spec in enumerate(scenario.background):
        window = spec.duration_s or max(0.0, elapsed_s - spec.start_s)
        # Count only flows planned to start inside the window the run lasted.
        records[index] = [r for r in rows_of(f"bg{index}-source-*.jsonl") if r["start_s"] < spec.start_s + window]
        sink_records[index] = rows_of(f"bg{index}-sink-*.jsonl")
        windows[index] = window
    return background.summarise(scenario, records, windows, sink_records)


def _straggler_summary(scenario, records: dict, seen: RunObservations) -> dict:
    spec = scenario.stragglers
    if not (spec.compute_delays or spec.injections or spec.heterogeneous_links):
        return {}
    delays = {}
    for job in scenario.jobs:
        for w in job.workers:
            values = [r.get("straggler_delay_s", 0.0) for r in records.get(w, [])]
            if values:
                delays[w] = {"mean_s": sum(values) / len(values), "max_s": max(values)}
    topo = scenario.topology
    return {"compute_delay_by_worker": delays,
            "injections": [{"kind": i.kind, "target": list(i.target), "at_s": i.at_s,
                            "duration_s": i.duration_s, "rate_bps": i.rate_bps or None}
                           for i in spec.injections],
            "injection_errors": seen.injection_errors,
            "host_link_rates_bps": {h.name: topo.host_link(h.name).rate_bps for h in topo.hosts()}
            if spec.heterogeneous_links else {}}


def _write_iftop_tables(run_dir: Path, scenario, seen: RunObservations) -> None:
    for host in seen.metered_hosts:
        samples_path = run_dir / "iftop" / f"{host}.jsonl"
        if samples_path.exists():
            samples = dilation.virtual_pairs(load_samples(samples_path), seen.start_epoch_s, seen.time_dilation)
            if samples:
                table = format_iftop_table(samples, f"{host}-eth0", local_ip=scenario.topology.addresses(host))
                write_text_atomic(run_dir / "iftop" / f"{host}.txt", table + "\n")


def draw_plots(run_dir) -> list:
    """An emulated run's plots in ``plots/``, drawn from its directory alone (its ``scenario.yaml``, records,
    samples and observations; no root, no network, any time after the run): iteration times, the held-out
    accuracy of a training job, the PS ingress and the workers' sending rates (with the run's events marked),
    the switches' aggregation throughput, each as PNG and SVG. Returns the PNGs drawn. ``inatb run`` and
    ``inatb fidelity`` draw them with the run's report (:func:`testbed.reports.html.write_report`), a sweep
    for its ``run_plots``; a run made by :func:`testbed.emulation.orchestrator.run_scenario` alone has none
    until asked."""
    from testbed.metrics import plots
    from testbed.scenario import parse_scenario
    run_dir = Path(run_dir)
    scenario_path = run_dir / "scenario.yaml"
    scenario = parse_scenario(scenario_path.read_text(), str(scenario_path), [])
    seen = RunObservations.read(run_dir)
    records = summary_mod.load_records(run_dir)
    metrics_path = run_dir / "metrics.jsonl"
    wall_samples = counters.load_counter_samples(metrics_path) if metrics_path.exists() else []
    samples = dilation.virtual_samples(wall_samples, seen.start_epoch_s, seen.time_dilation)
    ps_ports = ps_port_interfaces(scenario)
    (run_dir / "plots").mkdir(exist_ok=True)
    topo = scenario.topology
    plots.plot_iterations(run_dir / "plots" / "iteration_time.png", scenario, records)
    if any(job.training for job in scenario.jobs):
        plots.plot_accuracy(run_dir / "plots" / "accuracy.png", scenario, records, seen.start_epoch_s)
    if samples:
        events_path = run_dir / "events.jsonl"
        events = [json.loads(line) for line in events_path.read_text().splitlines()] if events_path.exists() else []
        plots.plot_link_rates(run_dir / "plots" / "ps_ingress_rate.png", f"{scenario.name}: PS ingress",
                              samples, {f"to {p}": (p, "tx_bytes") for p in ps_ports}, events,
                              t0=seen.start_epoch_s)
        plots.plot_link_rates(run_dir / "plots" / "worker_send_rate.png",
                              f"{scenario.name}: what each worker sends (frames)", samples,
                              {f"{w} ({job.name})": (topo.host_port_interface(w), "rx_bytes")
                               for job in scenario.jobs for w in job.workers}, events, t0=seen.start_epoch_s)
    stat_path = run_dir / "switch_stats.jsonl"
    if stat_path.exists():
        plots.plot_aggregation_rates(run_dir / "plots" / "aggregation_rate.png",
                                     f"{scenario.name}: aggregation throughput",
                                     dilation.virtual_samples(counters.load_counter_samples(stat_path),
                                                              seen.start_epoch_s, seen.time_dilation),
                                     [sw.name for sw in topo.programmable_switches()],
                                     4 * scenario.switch.lanes, seen.start_epoch_s)
    return sorted((run_dir / "plots").glob("*.png"))


def draw_missing_plots(run_dir) -> list:
    """An emulated run's plots (:func:`draw_plots`) unless it has some already; a simulated run has none to
    draw. The PNGs it has."""
    run_dir = Path(run_dir)
    existing = sorted((run_dir / "plots").glob("*.png")) if (run_dir / "plots").is_dir() else []
    if existing or not (run_dir / OBSERVATIONS_FILE).is_file():
        return existing
    return draw_plots(run_dir)
