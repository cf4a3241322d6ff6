"""Run one scenario end to end on an emulated network: the orchestrator only sequences.

Order of a run (each step's output is kept in the run directory):

1. the plan comes made (:func:`testbed.plan.make_plan`: the placement, the control plan, the time
   dilation; nothing here computes them); write what will run (:func:`results.write_inputs`);
2. take the run lock, record the run's state, build the Mininet network with the target's switch nodes,
   install every switch config through its SwitchRuntime (:class:`testbed.emulation.live.LiveRun` holds
   what the run makes from here on);
3. start the meters and the agents in their hosts and wait until all announce readiness
   (:mod:`testbed.emulation.launch`), write the start signal, start the background, the straggler
   injections (:mod:`testbed.emulation.injections`) and the CPU sampler, and watch the run until every
   worker has finished (:mod:`testbed.emulation.monitor`);
4. read the switches' final counters, stop everything, delete every interface, process and state entry
   the run created (also on failure and Ctrl-C), then write what the run observed and its summary, plots
   and tables (:mod:`testbed.emulation.results`);
5. started through sudo, hand the run directory (and the directories made on the way to it) to the user
   who typed it (:mod:`testbed.ownership`), whatever the run's end.

Nothing here knows which target runs.
"""

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testbed.emulation.host_checks import check_host_supports, preflight
from testbed.emulation.interrupts import InterruptLatch, interrupts_deferred
from testbed.emulation.live import LiveRun
from testbed.emulation.network import mininet_log_to
from testbed.emulation.progress import ReaderSafeStream
from testbed.emulation.results import RunObservations, log_compute_delays, make_run_dir, summarise, write_inputs
from testbed.emulation.state import RunLock, RunState, cleanup_stale
from testbed.errors import EmulationError, RunStalled
from testbed.metrics.distortion import host_bound_reasons
from testbed.metrics.summary import load_records, new_run_id
from testbed.ownership import handing_over, invoking_user, missing_dirs, new_tree
from testbed.plan import make_plan, rerun_plan


def run_status(error) -> str:
    """``ok``, or why not: ``stalled`` (no progress for the stall bound), ``interrupted`` (Ctrl-C or a
    termination signal), ``failed`` (anything else: the ``error`` field says what)."""
    if error is None:
        return "ok"
    if isinstance(error, RunStalled):
        return "stalled"
    return "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"


@dataclass
class RunResult:
    run_dir: Path
    summary: dict


class Run:
    """One emulated run of a plan (:class:`testbed.plan.RunPlan`); ``execute`` always leaves the machine
    clean. Under a time dilation N the network side builds and times the slowed world; the agents, the
    placement and every figure reported keep the scenario's virtual values (testbed/dilation.py)."""

    def __init__(self, plan, out_root: Path, stream=sys.stderr, on_finished=None, superseded=()):
        self.plan, self.out_root, self.on_finished = plan, Path(out_root), on_finished
        self.stream = ReaderSafeStream(stream)    # a reader that goes away silences the display, not the run
        self.seen = RunObservations(new_run_id(), plan.target, plan.time_dilation, started_epoch_s=time.time(),
                                    superseded_runs=list(superseded))
        self.interrupts = InterruptLatch()
        self.live = None

    def say(self, text):
        self.stream.write(text + "\n")
        self.stream.flush()

    def execute(self) -> RunResult:
        invoking_user()                # a bad SUDO_UID is refused before anything is written
        substitutes = check_host_supports(self.plan.scenario)
        name, t0, error = self.plan.scenario.name, time.monotonic(), None
        made_on_the_way = missing_dirs(self.out_root / name)
        lock = RunLock()
        lock.acquire(f"scenario {name}, run {self.seen.run_id}")
        try:
            self.seen.run_id, run_dir = make_run_dir(self.out_root, name, self.seen.run_id)
        except BaseException:
            lock.release()
            raise
        try:
            with contextlib.ExitStack() as stack:     # left in reverse: teardown, Mininet's log, the lock
                stack.callback(lock.release)
                write_inputs(run_dir, self.plan)
                stack.enter_context(mininet_log_to(run_dir / "logs" / "mininet.log"))
                self.live = LiveRun(self.plan, run_dir, self._prepare_host(), substitutes, self.interrupts,
                                    self.say, self.stream)
                stack.callback(self._teardown)
                with self.interrupts.installed():
                    self.live.build()
                    self.live.start(self.seen)
                    self.live.watch(self.seen)
        except BaseException as exc:
            error = exc
            raise
        finally:
            result = self._finish(run_dir, made_on_the_way, time.monotonic() - t0, error)
        return result

    def _prepare_host(self) -> RunState:
        """Leftovers of an earlier run removed, interfaces of this run's names refused when something else
        made them; the run's state record begun."""
        for line in cleanup_stale():
            self.say(f"leftovers of an earlier run: {line}")
        clashes = [i for i in self.plan.world.topology.switch_port_interfaces()
                   if Path(f"/sys/class/net/{i}").exists()]
        if clashes:
            raise EmulationError(f"interfaces {', '.join(clashes[:4])} already exist and were not created "
                                 f"by a run of this tool; remove them (ip link del NAME) before running")
        return RunState(self.seen.run_id)

    def _teardown(self):
        """Everything the run created removed; interrupts are held off meanwhile (a second Ctrl-C must
        not leave half a network behind)."""
        with interrupts_deferred():
            failures = self.live.stop(self.seen)
        if failures:
            self.say("cleanup problems (run 'inatb cleanup'): " + "; ".join(failures))

    def _finish(self, run_dir: Path, made_on_the_way: list, wall_s: float, error):
        """What the run observed written beside its records, and the summary made from them, whole even if
        Ctrl-C comes again meanwhile (it is delivered after); then, started through sudo, handed to the user
        who typed it, whatever came first; then ``on_finished`` (a failed run's results too). The
        :class:`RunResult`, or None when the summary could not be made after the run's own error."""
        result = None
        try:
            with interrupts_deferred(), handing_over(new_tree(run_dir, made_on_the_way), say=self.say):
                try:
                    records = load_records(run_dir)
                    result = RunResult(run_dir, summarise(run_dir, self.plan,
                                                          self._observed(run_dir, records, wall_s, error), records))
                except Exception:  # noqa: BLE001 - never mask the run's own error
                    if error is None:
                        raise
        finally:      # also when a Ctrl-C held meanwhile is delivered at the block's end
            if result is not None and self.on_finished is not None:
                self.on_finished(result)
        return result

    def _observed(self, run_dir: Path, records: dict, wall_s: float, error) -> RunObservations:
        """The run's observations completed with its end and what its live parts saw, and written."""
        seen = self.seen
        seen.wall_s, seen.status = wall_s, run_status(error)
        seen.error = None if error is None else (str(error) or type(error).__name__).splitlines()[0]
        if seen.start_epoch_s is not None and seen.end_epoch_s is None:
            seen.end_epoch_s = time.time()
        if self.live is not None:
            self.live.observe(seen)
            if self.live.events is not None:
                log_compute_delays(self.live.events, self.plan.scenario, records, seen.start_epoch_s)
        seen.write(run_dir)
        return seen


def run_scenario(scenario, out_root="results", target=None, stream=sys.stderr, plan=None,
                 on_finished=None, run_class=Run) -> RunResult:
    """Plan ``scenario`` on ``target`` (:func:`testbed.plan.make_plan`; or run the ``plan`` given, made
    once by the caller), validate the environment, then run it (a ``run_class``, :class:`Run`'s interface);
    returns the run directory and summary. ``on_finished(RunResult)`` is called once the results are written,
    also when the run then raises (it failed, stalled or was interrupted): the caller learns where they are
    either way.

    A run at ``time_dilation: auto`` that ends host-bound runs again, slower, as
    :func:`testbed.plan.rerun_plan` says: every run keeps its directory, the last one's summary names the
    earlier ones (``superseded_runs``), and the last is returned and handed to ``on_finished``. A run held
    back for running again is handed over instead if the next run cannot begin (Ctrl-C, another run's lock)."""
    plan = plan or make_plan(scenario, target)
    preflight()
    # held: (result, plan to run next) of the last run that ended host-bound, kept from on_finished meanwhile
    superseded, held = [], []

    def finished(result):                          # the run of ``plan`` (as it is bound while that run runs)
        next_plan = rerun_plan(plan, result.summary, len(superseded))
        if next_plan is not None:
            held[:] = [(result, next_plan)]
            return
        held.clear()
        if on_finished is not None:
            on_finished(result)

    try:
        while True:
            result = run_class(plan, Path(out_root), stream, finished, superseded=superseded).execute()
            if not held:
                return result
            reasons = result.summary["distortion_reasons"]
            superseded.append({"run_id": result.run_dir.name, "time_dilation": plan.time_dilation,
                               "distortion_reasons": reasons})
            next_plan = held[0][1]
            ReaderSafeStream(stream).write(f"run {result.run_dir.name} at time dilation {plan.time_dilation:g} was "
                                           f"host-bound ({host_bound_reasons(reasons)[0]}): running it again at time "
                                           f"dilation {next_plan.time_dilation:g}\n")
            plan = next_plan
    except BaseException:
        if held and on_finished is not None:
            on_finished(held[0][0])
        raise
