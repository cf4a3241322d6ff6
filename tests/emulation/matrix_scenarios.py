"""The scheme x topology matrix of the emulation tests: small, quick scenarios as YAML text.

Every policy name runs on five topologies (one rack; a dumbbell with
parallel paths; GOAT's testbed; a leaf-spine with jobs spanning racks and two
jobs sharing switches; a fat-tree k=4 with 20% programmable switches,
seeded). ``REFUSED`` names the combinations a scheme cannot apply to, with
the one-line reason the plan gives before any network exists.
"""

SCHEME_NAMES = ("ps", "atp", "switchml", "esa", "geryon", "lbmm", "ksgd", "goat", "goat-async", "grid", "inart",
            "inart-equal")

_COMMON = """version: 1
seed: 3
scale: 0.00005
run_timeout: 90s
"""

_JOB = """  - name: {name}
    model: resnet18
    workers: [{workers}]
    ps: [{ps}]
    policy: {scheme}
    iterations: 3
    compute_time: 10ms
    submodels: 2
    window: 16
"""

TOPOLOGIES = {
    "one-rack": ("""topology:
  kind: explicit
  link_rate: 100Gbps
  switches: [s1]
  hosts: [w1, w2, w3, ps1, ps2]
  links: [[w1, s1], [w2, s1], [w3, s1], [ps1, s1], [ps2, s1]]
""", [("j", "w1, w2, w3", "ps1, ps2")]),
    "dumbbell": ("""topology:
  kind: dumbbell
  link_rate: 100Gbps
  hosts_left: 3
  hosts_right: 2
  paths: 2
""", [("j", "hl1, hl2, hl3", "hr1, hr2")]),
    "goat-testbed": ("""topology:
  kind: goat-testbed
  link_rate: 100Gbps
""", [("j", "w1, w2, w5, w6", "ps")]),
    "leaf-spine": ("""topology:
  kind: leaf-spine
  link_rate: 100Gbps
  spines: 2
  leaves: 3
  hosts_per_leaf: 3
""", [("a", "h1, h4", "h7, h8"), ("b", "h2, h5", "h3, h9")]),
    "fat-tree": ("""topology:
  kind: fat-tree
  link_rate: 100Gbps
  k: 4
  programmable: {fraction: 0.2}
""", [("j", "h1, h3, h5, h9", "h13, h15")]),
}


def scenario_text(scheme: str, topology: str) -> str:
    topo, jobs = TOPOLOGIES[topology]
    body = "".join(_JOB.format(name=n, workers=w, ps=p, scheme=scheme) for n, w, p in jobs)
    return f"name: matrix-{scheme}-{topology}\n" + _COMMON + topo + "jobs:\n" + body
