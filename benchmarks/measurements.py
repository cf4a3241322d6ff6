#!/usr/bin/env python3
"""The testbed's own measurements, measured and written as one page (docs/reproductions/measurements.md).

    sudo .venv/bin/python benchmarks/measurements.py [--only SECTION,...] [--out results/measurements]
                                                     [--page docs/reproductions/measurements.md]

Each section runs its commands (``inatb run`` and ``inatb fidelity`` as a user runs them, the benchmark
scripts beside this one), and keeps its table with the commit, date and machine it was measured on in
``OUT/<section>.json``. The page is written from every section measured so far (``--only`` refreshes some
and keeps the others: those in OUT, else as the page already shows them, measured elsewhere); a section not
measured yet shows the command that measures it. Nothing on the page
is typed by hand but the prose, which states no figure. Root for the emulation sections and the veth
benchmarks; bmv2's rows only where simple_switch and p4c are on PATH.
"""

import argparse
import datetime
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_placement_solve  # noqa: E402
from testbed.atomic_io import write_text_atomic  # noqa: E402
from testbed.budget import bmv2_installed  # noqa: E402
from testbed.fidelity import FRAGMENT_TOLERANCE, RATE_TOLERANCE  # noqa: E402
from testbed.markdown import table  # noqa: E402
from testbed.provenance import machine_id, short_commit  # noqa: E402

INATB = [sys.executable, "-m", "testbed.cli"]
QUICKSTART = "scenarios/quickstart.yaml"
IMPAIRED = "impairments=[{link: all, drop: 0.01, duplicate: 0.01, reorder: 0.01}]"
GOAT_SCHEMES = ("ps", "atp", "esa", "geryon", "ksgd", "goat", "goat-async", "grid")
#: ``inatb``'s exit code for a run that ended without every aggregate exact: its results are written.
RUN_NOT_EXACT = 8
FIDELITY_COLUMNS = ("ps_ingress_fragments", "ina_amount_fragments", "min_sending_rate_bps", "comm_time_s")


def targets() -> tuple:
    return ("pyswitch", "bmv2") if bmv2_installed() else ("pyswitch",)


# -- running -----------------------------------------------------------------------------------------------

@dataclass
class Measured:
    """One command's run: its summary and how long the whole command took (build and teardown included)."""
    summary: dict
    elapsed_s: float


def inatb(command: str, scenario: str, overrides, target: str, out_dir: Path) -> Measured:
    """``inatb COMMAND SCENARIO --target TARGET --set ...`` with its run under ``out_dir``; the run directory
    is its output's last line."""
    argv = INATB + [command, scenario, "--target", target, "--out", str(out_dir)]
    for override in overrides:
        argv += ["--set", override]
    start = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed_s = time.monotonic() - start
    if done.returncode not in (0, RUN_NOT_EXACT):
        raise SystemExit(f"{' '.join(argv[2:])}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    run_dir = Path(done.stdout.strip().splitlines()[-1])
    return Measured(json.loads((run_dir / "summary.json").read_text()), elapsed_s)


def script(name: str, args, out_json: Path) -> dict:
    """A benchmark script beside this one, its figures as the JSON it writes."""
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args, "--out", str(out_json)],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr.strip()[-400:]}")
    return json.loads(out_json.read_text())


# -- cells -------------------------------------------------------------------------------------------------

def number(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}g}"


def share(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def marked(summary: dict) -> str:
    return "; ".join(summary["distortion_reasons"]) if summary["distorted"] else "no"


def job_cells(summary: dict) -> list:
    job = summary["jobs"][0]
    return [("exact" if summary["aggregation_exact"] else "NOT exact"), number(job["iteration_time_s"]),
            number(job["comm_time_s"]), number(job["ps_ingress_fragments_per_iteration"]),
            share(job["retransmission_ratio"]), share((summary["cpu"].get("machine") or {}).get("mean")),
            marked(summary)]


JOB_COLUMNS = ("sum", "s/iteration", "comm s", "PS ingress fragments / iteration", "retransmission ratio",
               "machine CPU (mean)", "distorted")


# -- the sections ------------------------------------------------------------------------------------------

def quickstart_rows(out_dir: Path) -> list:
    rows = []
    for target in targets():
        for scheme in ("atp", "ps", "goat"):
            run = inatb("run", QUICKSTART, [f"policy={scheme}"], target, out_dir)
            rows.append([target, scheme, *job_cells(run.summary), f"{run.elapsed_s:.1f}"])
    return rows


def impairment_rows(out_dir: Path) -> list:
    rows = []
    for target in targets():
        run = inatb("run", QUICKSTART, [IMPAIRED], target, out_dir)
        done = {"dropped": 0, "duplicated": 0, "reordered": 0}
        for switch in run.summary["switches"].values():
            for port in switch.get("impairment", {}).values():
                for what in done:
                    done[what] += port.get(what, 0)
        rows.append([target, *job_cells(run.summary), ", ".join(f"{n} {what}" for what, n in done.items())])
    return rows


def goat_scheme_rows(out_dir: Path) -> list:
    return [[scheme, *job_cells(inatb("run", "scenarios/papers/goat/testbed.yaml", [f"policy={scheme}"], "pyswitch",
                                      out_dir).summary)]
            for scheme in GOAT_SCHEMES]


def fidelity_cells(summary: dict) -> list:
    job_rows = next(iter(summary["fidelity"]["jobs"].values()))
    by_metric = {row["metric"]: row for row in job_rows}
    cells = []
    for metric in FIDELITY_COLUMNS:
        row = by_metric.get(metric)
        if row is None:
            cells.append("-")
            continue
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        judged = "" if row["judged"] else "not judged"
        notes = ", ".join(note for note in (ratio, judged) if note)
        cells.append(f"{number(row['emulated'])} / {number(row['simulated'])}" + (f" ({notes})" if notes else ""))
    return cells + [("yes" if summary["fidelity"]["all_within"] else "no"), marked(summary)]


FIDELITY_TABLE = tuple(f"{metric} (emulated / simulated)" for metric in FIDELITY_COLUMNS) + \
    ("within the bounds", "distorted")


def goat_fidelity_rows(out_dir: Path) -> list:
    return [[scheme, *fidelity_cells(inatb("fidelity", "scenarios/papers/goat/fidelity.yaml", [f"policy={scheme}"],
                                           "pyswitch", out_dir).summary)]
            for scheme in ("ps", "atp", "goat", "grid")]


def pa_atp_fidelity_rows(out_dir: Path) -> list:
    return [[transport, *fidelity_cells(inatb("fidelity", "scenarios/papers/pa-atp/fidelity.yaml",
                                              [f"transport={transport}"], "pyswitch", out_dir).summary)]
            for transport in ("atp", "switchml", "pa-atp", "strawasyn")]


def switch_speed_rows(out_dir: Path) -> list:
    measured = ("inproc", "process") + (("bmv2",) if bmv2_installed() else ()) + ("ebpf",)
    figures = script("bench_pyswitch.py", ["--seconds", "3", "--targets", ",".join(measured)],
                     out_dir / "bench_pyswitch.json")
    rows = []
    for row in figures["rows"]:
        if "skipped" in row:
            rows.append([row["target"], row["stream"], f"skipped: {row['skipped']}", "-"])
            continue
        lossless = row.get("lossless")
        rows.append([row["target"], row["stream"], f"{row['rate_per_s']:,.0f}/s"
                     + (f", {share(row['loss'])} lost" if row.get("loss") is not None else ""),
                     "-" if lossless is None else f"{lossless['rate_per_s']:,.0f}/s"])
    return rows


def packet_cost_rows(out_dir: Path) -> list:
    figures = script("bench_packet_costs.py", ["--target", "pyswitch", "--time-dilation", "16,32,64"],
                     out_dir / "bench_packet_costs.json")
    return [[f"{run['time_dilation']:g}", role, f"{wall_pps:,.0f}", f"{per_cpu_s:,.0f}"]
            for run in figures["runs"] for role, (wall_pps, per_cpu_s) in sorted(run["by_role"].items())]


#: GOAT's testbed on ebpf, with longer runs than the quickstart's (the kernel's share is read from 10 ms clock ticks).
KERNEL_COSTS_ARGS = ["--target", "ebpf", "--time-dilation", "8",
                     "--scenario", "scenarios/papers/goat/testbed-1000.yaml", "--few", "5", "--many", "65"]


def kernel_cost_rows(out_dir: Path) -> list:
    figures = script("bench_packet_costs.py", KERNEL_COSTS_ARGS,
                     out_dir / "bench_packet_costs.json")
    rows = []
    for run in figures["runs"]:
        for role, (wall_pps, per_cpu_s) in sorted(run["by_role"].items()):
            rows.append([f"{run['time_dilation']:g}", role, f"{wall_pps:,.0f}", f"{per_cpu_s:,.0f}",
                         share(run["kernel_share_by_role"].get(role))])
        floor = run["kernel_floor_dilation"]
        rows.append([f"{run['time_dilation']:g}", "the kernel's work in the processes alone", "-", "-",
                     "-" if floor is None else f"fills the usable cores at time dilation {floor:.2f}"])
    return rows


def test_suite_rows(out_dir: Path) -> list:
    """The tests the suite collects, per directory (``pytest --collect-only``: nothing runs)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"pytest --collect-only: exit {done.returncode}: {done.stdout.strip()[-400:]}")
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    counts = {}
    for test_id in ids:
        directory = "/".join(test_id.split("::")[0].split("/")[:2])
        counts[directory] = counts.get(directory, 0) + 1
    return [[directory, str(count)] for directory, count in sorted(counts.items())] + [["all", str(len(ids))]]


def policy_solve_rows(out_dir: Path) -> list:
    rows = []
    for label, text, scheme in bench_placement_solve.CASES:
        case = bench_placement_solve.run_case(label, text, scheme)
        rows.append([label, scheme, f"{case['wall_s']:.2f}", f"{case['solve_s']:.2f}",
                     number(case["lp_variables"]), str(case["solver"])])
    return rows


@dataclass(frozen=True)
class Section:
    name: str
    title: str
    prose: str
    command: str                    # what a reader runs for one row of it
    columns: tuple
    measure: Callable               # OUT dir -> rows of cells


SECTIONS = (
    Section("quickstart", "The quickstart, per scheme and target",
            "The quickstart scenario (one switch, four workers and a PS, ResNet-50 at 1/20000) under three schemes, "
            "on each target installed: the sum, the times per iteration, the PS's ingress, and the whole "
            "command's time (the network built and removed).",
            "inatb run scenarios/quickstart.yaml --target TARGET --set policy=NAME",
            ("target", "scheme", *JOB_COLUMNS, "whole command s"), quickstart_rows),
    Section("impairments", "Loss, duplication and reordering on every link",
            f"The quickstart with `{IMPAIRED}`: the sum stays exact, the transport resends what was lost.",
            f"inatb run scenarios/quickstart.yaml --target TARGET --set '{IMPAIRED}'",
            ("target", *JOB_COLUMNS, "what the impairments did"), impairment_rows),
    Section("goat-schemes", "GOAT's testbed, every scheme (pyswitch)",
            "GOAT §VII-B Fig. 4 (8 workers, 4 per rack, 3 programmable switches) with its compute-delay "
            "stragglers, ResNet-50 at 1/20000, under every scheme that runs on it (switchml, lbmm, inart and "
            "inart-equal are refused before any network exists, with the reason).",
            "inatb run scenarios/papers/goat/testbed.yaml --target pyswitch --set policy=NAME",
            ("scheme", *JOB_COLUMNS), goat_scheme_rows),
    Section("fidelity-goat", "The fidelity figure: GOAT's testbed against the simulator",
            "The same testbed without stragglers and with a larger gradient (goat/fidelity.yaml), emulated and "
            "simulated per iteration, the first iteration left out as the transports' warm-up. The bounds are "
            f"`inatb fidelity`'s: {FRAGMENT_TOLERANCE:.0%} on fragment counts, {RATE_TOLERANCE:.0%} on rates and "
            "times; tests/emulation/test_fidelity.py holds them.",
            "inatb fidelity scenarios/papers/goat/fidelity.yaml --target pyswitch --set policy=NAME",
            ("scheme", *FIDELITY_TABLE), goat_fidelity_rows),
    Section("fidelity-pa-atp", "The fidelity figure per transport: PA-ATP's testbed",
            "PA-ATP §V-A's testbed without background traffic and without compute time (pa-atp/fidelity.yaml: "
            "two jobs of three workers, VGG19 at 1/10000), job A under each transport. An asynchronous "
            "transport's fragment counts are shown, not judged: its workers run ahead of the job's slowest and "
            "overflow to the PS by design, which the fragment model does not send.",
            "inatb fidelity scenarios/papers/pa-atp/fidelity.yaml --target pyswitch --set transport=NAME",
            ("transport", *FIDELITY_TABLE), pa_atp_fidelity_rows),
    Section("switch-speed", "Switch speed, side by side",
            "64-lane frames, fan-in 4, the switch alone on its own core of a veth rig (in-process: pyswitch's "
            "model without I/O; ebpf: the kernel, in the sender's and receiver's softirqs on their core, so one "
            "Python sender may bound it): contributions summed per second (a contribution is one worker's frame, four "
            "make a fragment) and packets forwarded per second, with the sender as fast as it can and at the "
            "highest rate that loses at most 0.5%. The packet budget's per-target rates (testbed/budget.py) "
            "come from these (ebpf's from a slower machine's, checked against these).",
            "sudo .venv/bin/python benchmarks/bench_pyswitch.py --seconds 3",
            ("target", "stream", "saturated", "lossless"), switch_speed_rows),
    Section("packet-costs", "What a packet costs a run's processes (pyswitch)",
            "Packets per CPU-second of the switch, the workers and the PS, against the packet rate each sees, "
            "from the quickstart at 1/1000 run twice per time dilation (few and many iterations, the "
            "difference divided by the difference in packets, so a run's fixed costs cancel): the curves the "
            "time dilation planner adds up (testbed/budget.py). `--calibrate` keeps them as this machine's.",
            "sudo .venv/bin/python benchmarks/bench_packet_costs.py --target pyswitch --time-dilation 16,32,64",
            ("time dilation", "process", "packets per wall second", "packets per CPU-second"), packet_cost_rows),
    Section("kernel-costs", "Where an ebpf run's CPU goes: GOAT's testbed at 1/1000",
            "The same measurement on the ebpf target and GOAT's testbed at 1/1000 (8 workers, 403 fragments each "
            "an iteration, three switches), each process's cost split into its own code and the kernel's work "
            "(its system time: the system calls and the network the kernel emulates in them, the switches' BPF "
            "programs, qdiscs, veths and sockets a packet passes, and the wake-ups of the processes it reaches; "
            "the PS's RESULT goes to eight workers). `unattributed` is the rest of the machine's work: the "
            "kernel's outside the processes and the run's monitors, not split. The last row is the time dilation "
            "at which the kernel's part of the processes' work alone, at the packet rates of time dilation 1, "
            "would fill the share of the cores the planner counts usable: an estimate (its costs are taken at "
            "this run's rates) of the least time dilation at which any agent, however cheap its own code, could "
            "keep this testbed link-bound on this machine.",
            "sudo .venv/bin/python benchmarks/bench_packet_costs.py " + " ".join(KERNEL_COSTS_ARGS),
            ("time dilation", "process", "packets per wall second", "packets per CPU-second", "in the kernel"),
            kernel_cost_rows),
    Section("test-suite", "The test suite's size",
            "The tests `CI=true bash .ci/run` runs, per directory (collected, not run): unit tests of pure code, "
            "packet tests on every target, emulation tests of whole runs, the browser's check of the reports. "
            "None is skipped in CI.",
            ".venv/bin/python -m pytest --collect-only -q tests",
            ("directory", "tests"), test_suite_rows),
    Section("policy-solve", "Solving the control-plane algorithms at the papers' scale",
            "The LP schemes on the papers' simulation topologies (benchmarks/bench_placement_solve.py says which): "
            "the whole scheme's wall time and the time inside the LP solver.",
            ".venv/bin/python benchmarks/bench_placement_solve.py",
            ("topology", "scheme", "wall s", "LP s", "LP variables", "solver"), policy_solve_rows),
)


# -- the page ----------------------------------------------------------------------------------------------

def measure(section: Section, out_root: Path) -> dict:
    out_dir = out_root / section.name
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    rows = section.measure(out_dir)
    record = {"rows": rows, "commit": short_commit(), "date": datetime.date.today().isoformat(),
              "machine": machine_id(), "wall_s": round(time.monotonic() - start, 1)}
    write_text_atomic(out_root / f"{section.name}.json", json.dumps(record, indent=1) + "\n")
    return record


def section_markdown(section: Section, record) -> list:
    lines = [f"## {section.title}", "", section.prose, "", f"`{section.command}`", ""]
    if record is None:
        return lines + [f"Not measured yet: `sudo .venv/bin/python benchmarks/measurements.py --only {section.name}`.",
                        ""]
    lines += [f"Measured at commit `{record['commit']}` on {record['date']}, {record['machine']} cores, in "
              f"{record['wall_s']:.0f} s.", "", table(section.columns, record["rows"])]
    return lines + [""]


def written_sections(page_text: str) -> dict:
    """The measured sections of a page this script wrote: title -> the section's lines (its heading to the
    next, without the blank lines that end it), for those that carry a table with its provenance."""
    sections, title = {}, None
    for line in page_text.splitlines():
        if line.startswith("## "):
            title = line[3:]
            sections[title] = []
        if title is not None:
            sections[title].append(line)
    return {t: "\n".join(lines).rstrip().splitlines() for t, lines in sections.items()
            if any(l.startswith("Measured at commit") for l in lines)}


def page_markdown(out_root: Path, written: str = "") -> str:
    """The page from the sections measured in ``out_root``; a section measured there not, but on the page as
    ``written`` before (by another machine or checkout), is kept as it was written."""
    lines = ["# Measurements", "",
             "<!-- Written by `benchmarks/measurements.py`: run it again to refresh the page; do not edit it. -->",
             "", "What the testbed itself measures on a machine: the quickstart, loss, every scheme on GOAT's "
             "testbed, the fidelity figures, the switches' speed, what a packet costs and where an ebpf run's "
             "CPU goes, the test suite and the LP schemes' solve times. Each section "
             "names the commit, date and machine it was measured on; "
             "`sudo .venv/bin/python benchmarks/measurements.py` measures them all and writes this page. The "
             "papers' figures are on their own pages.", ""]
    kept = written_sections(written)
    for section in SECTIONS:
        path = out_root / f"{section.name}.json"
        if not path.exists() and section.title in kept:
            lines += kept[section.title] + [""]
            continue
        lines += section_markdown(section, json.loads(path.read_text()) if path.exists() else None)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [s.name for s in SECTIONS]
    parser.add_argument("--only", default=",".join(names), help=f"comma-separated, of {', '.join(names)}")
    parser.add_argument("--out", default=str(ROOT / "results" / "measurements"), help="where the runs go")
    parser.add_argument("--page", default=str(ROOT / "docs" / "reproductions" / "measurements.md"))
    args = parser.parse_args(argv)
    chosen = args.only.split(",")
    if unknown := [name for name in chosen if name not in names]:
        parser.error(f"--only: unknown {', '.join(unknown)}; expected some of {', '.join(names)}")
    out_root = Path(args.out)
    for section in SECTIONS:
        if section.name in chosen:
            print(f"measuring {section.name} ...", file=sys.stderr, flush=True)
            measure(section, out_root)
    page = Path(args.page)
    write_text_atomic(page, page_markdown(out_root, page.read_text() if page.exists() else ""))
    print(args.page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
