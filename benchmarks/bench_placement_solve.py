#!/usr/bin/env python3
"""Time the control-plane algorithms on the papers' simulation topologies (a script, not a test).

    python benchmarks/bench_placement_solve.py [--out results/bench_placement_solve.json] [--schemes goat,inart-equal]

Topologies (built through the scenario schema, as ``inatb`` would):

- GOAT §VII-D: leaf-spine, 10 spine + 10 leaf switches, 50 servers (5 per
  leaf); fat-tree k = 8 with 6 servers per edge switch (16 core + 32
  aggregation + 32 edge = 80 switches, 192 servers). 20% of the switches are
  programmable (seeded), each with 64 MB of aggregation memory (Tofino 2);
  every worker sends AlexNet's 221 MB gradient (16 sub-models, one per
  tensor). One PS. The leaf-spine job has the other 49 servers as workers;
  the fat-tree job 64 (the INA bitmap's limit per job; GOAT's figures go to
  40-50 workers).
- InArt §5.3.1: fat-tree of 9 core, 18 aggregation and 18 ToR switches with
  54 servers (the k = 6 fat-tree), 4 PSs and 50 workers, 20 Mb/s links and
  PS ingress, 9 Mb/s aggregation capacity on every (bmv2) switch, VGG-19's
  548 kB gradient (scaled 1/1000 as the paper does) in 8 sub-models.

Schemes timed: ``goat`` (KRGS) on GOAT's topologies; ``inart-equal``
(R-InArt alone, equal split) and ``inart`` (L-InArt, then R-InArt on the
realised split and its neighbours) on InArt's; ``grid`` on InArt's for
reference. Each row: wall time of the whole scheme, time inside the LP
solver, LP size, and the scheme's own predicted minimum sending rate.
Writes the rows as JSON.
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testbed.schemes import compute_placement  # noqa: E402
from testbed.scenario import parse_scenario  # noqa: E402

SWITCH_MEMORY_SLOTS = 64 * 10**6 // (64 * 4)    # 64 MB of 64-lane int32 fragments

GOAT_LEAF_SPINE = f"""
version: 1
name: goat-leaf-spine
seed: 1
scale: 1
topology: {{kind: leaf-spine, link_rate: 10Gbps, spines: 10, leaves: 10, hosts_per_leaf: 5,
           programmable: {{fraction: 0.2}}}}
switch: {{slots: {SWITCH_MEMORY_SLOTS}}}
jobs:
  - name: alexnet
    model: alexnet
    gradient_size: 221MB
    submodels: 16
    workers: [{", ".join(f"h{i}" for i in range(1, 50))}]
    ps: h50
    policy: goat
"""

GOAT_FAT_TREE = f"""
version: 1
name: goat-fat-tree
seed: 1
scale: 1
topology: {{kind: fat-tree, link_rate: 10Gbps, k: 8, hosts_per_edge: 6, programmable: {{fraction: 0.2}}}}
switch: {{slots: {SWITCH_MEMORY_SLOTS}}}
jobs:
  - name: alexnet
    model: alexnet
    gradient_size: 221MB
    submodels: 16
    workers: [{", ".join(f"h{i}" for i in range(1, 193, 3))}]
    ps: h2
    policy: goat
"""

INART_FAT_TREE = f"""
version: 1
name: inart-fat-tree
seed: 1
scale: 1
topology: {{kind: fat-tree, link_rate: 20Mbps, k: 6}}
switch: {{aggregation_capacity: 9Mbps}}
jobs:
  - name: vgg19
    model: vgg19
    gradient_size: 548kB
    submodels: 8
    workers: [{", ".join(f"h{i}" for i in range(1, 55) if i not in (5, 19, 32, 46))}]
    ps: [h5, h19, h32, h46]
    policy: inart
"""

CASES = [
    ("GOAT leaf-spine 10+10, 50 servers", GOAT_LEAF_SPINE, "goat"),
    ("GOAT fat-tree k=8, 192 servers", GOAT_FAT_TREE, "goat"),
    ("InArt fat-tree 9/18/18, 54 servers", INART_FAT_TREE, "inart-equal"),
    ("InArt fat-tree 9/18/18, 54 servers", INART_FAT_TREE, "inart"),
    ("InArt fat-tree 9/18/18, 54 servers", INART_FAT_TREE, "grid"),
]


def run_case(label, text, scheme):
    scenario = parse_scenario(text, f"<{label}>", [f"policy={scheme}"])
    topo = scenario.topology
    job = scenario.jobs[0]
    start = time.perf_counter()
    placement = compute_placement(scenario)
    wall_s = time.perf_counter() - start
    notes = placement.jobs[job.name].notes
    return {
        "topology": label, "scheme": scheme,
        "switches": len(topo.switches()), "programmable": len(topo.programmable_switches()),
        "servers": len(topo.hosts()), "workers": len(job.workers), "ps": len(job.ps),
        "submodels": len(job.submodel_elements),
        "wall_s": wall_s, "solve_s": notes.get("solve_s", 0.0), "solver": notes.get("solver"),
        "lp_variables": notes.get("lp_variables"), "lp_constraints": notes.get("lp_constraints"),
        "predicted_rate_bps": notes.get("predicted_rate_bps"), "lp_rate_bps": notes.get("lp_rate_bps"),
        "splits_tried": len(notes.get("splits_tried", [])) or None,
        "memory_repairs": notes.get("memory_repairs"),
    }


def table(rows) -> str:
    head = (f"{'topology':<36}{'scheme':<13}{'sw/prog':>9}{'W/PS':>7}{'G':>4}{'wall s':>9}{'LP s':>8}"
            f"{'LP vars':>9}  {'solver':<12}{'rate':>12}")
    lines = [head, "-" * len(head)]
    for r in rows:
        rate = r["predicted_rate_bps"]
        rate_text = "-" if rate is None else (f"{rate / 1e9:.3f} Gb/s" if rate >= 1e8 else f"{rate / 1e6:.3f} Mb/s")
        lines.append(f"{r['topology']:<36}{r['scheme']:<13}{r['switches']:>5}/{r['programmable']:<3}"
                     f"{r['workers']:>4}/{r['ps']:<2}{r['submodels']:>4}{r['wall_s']:>9.2f}{r['solve_s']:>8.2f}"
                     f"{r['lp_variables'] or 0:>9}  {r['solver'] or '-':<12}{rate_text:>12}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench_placement_solve.json", help="JSON output file")
    parser.add_argument("--schemes", default="", help="comma-separated subset of schemes to run")
    args = parser.parse_args(argv)
    wanted = {s for s in args.schemes.split(",") if s}
    rows = []
    for label, text, scheme in CASES:
        if wanted and scheme not in wanted:
            continue
        rows.append(run_case(label, text, scheme))
        print(f"  {label}: {scheme} {rows[-1]['wall_s']:.2f} s", file=sys.stderr, flush=True)
    print(table(rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                           "platform": platform.platform()},
                               "rows": rows}, indent=2))
    print(f"written {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
