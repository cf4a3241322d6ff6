"""What a sweep would do, without doing it (``inatb sweep FILE --dry-run``): no run, no network, no root.

Every point, in the order the sweep runs them, with what its run would use:
a point already done in the sweep's directory is skipped, as the sweep
skips it (:func:`testbed.sweep.runner.is_done`); any other is planned as
its run plans it (:func:`testbed.sweep.executors.plan_point`): an emulated
point's run plan, so its target, the time dilation the packet budget picks
and the wall time the planner expects (:meth:`testbed.plan.RunPlan.expected_wall_s`:
the simulator's iteration times at that dilation, plus the network's set-up
and teardown); a simulated point's placement. A point its planner refuses
is listed as refused with the line the sweep would record.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from testbed.budget import RUN_SET_UP_PER_NODE_S, RUN_SET_UP_S
from testbed.errors import EnvironmentMissingError
from testbed.plan import choose_target
from testbed.sweep.executors import REFUSALS, plan_point
from testbed.sweep.runner import is_done, point_state
from testbed.units import format_wall_time

#: The target column of a simulated point.
SIMULATOR = "simulator"


@dataclass(frozen=True)
class PointPreview:
    """One point of the sweep and what running it would do: ``status`` ``planned``, ``refused`` (now, at plan
    time), or ``done`` (its directory holds a finished run or an earlier refusal, ``detail`` says which)."""
    point: object                        # testbed.sweep.spec.Point
    status: str
    target: str = ""
    time_dilation: float = math.nan
    expected_wall_s: float = math.nan    # nan for a simulated point (seconds each) or one that will not run
    detail: str = ""                     # the refusal's line, or a done point's recorded status


@dataclass
class SweepPreview:
    spec: object                         # testbed.sweep.spec.SweepSpec
    sweep_dir: Path
    points: list                         # PointPreview, in the sweep's order
    notes: list = field(default_factory=list)   # what would stop the sweep here (a target this machine lacks)

    def to_run(self) -> list:
        return [p for p in self.points if p.status == "planned"]

    def expected_wall_s(self) -> float:
        """The planned points' expected wall times, summed (0 for a simulated sweep's)."""
        return sum(p.expected_wall_s for p in self.to_run() if not math.isnan(p.expected_wall_s))


def preview_sweep(spec, out_root, target=None, progress=None, rerun_distorted: bool = False) -> SweepPreview:
    """Every point of ``spec`` with what running it into ``out_root`` on ``target`` would do (the module
    docstring). Reads the sweep's directory, writes nothing. Planning a point takes as long as its run's
    planning (tens of seconds for an LP scheme on a large topology): with a ``progress`` stream, a bar on it
    counts the points planned."""
    sweep_dir = Path(out_root) / spec.name
    points, notes = [], []
    bar = tqdm(spec.points, desc=f"planning {spec.name}", unit="point", file=progress, disable=progress is None,
               leave=False)
    for point in bar:
        status, summary, _, error = point_state(sweep_dir / "points" / point.point_id)
        if is_done(status, summary, rerun_distorted):
            points.append(PointPreview(point, "done", detail=f"{status}: {error}" if error else status))
            continue
        scenario = spec.scenario_of(point)
        try:
            plan = plan_point(spec, scenario, target)
        except REFUSALS as exc:
            points.append(PointPreview(point, "refused", detail=str(exc)))
            continue
        if spec.simulate:
            points.append(PointPreview(point, "planned", SIMULATOR))
            continue
        try:
            choose_target(target or scenario.target)            # what the run checks of this machine
        except EnvironmentMissingError as exc:
            if str(exc) not in notes:
                notes.append(str(exc))
        points.append(PointPreview(point, "planned", plan.target, plan.time_dilation, plan.expected_wall_s()))
    return SweepPreview(spec, sweep_dir, points, notes)


def format_preview(preview: SweepPreview) -> list:
    """The preview as ``inatb sweep --dry-run`` prints it: a header, a line per point (its id, axis values and
    repetition, target, time dilation, expected wall time, or why it will not run), and the total."""
    spec = preview.spec
    axes = [axis for axis, _ in spec.axes]
    kind = "simulated (no root)" if spec.simulate else "emulated (root)"
    lines = [f"sweep {spec.name} (dry run: nothing runs): {len(spec.points)} points "
             f"({spec.size_text()}), {kind}, "
             f"of {spec.scenario_path}{spec.sets_text()}; results would go to {preview.sweep_dir}"]
    header = ["point", *axes, "repetition", "target", "time dilation", "expected wall time"]
    rows = []
    for p in preview.points:
        cells = [p.point.point_id, *(str(v) for _, v in p.point.values), str(p.point.repetition)]
        if p.status == "planned":
            dilation = "-" if math.isnan(p.time_dilation) else f"{p.time_dilation:g}"
            wall = "simulated" if math.isnan(p.expected_wall_s) else f"{p.expected_wall_s:.0f} s"
            cells += [p.target, dilation, wall]
        else:
            cells += ["-", "-", f"{p.status}: {p.detail}" if p.status == "refused" else f"done ({p.detail})"]
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for cells in [header, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)) + "  " + cells[-1])
    planned = preview.to_run()
    refused = sum(p.status == "refused" for p in preview.points)
    done = sum(p.status == "done" for p in preview.points)
    counts = f"{len(planned)} to run, {done} already done, {refused} refused"
    if spec.simulate:
        lines.append(f"total: {counts}; simulated: seconds each, here, without root")
    else:
        lines.append(f"total: {counts}; expected wall time about {format_wall_time(preview.expected_wall_s())} "
                     f"(per run: the simulator's iteration times x its time dilation, plus {RUN_SET_UP_S:g} s and "
                     f"{RUN_SET_UP_PER_NODE_S:g} s per node to build and tear down its network)")
    lines += [f"note: the sweep would stop here: {note}" for note in preview.notes]
    return lines
