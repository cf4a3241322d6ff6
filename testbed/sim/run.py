"""A simulated run: the flow-level simulator's figures written as a run, so a sweep can put them in its table
and plots under the names emulated runs use (a sweep file's ``simulate: true``).

``simulate_into`` evaluates the scenario's plan (:meth:`testbed.plan.ScenarioPlan.simulation`) and writes
``OUT/<scenario>/<run id>/summary.json`` beside the whole evaluation (``simulation.json``). The summary
keeps the run's vocabulary, per job and for the run (the mean over jobs, as ``inatb run``'s):

- ``comm_time_s``: the simulator's communication time per iteration;
- ``iteration_time_s``: the job's ``compute_time`` plus that (the simulator has no compute-delay
  stragglers and no queueing between iterations);
- ``training_throughput_iter_per_s``: its inverse; ``counted_gradients_per_s``: the workers whose
  gradients count (a K-of-N scheme's participants) over the iteration time (the run's: their sum); both
  None for a job without a finite iteration time;
- ``min_gradient_sending_rate_bps``: the slowest worker's modelled rate;
- ``ps_ingress_fragments_per_iteration`` and ``fragments_sent`` per iteration;
- ``ps_ingress_bytes``, ``ina_amount_bytes``, ``communication_overhead_bytes`` (and the run's
  ``switch_egress_fragments``): totals over the job's ``iterations``, as a run's are, the simulator's
  iteration times the iterations (the run's: summed over jobs);
- ``bom_rate_bps``: Rina §III-B's Bandwidth-Occupation Model's rate for a job with one PS (the run's: the
  smallest over such jobs, None without one).

``status`` is ``ok``, ``target`` is ``simulator`` and ``simulated`` is true; nothing is distorted, as no
machine ran it. Full scale is the point (GOAT §VII-D's 192 servers, Rina's Fig. 11): no network is
built, so no root is needed either.
"""

import json
import time
from pathlib import Path

from testbed.atomic_io import write_text_atomic
from testbed.metrics.summary import iteration_rates, new_run_id, run_summary, write_summary
from testbed.plan import plan_scenario


#: What a run's summary counts over all its iterations, the simulator per iteration.
RUN_TOTALS = ("ps_ingress_bytes", "ina_amount_bytes", "communication_overhead_bytes")


def simulated_summary(scenario, simulation: dict) -> dict:
    """The summary of a simulated run of ``scenario`` from its :func:`testbed.sim.evaluate` result (through
    :func:`testbed.metrics.summary.run_summary`, an emulated run's producer too)."""
    jobs = []
    for job in scenario.jobs:
        sim = simulation["jobs"][job.name]
        comm_s = sim["comm_time_s"]
        iteration_s = job.compute_time_s + comm_s
        jobs.append({"job": job.name, "policy": job.scheme, "scheme": sim["scheme"], "transport": job.transport,
                     "workers": len(job.workers), "ps": list(job.ps), "iterations": job.iterations,
                     "comm_time_s": comm_s, "iteration_time_s": iteration_s,
                     **iteration_rates(iteration_s, len(sim["participants"] or job.workers)),
                     "min_gradient_sending_rate_bps": sim["min_sending_rate_bps"],
                     "ps_ingress_fragments_per_iteration": sim["ps_ingress_fragments"],
                     "fragments_sent": sim["sent_fragments"], "bom_rate_bps": sim["bom_rate_bps"],
                     **{key: sim[key] * job.iterations for key in RUN_TOTALS}})
    run_level = {
        "min_gradient_sending_rate_bps": simulation["min_sending_rate_bps"],
        "ps_ingress_fragments_per_iteration": simulation["ps_ingress_fragments"],
        "fragments_sent": simulation["sent_fragments"],
        "communication_overhead_bytes": sum(j["communication_overhead_bytes"] for j in jobs),   # the rest: jobs_headline
        "switch_egress_fragments": sum(simulation["jobs"][job.name]["switch_egress_fragments"] * job.iterations
                                       for job in scenario.jobs),
        "bom_rate_bps": min((j["bom_rate_bps"] for j in jobs if j["bom_rate_bps"] is not None), default=None)}
    return run_summary(scenario, "simulator", jobs, run_level=run_level, simulated=True)


def simulate_into(scenario, out_root, target=None, stream=None) -> Path:
    """Simulate ``scenario`` and write it as a run under ``out_root`` (a sweep executor's runner: ``target``
    is not the simulator's business); its directory."""
    start = time.time()
    simulation = plan_scenario(scenario).simulation()
    run_dir = Path(out_root) / scenario.name / new_run_id()
    run_dir.mkdir(parents=True)
    write_text_atomic(run_dir / "simulation.json", json.dumps(simulation, indent=1, default=str) + "\n")
    summary = simulated_summary(scenario, simulation)
    summary["wall_s"] = time.time() - start
    write_summary(run_dir, summary)
    if stream is not None:
        stream.write(f"simulated {scenario.name}: "
                     + ", ".join(f"{j['job']} {j['comm_time_s']:.4g} s per iteration" for j in summary["jobs"]) + "\n")
    return run_dir
