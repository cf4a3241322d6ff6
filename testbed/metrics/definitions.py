"""Every key of a run's ``summary.json``: its unit and what it means, one definition per metric.

The run's summary (:mod:`testbed.emulation.orchestrator`), the simulator's
(:func:`testbed.sim.run.simulated_summary`) and the metric reference of the
documentation (``docs/reference/metrics.md``, written by
:mod:`testbed.reference`) all read these tables; a key a summary gains
without a definition here fails a test. Units: ``s`` seconds (virtual
seconds under time dilation), ``b/s`` bits per second, ``bytes``,
``packets``, ``fragments`` (INA frames of one fragment each), ``share``
(0 to 1), ``count``, ``number`` (dimensionless, not a count: a loss),
``bool``, ``text``, ``object`` (a nested table, described in its entry),
``list``.
"""

from dataclasses import dataclass


EVERY_RUN, EMULATED, SIMULATED, FIDELITY = "every run", "emulated runs", "simulated runs", "`inatb fidelity` runs"


@dataclass(frozen=True)
class Metric:
    """One key of a summary: its unit, what it means, and which runs fill it."""
    unit: str
    meaning: str
    filled_by: str = EVERY_RUN         # EVERY_RUN, EMULATED, SIMULATED or FIDELITY

    @property
    def is_number(self) -> bool:
        """Whether its value is one number (or a bool): a column a sweep's table has and can plot."""
        return self.unit not in NOT_NUMBER_UNITS


#: Units of a value that is not one number: no column of a sweep's table, nothing a sweep plots.
NOT_NUMBER_UNITS = ("text", "object", "list")


#: The top level of ``summary.json``.
SUMMARY_METRICS = {
    "schema_version": Metric("count", "the version of this layout (`SUMMARY_SCHEMA_VERSION`, "
                                      "testbed/metrics/summary.py), raised when a key is removed or renamed or "
                                      "its meaning or unit changes; a new key leaves it"),
    "scenario": Metric("text", "the scenario's `name`"),
    "status": Metric("text", "`ok`, `stalled`, `interrupted` or `failed`"),
    "error": Metric("text", "the first line of what ended the run, or null"),
    "distorted": Metric("bool", "the run measured the emulator, not the scheme: a CPU-bound or latency-bound "
                                "process, loss outside the modelled queues, spurious retransmissions "
                                "([Fidelity](../guide/fidelity.md))"),
    "distortion_reasons": Metric("list", "one line per reason `distorted` is true"),
    "target": Metric("text", "`pyswitch`, `bmv2`, `ebpf` (emulated runs) or `simulator`"),
    "policy": Metric("text", "the jobs' schemes (their `policy:`), comma-separated"),
    "iterations": Metric("count", "iterations the scenario asked for, all jobs"),
    "wall_s": Metric("s", "wall-clock seconds from the common start to the last agent's end (not virtual)",
                     EMULATED),
    "time_dilation": Metric("count", "the factor N the network ran slower by "
                                     "([Time dilation](../guide/time-dilation.md))", EMULATED),
    "packet_budget": Metric("object", "the planner's prediction: the budget that binds, each process's "
                                      "packet rate and the N it needs", EMULATED),
    "host_delay": Metric("object", "`by_role`: per role (`worker`, `ps`, `ring`, `switch` ...) `count`, `mean_s`, "
                                   "`p99_s`, `max_s` of `receive_wait` (kernel timestamp to handling; a bmv2 switch: "
                                   "receipt to egress queue, register `switch_wait`, no `p99_s`) and "
                                   "`send_lateness` (a timer's wake-up after its due time), virtual seconds; "
                                   "`round_trips`: per job what one round trip waited, against its round "
                                   "(`share_of_round`) and its communication (`share_of_comm`)", EMULATED),
    "aggregation_exact": Metric("bool", "every job completed and every aggregate equalled the exact sum of its "
                                        "workers' gradients", EMULATED),
    "ps_ingress_bytes": Metric("bytes", "INA frames the PSs received, summed over jobs (GOAT's PS aggregation "
                                        "overhead)"),
    "ps_ingress_link_bytes": Metric("bytes", "every byte into the PSs' links, by the kernel's counters",
                                    EMULATED),
    "ina_amount_bytes": Metric("bytes", "GOAT §VII-A's in-network aggregation amount, summed over jobs"),
    "iteration_time_s": Metric("s", "mean over jobs of each job's `iteration_time_s`"),
    "comm_time_s": Metric("s", "mean over jobs of each job's `comm_time_s`"),
    "gradient_sending_rate_bps": Metric("b/s", "mean over jobs of each job's `gradient_sending_rate_bps`",
                                        EMULATED),
    "training_throughput_iter_per_s": Metric("count", "iterations per second: mean over jobs of 1 / "
                                                      "`iteration_time_s`"),
    "counted_gradients_per_s": Metric("count", "gradients that count per second (a K-of-N scheme's "
                                               "participants), summed over jobs"),
    "switch_egress_fragments": Metric("fragments", "gradient packets (not RESULTs) leaving switch ports "
                                                   "(GOAT Fig. 2's count)"),
    "communication_overhead_bytes": Metric("bytes", "`switch_egress_fragments` in frame bytes: GOAT §IV's "
                                                    "communication overhead"),
    "switch_tx_link_bytes": Metric("bytes", "every byte leaving switch ports, by the kernel's counters",
                                   EMULATED),
    "fragments_sent": Metric("fragments", "original fragments the workers sent, all jobs and iterations"),
    "retransmitted_packets": Metric("packets", "the workers' retransmissions, all jobs", EMULATED),
    "retransmission_ratio": Metric("share", "`retransmitted_packets` / `fragments_sent`", EMULATED),
    "spurious_retransmissions": Metric("packets", "retransmissions of a contribution its aggregation node "
                                                  "already held, less a transport's deliberate releases",
                                       EMULATED),
    "spurious_retransmission_ratio": Metric("share", "`spurious_retransmissions` / `fragments_sent`",
                                            EMULATED),
    "queue_drops": Metric("object", "per switch and port, tail drops of the modelled egress queues "
                                    "(pyswitch and ebpf count them, bmv2 does not)", EMULATED),
    "impairment_drops": Metric("object", "per switch and port, packets an injected impairment dropped",
                               EMULATED),
    "unmodelled_losses": Metric("object", "per place, packets lost outside the modelled queues and impairments "
                                          "(a socket or qdisc of the machine)", EMULATED),
    "packet_rate_bound_ports": Metric("object", "bmv2 ports held below their link's rate by their packets-per-"
                                                "second shaper", EMULATED),
    "cpu": Metric("object", "per process `mean` and `peak` share of a core (and of its busiest thread, and of "
                            "the time it waited for a core), the machine's `mean` and `peak` over `cores`",
                  EMULATED),
    "jobs": Metric("list", "one entry per job: the job metrics below"),
    "background": Metric("list", "per background traffic spec: flows, offered and achieved load, flow "
                                 "completion times (empty without `background`)", EMULATED),
    "stragglers": Metric("object", "per worker the compute delay drawn (`mean_s`, `max_s`) and the injections "
                                   "applied (empty without `stragglers`)", EMULATED),
    "failures": Metric("list", "per worker failure (`stragglers.failures`) what it led to: the worker, its job, and "
                                "for Rina the ring generation the job fell back to and the iteration it redid",
                       EMULATED),
    "superseded_runs": Metric("list", "earlier runs of the same plan at `time_dilation: auto` that ended host-bound "
                                      "and were run again slower ([Time dilation](../guide/time-dilation.md"
                                      "#when-an-auto-run-comes-out-host-bound)): each one's `run_id`, `time_dilation` "
                                      "and `distortion_reasons` (empty for most runs)", EMULATED),
    "switches": Metric("object", "per switch its counters: aggregated, bypassed, emitted, dropped ... "
                                 "([Data plane](../design/data-plane.md))", EMULATED),
    "seed": Metric("count", "the scenario's seed"),
    "scale": Metric("share", "the scenario's scale"),
    "solver": Metric("object", "per job the LP solver and its status, for the LP schemes", EMULATED),
    "started": Metric("text", "when the run started, ISO 8601, local time", EMULATED),
    "run_id": Metric("text", "the run directory's name", EMULATED),
    "versions": Metric("object", "the Python packages the run used, with versions; on bmv2 also `p4c` and "
                                 "`simple_switch` (the first line of their `--version`, null when not on PATH)",
                       EMULATED),
    "git_commit": Metric("text", "the commit of the testbed that ran (`-dirty`: with changes to its tracked code, "
                                 "P4 program or scenarios), or `unknown` outside a clone", EMULATED),
    "p4_program_sha256": Metric("text", "SHA-256 of the P4 program's sources (`p4/ina.p4` and what it includes: "
                                        "what bmv2 compiles, pyswitch models), or `unknown` without them",
                                EMULATED),
    "host": Metric("object", "the machine: `cpus`, `kernel`", EMULATED),
    "fidelity": Metric("object", "`inatb fidelity`'s rows: emulated, simulated, ratio and bound per metric",
                       FIDELITY),
    "simulated": Metric("bool", "true: the figures come from the flow-level model", SIMULATED),
    "min_gradient_sending_rate_bps": Metric("b/s", "the slowest worker's rate over every job", SIMULATED),
    "ps_ingress_fragments_per_iteration": Metric("fragments", "INA frames the PSs receive per iteration, all jobs",
                                                 SIMULATED),
    "bom_rate_bps": Metric("b/s", "the slowest job's Rina §III-B Bandwidth-Occupation Model rate",
                           SIMULATED),
}

#: One entry of the summary's ``jobs``.
JOB_METRICS = {
    "job": Metric("text", "the job's `name`"),
    "policy": Metric("text", "the job's scheme"),
    "scheme": Metric("text", "the job's scheme as the placement resolved it", SIMULATED),
    "transport": Metric("text", "the job's transport"),
    "workers": Metric("count", "the job's workers"),
    "ps": Metric("list", "the job's parameter servers"),
    "participants": Metric("list", "the workers whose gradients count (a K-of-N scheme's participants; every "
                                   "worker otherwise), less failed ones", EMULATED),
    "failed_workers": Metric("list", "workers a `stragglers.failures` entry stopped", EMULATED),
    "discarded_packets": Metric("packets", "contributions the PS discarded (K-of-N: from workers left out)",
                                EMULATED),
    "iterations": Metric("count", "iterations the job asked for"),
    "iterations_completed": Metric("count", "iterations every PS (or ring worker) completed", EMULATED),
    "aggregation_exact": Metric("bool", "every iteration completed and every aggregate exact", EMULATED),
    "mismatched_fragments": Metric("fragments", "fragments whose aggregate differed from the exact sum",
                                   EMULATED),
    # a job with `training:` only (testbed/training)
    "models_identical": Metric("bool", "a job with `training:`: every worker's parameter hash equal at every "
                                       "iteration (a difference fails the run at once)", EMULATED),
    "diverged_iterations": Metric("list", "a job with `training:`: the iterations at which the workers' "
                                          "parameter hashes differed", EMULATED),
    "final_accuracy": Metric("share", "a job with `training:`: held-out accuracy after the last update", EMULATED),
    "final_loss": Metric("number", "a job with `training:`: mean cross-entropy on the held-out set after the "
                                  "last update", EMULATED),
    "target_accuracy": Metric("share", "a job with `training:`: its `training.target_accuracy`, or null",
                              EMULATED),
    "time_to_accuracy_s": Metric("s", "a job with `training:`: virtual time from the job's first iteration to "
                                      "the first evaluation at or above `target_accuracy`; null if never",
                                 EMULATED),
    "clipped_values": Metric("count", "a job with `training:`: gradient values clipped to their fixed-point "
                                      "bound (testbed/training/fixed_point.py)", EMULATED),
    "compute_overrun_s": Metric("s", "a job with `training:`: the most a worker's real computation exceeded "
                                     "`compute_time` in one iteration (wall seconds)", EMULATED),
    "iteration_time_s": Metric("s", "mean time per iteration after the warm-up: between consecutive global "
                                    "aggregations at the PS (the slowest PS's mean), or a ring worker's compute "
                                    "plus its steps (the slowest worker's mean)"),
    "comm_time_s": Metric("s", "mean communication time per iteration after the warm-up: a worker's first "
                               "fragment sent to its last result received, mean over workers"),
    "training_throughput_iter_per_s": Metric("count", "iterations per second: 1 / `iteration_time_s`"),
    "counted_gradients_per_s": Metric("count", "participants / `iteration_time_s` (GOAT §VII-C's throughput "
                                               "divided by the batch size)"),
    "gradient_sending_rate_bps": Metric("b/s", "mean over workers of frame bits sent per second of sending, "
                                               "as acknowledgements clock it: from the iteration's first "
                                               "acknowledgement (GACK, RESULT or ring ACK) to the last frame out, "
                                               "plus one frame time (the first window, sent before anything "
                                               "could clock it, is left out)", EMULATED),
    "min_gradient_sending_rate_bps": Metric("b/s", "the slowest worker's rate (GRID's metric)"),
    "bom_rate_bps": Metric("b/s", "Rina §III-B's Bandwidth-Occupation Model rate", SIMULATED),
    "ps_ingress_bytes": Metric("bytes", "INA frames the job's PSs received"),
    "ps_ingress_packets": Metric("packets", "INA frames the job's PSs received", EMULATED),
    "ps_ingress_fragments_per_iteration": Metric("fragments", "INA frames the PSs received per completed "
                                                              "iteration after the warm-up (GOAT Fig. 2's count, "
                                                              "in the steady state a flow-level model has)"),
    "worker_sent_bytes": Metric("bytes", "frame bytes the counted workers sent, retransmissions included",
                                EMULATED),
    "gradient_frame_bytes": Metric("bytes", "every worker's fragments of every iteration counted once, in "
                                            "frame bytes", EMULATED),
    "ina_amount_bytes": Metric("bytes", "every worker's fragments of every iteration counted once, in frame "
                                        "bytes, less `ps_ingress_bytes`, at least 0 (GOAT §VII-A)"),
    "communication_overhead_bytes": Metric("bytes", "the job's gradient packets leaving switch ports, in frame "
                                                    "bytes", SIMULATED),
    "fragments_sent": Metric("fragments", "original fragments the job's workers sent"),
    "retransmitted_packets": Metric("packets", "the job's workers' retransmissions", EMULATED),
    "retransmission_ratio": Metric("share", "`retransmitted_packets` / `fragments_sent`", EMULATED),
    "spurious_retransmissions_at_ps": Metric("packets", "retransmissions a PS already held", EMULATED),
    "bypassed_packets": Metric("packets", "frames that reached a PS past a switch that could not aggregate "
                                          "them", EMULATED),
    "duplicate_packets_at_ps": Metric("packets", "frames a PS had already counted", EMULATED),
    "ce_marked_packets_at_ps": Metric("packets", "frames that reached a PS marked CE by a switch queue",
                                      EMULATED),
    "transport_events": Metric("object", "the workers' transport events: `timeouts`, `fast_retransmits`, "
                                         "`ecn_echoes`, `window_cuts`, `releases`, `retx_before_first_result`",
                               EMULATED),
    "straggler_wait_retransmissions": Metric("packets", "resends before an iteration's first RESULT by a job "
                                                        "without a straggler allowance", EMULATED),
    "aggregation_depth": Metric("count", "the most aggregation nodes a gradient passes", EMULATED),
}


def job_metric_name(job: str, metric: str) -> str:
    """A job's ``metric`` beside the run's: ``<job>.<metric>`` (a sweep table's column, a comparison's row)."""
    return f"{job}.{metric}"


def split_job_metric(name: str) -> tuple:
    """(job, metric) of a ``<job>.<metric>`` name (:func:`job_metric_name`), (None, name) of a run's metric."""
    job, dot, metric = name.rpartition(".")
    return (job, metric) if dot else (None, name)


def metric_definition(name: str):
    """The definition of a run's metric, or of a job's named ``<job>.<metric>``; None for neither."""
    if name in SUMMARY_METRICS:
        return SUMMARY_METRICS[name]
    job, metric = split_job_metric(name)
    return JOB_METRICS.get(metric) if job else None


def undefined_keys(summary: dict) -> list:
    """The keys of ``summary`` (and of each of its jobs) that these tables do not define."""
    missing = [key for key in summary if key not in SUMMARY_METRICS]
    for job in summary.get("jobs", []):
        missing += [f"jobs[].{key}" for key in job if key not in JOB_METRICS and f"jobs[].{key}" not in missing]
    return missing
