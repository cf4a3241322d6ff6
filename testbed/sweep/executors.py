"""Where a sweep's points run: here, one after another (``local``, the default), or on a Ray cluster
(``ray``), one emulation per node at a time.

Both run a point the same way (:func:`run_point`): the point's scenario into its own directory, the
run's progress lines into ``run.log``, a plan-time refusal into ``refused.json``. Local execution
writes straight into the sweep's ``points/<id>/``. On Ray, each point is a task that needs one unit
of the custom resource ``inatb_emulation`` (:data:`RAY_RESOURCE`); a node offers one, so a node
runs one emulation at a time (two would share its namespaces and cores, and the run lock would
refuse the second). The task runs the point in a temporary directory on its node, returns that
directory as a gzipped tar, and the head unpacks it into ``points/<id>/``: the table is built from
the same files as a local sweep's.

Every node needs the testbed installed as the README says (the two set-up commands) and Ray
started with the resource: ``ray start --address HEAD:6379 --resources '{"inatb_emulation": 1}'``.
``--executor ray`` without ``--address`` starts a local Ray instance offering one unit, so the
same path runs on one machine (and in CI). Ray is an optional extra (``pip install -e '.[ray]'``);
local execution does not import it.
"""

import io
import json
import tarfile
import tempfile
from pathlib import Path

from testbed.atomic_io import write_text_atomic
from testbed.errors import (EnvironmentMissingError, PlacementError, RunLockError, ScenarioError, TestbedError,
                            TopologyError, UsageError)
from testbed.scenario import default_scenario_name, parse_scenario

#: Errors that refuse one point's scenario before any network exists; any other error (the machine
#: lacks something, another run holds the lock) concerns every point and ends the sweep.
REFUSALS = (ScenarioError, PlacementError, TopologyError)
RAY_RESOURCE = "inatb_emulation"
#: How long Ctrl-C waits for cancelled Ray tasks to tear their networks down.
RAY_CANCEL_WAIT_S = 60.0


def run_summaries(point_dir: Path) -> list:
    """The ``summary.json`` of every run in a point's directory (``<scenario>/<run id>/``, the
    orchestrator's layout under its out_root), oldest first: run ids sort by time."""
    return sorted(point_dir.glob("*/*/summary.json"), key=lambda p: p.parent.name)


def run_point(scenario, point_dir: Path, target, runner) -> None:
    """Run ``scenario`` into ``point_dir``; a refusal before any run directory exists is recorded."""
    point_dir.mkdir(parents=True, exist_ok=True)
    with open(point_dir / "run.log", "a", encoding="utf-8") as log:
        try:
            runner(scenario, out_root=point_dir, target=target, stream=log)
        except (RunLockError, EnvironmentMissingError):
            raise
        except REFUSALS as exc:
            if not run_summaries(point_dir):
                write_text_atomic(point_dir / "refused.json", json.dumps({"error": str(exc)}))
            else:
                log.write(f"error: {exc}\n")
        except TestbedError as exc:
            # The run wrote its summary with status failed or stalled: the table says so.
            log.write(f"error: {exc}\n")


def plan_point(spec, scenario, target):
    """The plan a point's run makes first, before any network exists (a refusal there, one of
    :data:`REFUSALS`, is the point's ``refused.json``): a simulated sweep's, the scenario plan
    :func:`testbed.sim.run.simulate_into` simulates; an emulated one's, the run plan on ``target`` that
    :func:`testbed.emulation.orchestrator.run_scenario` makes, here without checking that this machine has the
    target (``inatb validate``'s plan; the run checks it)."""
    from testbed.plan import make_plan, plan_scenario
    if spec.simulate:
        return plan_scenario(scenario)
    return make_plan(scenario, target, installed_only=False)


def _default_runner():
    from testbed.emulation.orchestrator import run_scenario
    return run_scenario


class LocalExecutor:
    """Points one after another in this process."""

    name = "local"

    def __init__(self, runner=None):
        self.runner = runner

    def run(self, spec, jobs, target, on_done):
        """``jobs``: [(point, point_dir)]; ``on_done(point)`` after each."""
        runner = self.runner or _default_runner()
        for point, point_dir in jobs:
            run_point(spec.scenario_of(point), point_dir, target, runner)
            on_done(point)


def run_point_packed(scenario_text: str, source: str, default_name: str, overrides, target) -> bytes:
    """A point run on this node, in a temporary directory returned as a gzipped tar (a Ray task)."""
    scenario = parse_scenario(scenario_text, source, list(overrides), default_name=default_name)
    with tempfile.TemporaryDirectory(prefix="inatb-point-") as tmp:
        run_point(scenario, Path(tmp), target, _default_runner())
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            for entry in sorted(Path(tmp).iterdir()):
                tar.add(entry, arcname=entry.name)
        return buffer.getvalue()


def unpack_point(packed: bytes, point_dir: Path) -> None:
    point_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        tar.extractall(point_dir, filter="data")


class RayExecutor:
    """Points as Ray tasks, one per node at a time (the ``inatb_emulation`` resource)."""

    name = "ray"

    def __init__(self, address=None):
        self.address = address

    def run(self, spec, jobs, target, on_done):
        try:
            import ray
        except ImportError:
            raise EnvironmentMissingError("--executor ray needs Ray: pip install -e '.[ray]' on every node "
                                          "(docs/guide/sweeps-and-reports.md)") from None
        started_here = not ray.is_initialized()
        if started_here:
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                ray.init(resources={RAY_RESOURCE: 1}, include_dashboard=False, log_to_driver=False)
        if not ray.cluster_resources().get(RAY_RESOURCE):
            raise EnvironmentMissingError(f"the Ray cluster offers no {RAY_RESOURCE!r} resource: start each node "
                                          f"with ray start --resources '{{\"{RAY_RESOURCE}\": 1}}'")
        task = ray.remote(resources={RAY_RESOURCE: 1}, num_cpus=0, max_retries=0)(run_point_packed)
        text = spec.scenario_text()
        pending = {}
        try:
            for point, point_dir in jobs:
                ref = task.remote(text, str(spec.scenario_path), default_scenario_name(spec.scenario_path),
                                  list(point.overrides), target)
                pending[ref] = (point, point_dir)
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                point, point_dir = pending.pop(done[0])
                try:
                    packed = ray.get(done[0])
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(getattr(exc, "cause", None), TestbedError) else None
                    if cause is not None:
                        raise cause from None
                    raise EnvironmentMissingError(f"point {point.label()} failed on its Ray node: "
                                                  f"{str(exc).splitlines()[-1]}") from None
                unpack_point(packed, point_dir)
                on_done(point)
        finally:
            if pending:
                # Ctrl-C or an error: each running task gets KeyboardInterrupt and tears its network
                # down (the orchestrator's cleanup), then the rest are dropped.
                for ref in pending:
                    ray.cancel(ref, force=False)
                ray.wait(list(pending), num_returns=len(pending), timeout=RAY_CANCEL_WAIT_S)
            if started_here:
                ray.shutdown()


def executor_for(spec, name: str = "local", address: str = None):
    """The executor a sweep's points run on: a simulated sweep's here, through the simulator (in seconds: Ray
    would only slow them down); an emulated one's here or on the Ray cluster at ``address``."""
    if spec.simulate:
        if name == "ray":
            raise UsageError(f"{spec.source} is simulated (simulate: true): its points run here, in seconds; "
                             f"drop --executor ray")
        from testbed.sim.run import simulate_into
        return LocalExecutor(runner=simulate_into)
    return RayExecutor(address=address) if name == "ray" else LocalExecutor()
