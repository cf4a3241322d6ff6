"""``inatb``: the command line. The only place that turns typed errors into exit codes; what a finished run's
or sweep's results make of it is :mod:`testbed.outcome`'s decision.

Commands: run, validate, simulate, fidelity, sweep, reproduce, report, compare, cleanup, doctor; ``--version``.
"""

import argparse
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from testbed import outcome
from testbed.dataplane import targets
from testbed.errors import TestbedError, UsageError
from testbed.ownership import handing_over, new_tree, output_into
from testbed.papers import PAPERS


def _say(line: str) -> None:
    print(line, file=sys.stderr)


def _load(args):
    from testbed.scenario import load_scenario
    return load_scenario(args.scenario, args.set or ())


def cmd_validate(args) -> int:
    """Valid for ``inatb run``: resolves, and nothing in ``emulation_limits`` stops a run (else one line, exit 2).
    Prints the plan as ``inatb run`` prints it before it builds the network (:func:`testbed.plan.describe`)."""
    from testbed.plan import describe, make_plan
    scenario = _load(args)
    # What the run refuses before any network exists: the same checks, the same one-line errors, the same plan.
    plan = make_plan(scenario, args.target, installed_only=False)
    print(f"{args.scenario}: valid")
    for line in describe(plan):
        print(line)
    return 0


def _strict(args) -> bool:
    """``--strict``, or ``INATB_STRICT`` saying the same (:func:`testbed.outcome.strict_from_env`)."""
    return outcome.strict_from_env(os.environ) or args.strict


def _strict_note(command: str, code: int, what: str) -> str:
    """The line that says why ``--strict`` made a finished command exit ``code`` (empty when it did not)."""
    if code != outcome.EXIT_DISTORTED:
        return ""
    return f"inatb {command} --strict: exit {code}: {what} (distortion_reasons in summary.json)"


def _report_run(command: str, result, strict: bool, *texts) -> int:
    """A finished run's ``texts`` (its summary, ...) on stderr and its directory on stdout, each as long as
    its reader is there (the run is over and written either way); the exit status
    (:func:`testbed.outcome.run_exit_code`): 0 when exact, else 8; under ``strict`` 9 when distorted."""
    from testbed.emulation.progress import ReaderSafeStream
    display = ReaderSafeStream(sys.stderr)
    code = outcome.run_exit_code(result.summary, strict)
    note = _strict_note(command, code, "the run is exact but distorted")
    for text in texts + ((note,) if note else ()):
        print(text, file=display)
    print(result.run_dir, file=ReaderSafeStream(sys.stdout))
    return code


def _write_html_report(command: str, results_dir) -> None:
    """``report.html`` into a run's or sweep's directory, with a run's plots (the invoking user's under sudo, as
    the rest of it), its path on stderr; a failure to write it is one line on stderr and nothing else: the
    command's own result and exit status stand."""
    from testbed.emulation.interrupts import interrupts_deferred
    from testbed.emulation.progress import ReaderSafeStream
    from testbed.errors import one_line
    from testbed.reports.html import write_report
    display = ReaderSafeStream(sys.stderr)
    try:
        # whole even if Ctrl-C comes meanwhile (it is delivered after): the page and the plots it draws
        with interrupts_deferred(), handing_over(output_into(results_dir), say=_say):
            page = write_report(results_dir)
        print(f"report {page}", file=display)
    except Exception as exc:  # noqa: BLE001 - the page is a convenience; the results are written
        print(one_line(f"inatb {command}: report.html not written in {results_dir}: {type(exc).__name__}: {exc}"),
              file=display)


@contextlib.contextmanager
def _html_report_of_the_run(command: str):
    """Yields the ``on_finished`` to hand the run (:func:`testbed.emulation.orchestrator.run_scenario`); on leaving,
    whether the command returns or the run's error goes on (a failed or stalled run), the run's report.html is
    written, from the summary as the command left it. From the run's end until the page and its plots are
    written, Ctrl-C is held and delivered after them."""
    from testbed.emulation.interrupts import interrupts_deferred
    finished, held = [], contextlib.ExitStack()

    def on_finished(result):
        finished.append(result)
        if len(finished) == 1:
            held.enter_context(interrupts_deferred())
    try:
        yield on_finished
    finally:
        with held:
            if finished:
                _write_html_report(command, finished[-1].run_dir)


def cmd_run(args) -> int:
    from testbed.emulation.orchestrator import run_scenario
    from testbed.reports.text import format_summary
    strict = _strict(args)
    scenario = _load(args)
    with _html_report_of_the_run("run") as on_finished:
        result = run_scenario(scenario, out_root=args.out, target=args.target, on_finished=on_finished)
        return _report_run("run", result, strict, format_summary(result.summary))


def cmd_fidelity(args) -> int:
    """Emulation and simulator on the same scenario: per job and metric, emulated, simulated, ratio."""
    from testbed.emulation.orchestrator import run_scenario
    from testbed.fidelity import compare, format_fidelity
    from testbed.metrics.summary import write_summary
    from testbed.plan import make_plan
    from testbed.reports.text import format_summary
    strict = _strict(args)
    scenario = _load(args)
    plan = make_plan(scenario, args.target)        # the placement, solved once for the run and the simulator
    with _html_report_of_the_run("fidelity") as on_finished:
        result = run_scenario(scenario, out_root=args.out, plan=plan, on_finished=on_finished)
        fidelity = compare(result.summary, plan.simulation())
        result.summary["fidelity"] = fidelity
        with handing_over(new_tree(result.run_dir), say=_say):     # the run's directory, summary rewritten
            write_summary(result.run_dir, result.summary)
        return _report_run("fidelity", result, strict, format_summary(result.summary), format_fidelity(fidelity))


def _sweep_strict_note(command: str, code: int, rows) -> str:
    distorted = sum(1 for row in rows if outcome.point_exit_code(row, True) == outcome.EXIT_DISTORTED)
    return _strict_note(command, code, f"{distorted} point{'s' if distorted != 1 else ''} exact but distorted")


def cmd_sweep(args) -> int:
    """Every point of a sweep not done yet, then the table and plots; exit 0 when every point is ok
    (:func:`testbed.outcome.sweep_exit_code`; under --strict also exact and undistorted). With ``--dry-run``,
    every point and what its run would use, and the expected wall time; nothing runs."""
    from testbed.sweep import load_sweep, run_sweep
    from testbed.sweep.executors import executor_for
    from testbed.emulation.progress import ReaderSafeStream
    if args.address and args.executor != "ray":
        raise UsageError("--address names a Ray cluster: it goes with --executor ray")
    strict = _strict(args)
    spec = load_sweep(args.sweep, args.set or ())
    if args.dry_run:
        from testbed.sweep.dry_run import format_preview, preview_sweep
        preview = preview_sweep(spec, args.out, args.target, progress=ReaderSafeStream(sys.stderr),
                                rerun_distorted=args.rerun_distorted)
        print("\n".join(format_preview(preview)))
        return 0
    display = ReaderSafeStream(sys.stderr)    # a reader that goes away silences the display, not the sweep
    print(f"sweep {spec.name}: {len(spec.points)} points ({spec.size_text()}) of {spec.scenario_path}"
          f"{spec.sets_text()}", file=display)
    executor = executor_for(spec, args.executor, args.address)
    try:
        result = run_sweep(spec, args.out, target=args.target, progress=display, executor=executor,
                           rerun_distorted=args.rerun_distorted)
    except BaseException:
        if (Path(args.out) / spec.name / "table.csv").is_file():    # the points done so far, Ctrl-C included
            _write_html_report("sweep", Path(args.out) / spec.name)
        raise
    statuses = {}
    for r in result.rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    distorted = sum(1 for r in result.rows if r.get("distorted"))
    print(f"sweep {spec.name}: ran {result.ran}, already done {result.skipped}; "
          + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
          + (f"; {distorted} distorted (an emulator artifact, not a result)" if distorted else ""), file=display)
    for path in result.plots:
        print(f"plot {path}", file=display)
    for metric in result.unplotted:
        print(f"metric {metric}: no finished run has it as a number, so no plot (the table's columns are the "
              f"summary's metrics)", file=display)
    if result.paper is not None:
        from testbed.sweep.table import format_paper_comparison
        print(f"against the paper ({result.sweep_dir / 'paper.csv'}):\n" + format_paper_comparison(result.paper),
              file=display)
    code = outcome.sweep_exit_code(result.rows, strict)
    note = _sweep_strict_note("sweep", code, result.rows)
    if note:
        print(note, file=display)
    if result.rows and result.table_path.is_file():
        _write_html_report("sweep", result.sweep_dir)
    print(result.table_path, file=ReaderSafeStream(sys.stdout))
    return code


def cmd_reproduce(args) -> int:
    """Every experiment of a paper (or those ``--only`` names), then the paper's page; exit 0 when every run
    ended ok (:func:`testbed.outcome.sweep_exit_code` over every experiment's points)."""
    from testbed.emulation.progress import ReaderSafeStream
    from testbed.reproduce import experiments, require_root_for, run_experiment, select, write_page
    display = ReaderSafeStream(sys.stderr)
    strict = _strict(args)
    found = experiments(args.paper)
    chosen = select(found, [name for item in args.only or () for name in item.split(",") if name])
    require_root_for(chosen)
    page_dir = Path(args.page_dir) if args.page_dir else Path(args.out) / "reproductions"
    # Each experiment's sweep directory (its conditions written after the sweep) and the page's.
    outputs = [output_into(Path(args.out) / experiment.spec.name) for experiment in chosen] + [output_into(page_dir)]
    rows = []
    with handing_over(*outputs, say=lambda line: print(line, file=display)):
        for experiment in chosen:
            kind = "simulated" if experiment.spec.simulate else "emulated"
            print(f"reproduce {args.paper}: {experiment.name} ({kind}, {len(experiment.spec.points)} runs)",
                  file=display)
            rows += run_experiment(experiment, Path(args.out), args.target, display,
                                   rerun_distorted=args.rerun_distorted).rows
        code = outcome.sweep_exit_code(rows, strict)
        note = _sweep_strict_note("reproduce", code, rows)
        if note:
            print(note, file=display)
        page = write_page(args.paper, found, Path(args.out), page_dir)
    print(page, file=ReaderSafeStream(sys.stdout))
    return code


def cmd_report(args) -> int:
    """The text report of a run or sweep directory, or with --html its HTML page (path printed)."""
    from testbed.reports import results_kind
    if args.html:
        from testbed.reports.html import write_report
        with handing_over(output_into(args.results_dir), say=_say):
            page = write_report(args.results_dir)
        print(page)
        return 0
    from testbed.reports.text import format_run_report, format_sweep_report
    kind = results_kind(args.results_dir)
    print(format_run_report(args.results_dir) if kind == "run" else format_sweep_report(args.results_dir))
    return 0


def cmd_compare(args) -> int:
    """Metric differences between two runs or two sweeps."""
    from testbed.reports.compare import compare_results, format_comparison
    notes, diffs = compare_results(args.a, args.b, args.metric or ())
    print(format_comparison(notes, diffs, only_changed=args.changed))
    return 0


def cmd_simulate(args) -> int:
    from testbed.plan import plan_scenario
    try:
        from testbed import sim
    except ImportError as exc:
        raise TestbedError(f"the simulator is not available: {exc}")
    result = plan_scenario(_load(args)).simulation()
    print(json.dumps(result, indent=2, default=str) if args.json else sim.format_simulation(result))
    return 0


def cmd_cleanup(args) -> int:
    from testbed.emulation.state import cleanup_stale
    lines = cleanup_stale()
    print("\n".join(lines) if lines else "nothing to clean up")
    return 0


def cmd_doctor(args) -> int:
    from testbed.doctor import OPTIONAL_CHECKS, checks
    ok = True
    for name, present, detail in checks():
        print(f"{'ok     ' if present else 'MISSING'}  {name}: {detail}")
        ok &= present or name in OPTIONAL_CHECKS
    return 0 if ok else 1


#: What ``inatb`` exits with (``--help``'s epilogue and the command reference, docs/reference/cli.md).
EXIT_CODES = (
    (outcome.EXIT_DONE, "done: a run exact, a sweep's every point ok, a scenario valid (a distorted run too, "
                        "unless --strict)"),
    (1, "an error of the testbed's not listed below; `doctor`: something required is missing"),
    (2, "invalid input: a scenario, sweep or topology file, or options that do not go together"),
    (3, "a scheme cannot serve the scenario (an infeasible LP, a missing element)"),
    (4, "a switch rejected an entry, or could not be started or reached"),
    (5, "the emulated network or an agent failed before the run could end"),
    (6, "another run holds the machine"),
    (7, "a required binary or privilege is missing (root, mnexec, simple_switch ...)"),
    (outcome.EXIT_NOT_EXACT, "the run ended without every aggregate exact (its status in summary.json: failed, "
                             "stalled ...), or a sweep point did not end ok (--strict: or not exact); results are "
                             "written"),
    (outcome.EXIT_DISTORTED, "--strict: every run ended ok and exact, but one is distorted (summary.json's "
                             "distortion_reasons: the figures measure the machine, not the scheme); results are "
                             "written"),
    (70, "internal error of a read-only command (validate, simulate, report, compare): please report it"),
    (130, "interrupted (Ctrl-C or SIGTERM); the network and agents were removed"),
)


#: The environment variables ``inatb`` reads, and what each means (``--help``'s epilogue, the command reference).
ENVIRONMENT = (
    (outcome.STRICT_ENV, "set to 1: --strict for run, fidelity, sweep and reproduce (set it once for a CI job)"),
)

STRICT_HELP = (f"exit {outcome.EXIT_NOT_EXACT} unless every run ended ok and exact, {outcome.EXIT_DISTORTED} when "
               f"one of them is distorted (without it a distorted run exits 0); {outcome.STRICT_ENV}=1 means the "
               f"same")
RERUN_DISTORTED_HELP = ("run again the points whose newest run is distorted (as when the machine was busy with "
                        "something else); the earlier run stays in the point's directory")


class _PrintVersion(argparse.Action):
    """``--version``: what :func:`testbed.provenance.version_lines` says, worked out only when asked (it runs
    git and the data plane's tools)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from testbed.provenance import version_lines
        print("\n".join(version_lines()))
        parser.exit()


def build_parser():
    epilog = ("exit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES)
              + "\n\nenvironment:\n" + "\n".join(f"  {name}  {meaning}" for name, meaning in ENVIRONMENT))
    parser = argparse.ArgumentParser(prog="inatb", description="INA Testbed: emulate in-network aggregation",
                                     epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_PrintVersion,
                        help="print the testbed's version, git commit, P4 program hash, p4c's and simple_switch's "
                             "versions, and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    def scenario_cmd(name, help_text):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("scenario", help="scenario YAML file")
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a field by dotted path (jobs.0.policy=atp, scale=0.001, policy=NAME)")
        return p

    p = scenario_cmd("run", "run a scenario on an emulated network (root)")
    p.add_argument("--out", default="results", help="results root (default: results)")
    p.add_argument("--target", choices=targets.CHOICES, help="switch target (default: the scenario's)")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.set_defaults(func=cmd_run)
    p = scenario_cmd("validate", "check a scenario file and print the plan a run would use, without touching the "
                                 "network")
    p.add_argument("--target", choices=targets.CHOICES, help="switch target (default: the scenario's)")
    p.set_defaults(func=cmd_validate)
    p = scenario_cmd("fidelity", "run the emulation and the simulator on a scenario and compare them (root)")
    p.add_argument("--out", default="results", help="results root (default: results)")
    p.add_argument("--target", choices=targets.CHOICES, help="switch target (default: the scenario's)")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.set_defaults(func=cmd_fidelity)
    p = scenario_cmd("simulate", "evaluate a scenario's placement with the flow-level model")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_simulate)
    p = sub.add_parser("sweep", help="run a scenario over axes of --set values (root, unless the sweep file says "
                                     "simulate: true); resumes where it stopped")
    p.add_argument("sweep", help="sweep YAML file")
    p.add_argument("--out", default="results", help="results root (default: results)")
    p.add_argument("--target", choices=targets.CHOICES, help="switch target (default: the scenario's)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="where points run: here, one after another (default), or on a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (HEAD:6379); without it --executor ray starts a local Ray")
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="override a field of every point by dotted path, after the sweep file's set: and before its "
                        "axes (a field an axis varies is refused)")
    p.add_argument("--dry-run", action="store_true",
                   help="run nothing: list every point with the target, time dilation and wall time its run would "
                        "take, and the total (no root)")
    p.add_argument("--rerun-distorted", action="store_true", help=RERUN_DISTORTED_HELP)
    p.set_defaults(func=cmd_sweep)
    p = sub.add_parser("reproduce", help="run every experiment of a paper (its sweeps under scenarios/papers/PAPER/; "
                                         "resumes where it stopped) and write the paper's page")
    p.add_argument("paper", choices=tuple(PAPERS), help="the paper")
    p.add_argument("--out", default="results", help="results root (default: results)")
    p.add_argument("--target", choices=targets.CHOICES, help="switch target (default: the scenario's)")
    p.add_argument("--only", action="append", metavar="EXPERIMENT",
                   help="only these experiments (repeatable, or comma-separated; default: all)")
    p.add_argument("--page-dir", help="where the page and its plots go (default: OUT/reproductions; the committed "
                                      "pages: docs/reproductions)")
    p.add_argument("--rerun-distorted", action="store_true", help=RERUN_DISTORTED_HELP)
    p.add_argument("--strict", action="store_true", help=STRICT_HELP)
    p.set_defaults(func=cmd_reproduce)
    p = sub.add_parser("report", help="the report of a run or sweep directory (text, or --html)")
    p.add_argument("results_dir", help="a run directory (summary.json) or a sweep directory (table.csv)")
    p.add_argument("--html", action="store_true", help="write report.html into the directory and print its path "
                                                       "(run, fidelity and sweep write it when they end)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("compare", help="metric differences between two runs or two sweeps")
    p.add_argument("a", help="run or sweep directory A")
    p.add_argument("b", help="run or sweep directory B (of the same kind)")
    p.add_argument("--metric", action="append", help="only this metric (repeatable; a run's job metrics match "
                                                      "by name)")
    p.add_argument("--changed", action="store_true", help="only metrics whose values differ")
    p.set_defaults(func=cmd_compare)
    sub.add_parser("cleanup", help="remove what a crashed run left behind").set_defaults(func=cmd_cleanup)
    sub.add_parser("doctor", help="tell what this machine has and what each absence costs").set_defaults(
        func=cmd_doctor)
    return parser


def _terminate(signum, frame):
    raise KeyboardInterrupt


#: Commands that only read a scenario or results: an unexpected exception there is still reported as one line
#: (a bug of ours, named by type and place), never a traceback; ``run`` keeps its traceback.
READ_ONLY_COMMANDS = ("validate", "simulate", "report", "compare")
NETWORK_COMMANDS = ("run", "fidelity", "sweep", "reproduce")
EXIT_INTERNAL_ERROR = 70   # EX_SOFTWARE


def _internal_error_line(command: str, exc: BaseException) -> str:
    from testbed.errors import one_line
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else ""
    return one_line(f"inatb {command}: internal error{where}: {type(exc).__name__}: {exc} "
                    f"(please report it with the scenario)")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.func(args)
    except TestbedError as exc:
        print(f"inatb {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`inatb simulate ... | head`): nothing left to say, and nobody to say it to.
        sys.stdout = None
        return 0
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)     # a further Ctrl-C must not cut the message short
        done = "; the network and agents were stopped and removed" if args.command in NETWORK_COMMANDS else ""
        print(f"inatb {args.command}: interrupted{done}", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - see READ_ONLY_COMMANDS (RecursionError, MemoryError included)
        if args.command not in READ_ONLY_COMMANDS:
            raise
        print(_internal_error_line(args.command, exc), file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
