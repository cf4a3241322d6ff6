"""Every key a scenario file accepts: type, unit, default, bounds and meaning (the scenario reference).

`testbed/scenario/` checks scenarios; this table documents them, one entry per key, and
`docs/reference/scenario.md` is generated from it (testbed/reference.py). A test parses every scenario
the repository ships and fails on a key the schema accepts that this table does not document.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class ScenarioKey:
    """One key of a scenario file."""
    path: str          # dotted, lists as []: "jobs[].window", "stragglers.compute_delay[].mean"
    kind: str          # as written: "integer", "number", "bool", "text", "name", "names", "rate", "size",
    #                    "duration", "choice: a | b", "mapping", ...
    unit: str          # "b/s", "bytes", "s", "packets", "slots", "fragments", "share", "" where none
    default: str       # what an omitted key means
    meaning: str
    bounds: str = ""   # e.g. "1 to 1000", "> 0", "at most switch.slots"
    scaled: bool = False  # `scale` multiplies it


#: Every key, in the order of the guide: top level, topology, switch, jobs, impairments, metrics,
#: background, stragglers, simulation.
SCENARIO_KEYS = (
    # --- top level ---------------------------------------------------------------------------------------------
    ScenarioKey("version", "integer", "", "required", "the scenario format's version", "1"),
    ScenarioKey("name", "name", "", "the file's name without its extension, made a valid name",
                "the scenario's name; its runs' directories are RESULTS/NAME/RUN_ID",
                "1-64 letters, digits, '-', '_' or '.', not starting with '.'"),
    ScenarioKey("description", "text", "", "empty",
                "free text about the scenario, kept in the resolved scenario; the run does not use it"),
    ScenarioKey("seed", "integer", "", "1", "every random draw of the run derives from it",
                "0 to 4294967295"),
    ScenarioKey("scale", "number", "", "1",
                "multiplies the papers' link rates, switch aggregation capacity and memory, and gradient sizes; "
                "durations such as compute time are not scaled, so communication and computation keep the "
                "papers' proportions", "> 0, at most 1"),
    ScenarioKey("time_dilation", "number or auto", "", "1",
                "N: the emulation runs N times slower and reports virtual time; auto: the smallest whole N "
                "the packet budget allows, doubled (twice at most) when the run comes out host-bound",
                "1 to 1000 (MAX_TIME_DILATION), or auto"),
    ScenarioKey("target", "choice: auto | pyswitch | bmv2 | ebpf", "", "auto",
                "the switch implementation: pyswitch (the program's Python model), bmv2 (the P4 source on "
                "simple_switch), ebpf (the program as BPF in the kernel); auto: bmv2 when simple_switch and p4c "
                "are on PATH, else pyswitch (`inatb run --target` overrides it)"),
    ScenarioKey("run_timeout", "duration", "s", "600s",
                "the longest the run may take before it is stopped as failed; background entries without "
                "duration are planned over it", "> 0, at most 24h"),
    # --- topology ----------------------------------------------------------------------------------------------
    ScenarioKey("topology", "mapping", "", "required", "the network: a builder's kind and its parameters"),
    ScenarioKey("topology.kind", "choice: explicit | dumbbell | leaf-spine | fat-tree | dragonfly | goat-testbed",
                "", "required",
                "which topology builder makes the network; each kind takes its own keys besides link_rate, "
                "programmable and result_multicast"),
    ScenarioKey("topology.link_rate", "rate", "b/s", "100Gbps",
                "the rate of every link that does not state its own (the papers' figure)",
                "> 0, at most 1000Tbps", scaled=True),
    ScenarioKey("topology.programmable", "all | none | names | mapping", "",
                "as built: every switch, or (explicit) each switch's own `programmable`",
                "which switches can aggregate (INA): all, none, a list of switch names, {fraction: F} "
                "(drawn from the seed) or {count: K, order: rina}"),
    ScenarioKey("topology.programmable.fraction", "number", "share", "required (in the {fraction} form)",
                "that share of the switches, at least one (round(F x switches)), drawn at random from the seed",
                "> 0, at most 1"),
    ScenarioKey("topology.programmable.count", "integer", "", "required (in the {count, order} form)",
                "the first K switches in `order` are programmable", "0 to the number of switches"),
    ScenarioKey("topology.programmable.order", "choice: rina", "", "rina",
                "the order switches become programmable: rina, Rina §IV-D's incremental replacement order "
                "for the jobs' workers (ToRs with the most workers first)"),
    ScenarioKey("topology.result_multicast", "choice: programmable | all", "", "programmable",
                "which switches replicate a job's RESULTs to its workers: programmable (only a tree of "
                "programmable switches multicasts; elsewhere the PS sends one copy per worker) or all (every "
                "switch replicates, as IP multicast)"),
    ScenarioKey("topology.switches", "list", "", "required",
                "explicit: the switches, each a name or {name, programmable}", "at least one"),
    ScenarioKey("topology.switches[].name", "name", "", "required",
                "explicit: the switch's name (it becomes part of interface names)",
                "1-10 ASCII letters, digits or '_', starting with a letter"),
    ScenarioKey("topology.switches[].programmable", "bool", "", "true",
                "explicit: whether the switch can aggregate (INA), unless topology.programmable says otherwise"),
    ScenarioKey("topology.hosts", "list of names", "", "required",
                "explicit: the hosts (workers, PSs and background hosts)",
                "non-empty; each 1-10 ASCII letters, digits or '_', starting with a letter"),
    ScenarioKey("topology.links", "list", "", "required (every host needs exactly one link)",
                "explicit: the links, each [a, b], [a, b, rate] or {a, b, rate}; a host attaches to one switch"),
    ScenarioKey("topology.links[].a", "name", "", "required",
                "explicit: one end of the link, a switch or host of the topology"),
    ScenarioKey("topology.links[].b", "name", "", "required",
                "explicit: the other end of the link, a switch or host of the topology"),
    ScenarioKey("topology.links[].rate", "rate", "b/s", "topology.link_rate", "explicit: the link's own rate",
                "> 0, at most 1000Tbps", scaled=True),
    ScenarioKey("topology.hosts_left", "integer", "", "2",
                "dumbbell: hosts hl1.. attached to switch s1", "1 to 64"),
    ScenarioKey("topology.hosts_right", "integer", "", "2",
                "dumbbell: hosts hr1.. attached to switch s2", "1 to 64"),
    ScenarioKey("topology.paths", "integer", "", "1",
                "dumbbell: parallel core links between s1 and s2 (PA-ATP's testbed: 4)", "1 to 16"),
    ScenarioKey("topology.core_rate", "rate", "b/s", "topology.link_rate",
                "dumbbell: the rate of each core link between s1 and s2", "> 0, at most 1000Tbps", scaled=True),
    ScenarioKey("topology.pinned_paths", "mapping", "", "-",
                "explicit, dumbbell: {host: k}, all the traffic the host sends crosses the k-th (from 1, in link "
                "order; PA-ATP's p1-p4) of the parallel links between two switches; other hosts' flows are "
                "spread by (source, destination)", "non-empty; the topology must have parallel links"),
    ScenarioKey("topology.pinned_paths.<host>", "integer", "", "-",
                "explicit, dumbbell: which of the parallel links the host's traffic crosses (a host of the "
                "topology as key)", "1 to the most parallel links between two switches"),
    ScenarioKey("topology.ecmp", "choice: pair | flow", "", "pair",
                "explicit, dumbbell: how the flows of hosts running no job agent (background traffic) share "
                "parallel links: pair (by source and destination, as a job's flows) or flow (each flow by its "
                "five-tuple, as ECMP hashing)"),
    ScenarioKey("topology.spines", "integer", "", "2", "leaf-spine: spine switches sp1..", "1 to 64"),
    ScenarioKey("topology.leaves", "integer", "", "2",
                "leaf-spine: leaf switches lf1.., each linked to every spine", "1 to 64"),
    ScenarioKey("topology.hosts_per_leaf", "integer", "", "2",
                "leaf-spine: hosts h1.. under each leaf", "1 to 64"),
    ScenarioKey("topology.k", "integer", "", "4",
                "fat-tree: the arity k: (k/2)^2 core switches and k pods of k/2 aggregation and k/2 edge switches",
                "2 to 16, even"),
    ScenarioKey("topology.hosts_per_edge", "integer", "", "k / 2",
                "fat-tree: hosts h1.. under each edge switch", "1 to 64"),
    ScenarioKey("topology.a", "integer", "", "4",
                "dragonfly: routers per group, linked all to all (Rina §VI-C: 4)", "1 to 16"),
    ScenarioKey("topology.g", "integer", "", "a x h + 1",
                "dragonfly: groups, every pair of groups sharing one global link (Rina §VI-C: 9)",
                "2 to 64, at most a x h + 1"),
    ScenarioKey("topology.h", "integer", "", "2",
                "dragonfly: global links per router (Rina §VI-C: 2)", "1 to 16"),
    ScenarioKey("topology.hosts_per_router", "integer", "", "max(1, a // 2)",
                "dragonfly: hosts h1.. under each router", "1 to 64"),
    ScenarioKey("topology.workers_per_rack", "integer", "", "4",
                "goat-testbed: workers under each of S1 and S2 (GOAT Fig. 4; the PS is under S3)", "1 to 32"),
    # --- switch ------------------------------------------------------------------------------------------------
    ScenarioKey("switch", "mapping", "", "every key's default",
                "the programmable switches' aggregation memory, fragment size, queues and processes"),
    ScenarioKey("switch.slots", "integer", "slots", "1024",
                "aggregator slots per switch, one fragment each; not with memory",
                "1 to 1048576; `inatb run`: slots x lanes at most 4194304"),
    ScenarioKey("switch.memory", "size", "bytes", "- (slots)",
                "the switch's aggregation memory as a paper states it (GOAT §VII-B: ~20 MB), in slots of "
                "lanes x 4 bytes; not with slots",
                "> 0, at most 1000TB; 1 to 1048576 slots after scale", scaled=True),
    ScenarioKey("switch.lanes", "integer", "elements", "64",
                "32-bit gradient elements per fragment", "1 to 255"),
    ScenarioKey("switch.aggregation_capacity", "rate", "b/s", "unlimited",
                "each switch's aggregation processing capacity, enforced by a meter (GRID/InArt)",
                "> 0, at most 1000Tbps",
                scaled=True),
    ScenarioKey("switch.queue_depth", "integer", "packets", "128", "packets per switch egress queue",
                "1 to 100000"),
    ScenarioKey("switch.ecn_threshold", "integer", "packets", "max(1, queue_depth // 2)",
                "the queue depth from which a switch marks packets CE; 0 turns marking off", "0 to 100000"),
    ScenarioKey("switch.processes", "auto | per-switch | integer", "", "auto",
                "how many pyswitch processes the switches share: auto (the planner's count, needing the least "
                "time dilation), per-switch (one each) or that many (bmv2 refuses a number)", ">= 1"),
    # --- jobs --------------------------------------------------------------------------------------------------
    ScenarioKey("jobs", "list", "", "required", "the training jobs, each a mapping", "non-empty"),
    ScenarioKey("jobs[].name", "name", "", "job and its index: job0, job1, ...",
                "the job's name (it becomes file names in the results)",
                "1-64 letters, digits, '-', '_' or '.', not starting with '.'; unique among jobs"),
    ScenarioKey("jobs[].model", "name", "", "resnet18 (custom with submodel_elements)",
                "the model whose gradient profile (size and layers, scaled) the job aggregates: alexnet, "
                "bert_base, densenet121/169/201, inception_v3, lstm, resnet18/34/50/101, vgg11/16/19; with "
                "submodel_elements, a free label"),
    ScenarioKey("jobs[].gradient_size", "size", "bytes", "the model's",
                "the gradient size, stated directly instead of the model's; not with submodel_elements",
                "> 0, at most 1000TB; at most 10000000 fragments per worker per iteration after scale",
                scaled=True),
    ScenarioKey("jobs[].workers", "names", "", "required",
                "the hosts that run the job's workers; a host serves one job in one role (a job's PS may share "
                "a host with one of its workers)", "1 to 64 hosts; at least 2 for ring schemes (rar, h-ar, rina)"),
    ScenarioKey("jobs[].ps", "names", "", "required (absent for ring schemes rar, h-ar, rina)",
                "the hosts of the job's parameter servers; several PSs share the sub-models",
                "at most the number of sub-models"),
    ScenarioKey("jobs[].policy", "choice: ps | atp | switchml | esa | geryon | lbmm | ksgd | goat | goat-async | "
                "grid | inart | inart-equal | rar | h-ar | rina", "", "ps",
                "the control-plane scheme that decides where the job's fragments are aggregated (rar, h-ar, "
                "rina: a ring all-reduce of the workers, without PS)"),
    ScenarioKey("jobs[].iterations", "integer", "", "10",
                "training iterations the job runs", "1 to 1000000"),
    ScenarioKey("jobs[].compute_time", "duration", "s", "0s",
                "emulated computation per iteration (not scaled)", ">= 0, at most 24h"),
    ScenarioKey("jobs[].submodels", "integer", "", "4",
                "sub-models (layer groups) the gradient is split into; not with submodel_size or "
                "submodel_elements", "1 to 65535; at least the number of PSs and at most 4096 per PS"),
    ScenarioKey("jobs[].submodel_size", "size", "bytes", "- (submodels)",
                "split the gradient into pieces of at most this size, across layer boundaries (GOAT §III); "
                "not with submodels or submodel_elements",
                "> 0, at most 1000TB; at most 65535 pieces", scaled=True),
    ScenarioKey("jobs[].submodel_elements", "list of integers", "elements", "- (the model's partition)",
                "the sub-model partition given directly, 32-bit elements per sub-model (for exact fragment "
                "counts, e.g. GOAT Fig. 2); not with submodels, submodel_size or gradient_size",
                "non-empty; each 1 to 250000000000000", scaled=True),
    ScenarioKey("jobs[].window", "integer", "fragments", "min(100, switch.slots); 100 for ring schemes",
                "the most fragments in flight per worker: the transport's cap",
                "1 to 65535; at most switch.slots unless the transport lets the window outrun the slots "
                "(atp with transport_options.slot_bound: false)"),
    ScenarioKey("jobs[].gradient_bound", "number", "", "1",
                "the magnitude bound of the synthetic gradient values; with the worker count it sets the "
                "fixed-point scale, so that the sum of every worker's value cannot overflow int32; with "
                "training, the first iteration's bound of every tensor and every later one's ceiling "
                "(larger values are clipped and counted)",
                "> 0; workers x bound at most 2147483647"),
    ScenarioKey("jobs[].retransmit_timeout", "duration", "s", "200ms",
                "the workers' minimum retransmission timeout (Linux's TCP_RTO_MIN); their RTO follows the "
                "measured RTT above it", "> 0, at most 24h"),
    ScenarioKey("jobs[].aggregation_switches", "list of names", "", "any programmable switch",
                "the switches the job may aggregate on; not for ring schemes",
                "each a programmable switch of the topology"),
    ScenarioKey("jobs[].policy_options", "mapping", "", "-",
                "options of the schemes, keyed by scheme (`{goat: {roundings: 4}}`), so that --set policy=NAME "
                "picks up NAME's", "keys: scheme names (those of jobs[].policy)"),
    ScenarioKey("jobs[].ps_memory", "size", "bytes", "unlimited (0)",
                "the aggregation memory of each of the job's PSs (GOAT's B(alpha)); not for ring schemes",
                ">= 0, at most 1000TB", scaled=True),
    ScenarioKey("jobs[].transport", "choice: atp | switchml | strawasyn | pa-atp | paced", "",
                "switchml for scheme switchml, else atp",
                "how the job's workers send (window, congestion control, timeouts); any PS-based scheme runs with "
                "any transport", "ring schemes: atp only"),
    ScenarioKey("jobs[].transport_options", "mapping", "", "-",
                "options of the job's transport, checked against that transport's OPTIONS"),
    ScenarioKey("jobs[].start", "duration", "s", "0s",
                "the job's first iteration starts this long after the run's start (PA-ATP Fig. 8)",
                ">= 0, at most 24h"),
    ScenarioKey("jobs[].straggler_allowance", "bool", "", "true",
                "whether the workers wait the compute-delay spread (stragglers.compute_delay) for an "
                "iteration's first RESULT before counting fragments as lost; false: their RTO alone, as a "
                "deployed transport"),
    ScenarioKey("jobs[].training", "mapping", "", "- (synthetic gradients)",
                "real training (guide/training.md; the [training] extra): the workers train training.model on "
                "their shards of training.dataset and aggregate its real gradients in fixed point; the "
                "gradient is the model's (not scaled), so not with model, gradient_size, submodel_size or "
                "submodel_elements, and submodels groups its tensors; not for ring schemes",
                "keys: model, dataset, learning_rate, momentum, batch_size, eval_every, target_accuracy"),
    ScenarioKey("jobs[].training.model", "choice: mlp | cnn", "", "required",
                "the model every worker holds: a small MLP (64 hidden units) or a small CNN (two 3x3 "
                "convolutions of 8 and 16 channels)"),
    ScenarioKey("jobs[].training.dataset", "choice: blobs | patterns", "", "blobs for mlp, patterns for cnn",
                "the classification set, generated from the scenario's seed (never downloaded): blobs, 10 "
                "overlapping Gaussian classes in 32 dimensions; patterns, 10 classes of shifted noisy 8x8 "
                "images (cnn needs these)"),
    ScenarioKey("jobs[].training.learning_rate", "number", "", "0.1", "the SGD step size", "> 0, at most 10"),
    ScenarioKey("jobs[].training.momentum", "number", "", "0.9", "SGD's momentum", "0 to 0.999"),
    ScenarioKey("jobs[].training.batch_size", "integer", "examples", "32",
                "examples of its shard each worker computes its gradient on per iteration",
                "1 to the shard's size (4000 / workers)"),
    ScenarioKey("jobs[].training.eval_every", "integer", "iterations", "5",
                "iterations between two evaluations of the model on the held-out set (accuracy.csv)",
                "1 to 1000000"),
    ScenarioKey("jobs[].training.target_accuracy", "number", "share", "- (none)",
                "the held-out accuracy whose first reach time_to_accuracy_s measures", "> 0, at most 1"),
    # --- impairments -------------------------------------------------------------------------------------------
    ScenarioKey("impairments", "list", "", "-",
                "loss, duplication and reordering applied by the switches' P4 program on every target "
                "(not netem)"),
    ScenarioKey("impairments[].link", "[a, b] or all", "", "all",
                "the link whose switch end(s) impair the packets they send on it; all: every switch port",
                "a link of the topology with a switch end"),
    ScenarioKey("impairments[].drop", "number", "share", "0",
                "probability that a packet leaving the port is lost", "0 to 0.5"),
    ScenarioKey("impairments[].duplicate", "number", "share", "0",
                "probability that a packet leaving the port is sent twice", "0 to 0.5"),
    ScenarioKey("impairments[].reorder", "number", "share", "0",
                "probability that a packet leaving the port rejoins the tail of its queue", "0 to 0.5"),
    # --- metrics -----------------------------------------------------------------------------------------------
    ScenarioKey("metrics", "mapping", "", "every key's default", "what the run samples and what its summary counts"),
    ScenarioKey("metrics.sample_interval", "duration", "s", "0.5s",
                "how often the interface and switch counters are sampled", "> 0, at most 24h"),
    ScenarioKey("metrics.iftop_interfaces", "list of names", "", "every PS",
                "hosts whose interface gets the iftop-style table", "hosts of the topology"),
    ScenarioKey("metrics.warmup_iterations", "integer", "", "0",
                "the first iterations left out of times, rates and per-iteration PS ingress (not of totals): "
                "the transports' warm-up", "0 to 1000000; fewer than the fewest iterations of a job"),
    ScenarioKey("metrics.pcap", "list of names", "", "none",
                "interfaces captured into the run's pcap/<interface>.pcap from before the agents start to the "
                "teardown: a host name means the host's own interface <host>-eth0, a switch port is named by its "
                "interface <switch>-eth<port>; each frame is kept up to a whole INA frame of 255 lanes (1100 "
                "bytes)", "hosts of the topology and its switch port interfaces, each once"),
    ScenarioKey("metrics.pcap_max_size", "size", "bytes", "64MB",
                "the cap of each pcap file: its capture stops at the first frame that would take the file "
                "past it (not scaled)", "1kB to 10GB"),
    # --- background --------------------------------------------------------------------------------------------
    ScenarioKey("background", "list", "", "-",
                "background traffic between hosts, planned from the seed: TCP flows with sizes from a "
                "distribution and Poisson arrivals, or constant-rate UDP"),
    ScenarioKey("background[].distribution", "name or file path", "", "hadoop",
                "the flow-size distribution: a name of traffic/cdf/ (hadoop, cache_follower, web_search, "
                "data_mining, ...) or a CDF file's path; constant: one UDP flow per (sender, receiver) at a "
                "constant rate (PA-ATP §V-B)"),
    ScenarioKey("background[].load", "number", "share", "required",
                "the offered load per sender, of the senders' link rate (the slowest sender's where they "
                "differ), or of the bottleneck's rate when given (the senders share it); constant: in Ethernet "
                "frame bits", "> 0, at most 1"),
    ScenarioKey("background[].senders", "names", "", "every host no job uses", "the hosts that send the flows",
                "hosts of the topology; senders and receivers at least two hosts"),
    ScenarioKey("background[].receivers", "names", "", "every host no job uses",
                "the flows' destinations, uniform among them", "hosts of the topology"),
    ScenarioKey("background[].bottleneck", "[a, b]", "", "- (each sender's own link)",
                "a link whose rate the load is relative to, the senders together", "a link of the topology"),
    ScenarioKey("background[].max_flow_size", "size", "bytes", "no truncation",
                "truncates every flow size (after flow_size_scale) to this; not with constant",
                "> 0, at most 1000TB"),
    ScenarioKey("background[].flow_size_scale", "number", "", "1",
                "multiplies every size of the distribution (the load stays, so more flows); not with constant",
                "> 0, at most 1"),
    ScenarioKey("background[].duration", "duration", "s", "as long as the jobs run",
                "how long the flows' window lasts; given, the run lasts that long", ">= 0, at most 24h"),
    ScenarioKey("background[].port", "integer", "", "5001 + the entry's index",
                "the receivers' port for the entry's flows", "1024 to 39999"),
    ScenarioKey("background[].start", "duration", "s", "0s",
                "the flows' window opens this long after the run's start", ">= 0, at most 24h"),
    ScenarioKey("background[].congestion_control", "name", "", "cubic",
                "the flows' TCP congestion control, whatever the host's default (dctcp: the kernel's or the "
                "project's BPF one); not with constant", "1-15 lowercase letters, digits or '_'"),
    ScenarioKey("background[].ecn", "bool", "", "false",
                "whether the TCP flows ask for ECN (RFC 3168), so switch queues' CE marks cut their windows; "
                "not with constant", "the same for every TCP entry a host sends"),
    # --- stragglers --------------------------------------------------------------------------------------------
    ScenarioKey("stragglers", "mapping", "", "-",
                "stragglers and network dynamics: compute delays, timed rate changes, pauses and failures, "
                "heterogeneous host links"),
    ScenarioKey("stragglers.compute_delay", "list", "", "-",
                "extra compute time per worker per iteration, drawn from a distribution"),
    ScenarioKey("stragglers.compute_delay[].workers", "all or names", "", "all",
                "the workers the delay applies to; all: every worker of every job",
                "workers of the jobs, each in one entry at most"),
    ScenarioKey("stragglers.compute_delay[].distribution", "choice: normal | uniform | fixed", "", "normal",
                "how the delay is drawn"),
    ScenarioKey("stragglers.compute_delay[].mean", "duration", "s", "0s",
                "normal: the mean (GOAT §VII-C gives none; 0 is the reading under which K-SGD beats GOAT)",
                ">= 0, at most 24h"),
    ScenarioKey("stragglers.compute_delay[].std", "duration", "s", "0.2s",
                "normal: the standard deviation (GOAT §VII-C)", ">= 0, at most 24h"),
    ScenarioKey("stragglers.compute_delay[].clip", "[duration, duration]", "s", "[0s, 1s]",
                "normal: [low, high], the range draws are clipped to",
                "each >= 0, at most 24h; low at most high"),
    ScenarioKey("stragglers.compute_delay[].low", "duration", "s", "0s", "uniform: the lower bound",
                ">= 0, at most 24h; at most high"),
    ScenarioKey("stragglers.compute_delay[].high", "duration", "s", "1s", "uniform: the upper bound",
                ">= 0, at most 24h"),
    ScenarioKey("stragglers.compute_delay[].value", "duration", "s", "0s", "fixed: the delay",
                ">= 0, at most 24h"),
    ScenarioKey("stragglers.compute_delay[].persistent", "bool", "", "false",
                "true: each worker's delay is drawn once (from the seed) and kept every iteration, a "
                "persistently slow worker; false: drawn afresh every iteration"),
    ScenarioKey("stragglers.rate_changes", "list", "", "-",
                "timed changes of a worker's host NIC rate, both directions"),
    ScenarioKey("stragglers.rate_changes[].host", "name", "", "required",
                "the worker whose host link changes rate", "a worker of a job"),
    ScenarioKey("stragglers.rate_changes[].at", "duration", "s", "0s",
                "when the change starts, after the run's start", ">= 0, at most 24h"),
    ScenarioKey("stragglers.rate_changes[].duration", "duration", "s", "required",
                "how long the change lasts", "> 0, at most 24h; no overlap with another change of the interface"),
    ScenarioKey("stragglers.rate_changes[].rate", "rate", "b/s", "required", "the rate during the change",
                "> 0, at most 1000Tbps", scaled=True),
    ScenarioKey("stragglers.pauses", "list", "", "-", "timed pauses of a worker's agent (SIGSTOP / SIGCONT)"),
    ScenarioKey("stragglers.pauses[].worker", "name", "", "required", "the worker paused", "a worker of a job"),
    ScenarioKey("stragglers.pauses[].at", "duration", "s", "0s",
                "when the pause starts, after the run's start", ">= 0, at most 24h"),
    ScenarioKey("stragglers.pauses[].duration", "duration", "s", "required", "how long the pause lasts",
                "> 0, at most 24h"),
    ScenarioKey("stragglers.link_degradations", "list", "", "-", "timed rate changes of a link"),
    ScenarioKey("stragglers.link_degradations[].link", "[a, b]", "", "required", "the link whose rate changes",
                "a link of the topology"),
    ScenarioKey("stragglers.link_degradations[].at", "duration", "s", "0s",
                "when the change starts, after the run's start", ">= 0, at most 24h"),
    ScenarioKey("stragglers.link_degradations[].duration", "duration", "s", "required",
                "how long the change lasts", "> 0, at most 24h; no overlap with another change of the link"),
    ScenarioKey("stragglers.link_degradations[].rate", "rate", "b/s", "required", "the link's rate during the change",
                "> 0, at most 1000Tbps", scaled=True),
    ScenarioKey("stragglers.failures", "list", "", "-",
                "worker failures: the agent is killed (SIGKILL) for good (Rina §IV-C2; scheme rina only)"),
    ScenarioKey("stragglers.failures[].worker", "name", "", "required", "the worker that fails",
                "a worker of a scheme rina job (the control plane checks it); each worker fails at most once"),
    ScenarioKey("stragglers.failures[].at", "duration", "s", "0s", "when it fails, after the run's start",
                ">= 0, at most 24h"),
    ScenarioKey("stragglers.heterogeneous_links", "mapping", "", "-",
                "host link rates drawn per host from the seed: {range: [low, high]} or {normal: {mean, std}}",
                "exactly one of range and normal"),
    ScenarioKey("stragglers.heterogeneous_links.range", "[rate, rate]", "b/s", "-",
                "[low, high]: each host link's rate uniform in it (InArt §5: [10Mbps, 30Mbps])",
                "each > 0, at most 1000Tbps; low at most high", scaled=True),
    ScenarioKey("stragglers.heterogeneous_links.normal", "mapping", "", "-",
                "each host link at its rate times a ratio drawn from N(mean, std), clipped to [0.05, 1] "
                "(GOAT §VII-D)"),
    ScenarioKey("stragglers.heterogeneous_links.normal.mean", "number", "share", "1", "the ratio's mean",
                "> 0, at most 1"),
    ScenarioKey("stragglers.heterogeneous_links.normal.std", "number", "", "0.2", "the ratio's standard deviation",
                "0 to 10"),
    # --- simulation --------------------------------------------------------------------------------------------
    ScenarioKey("simulation", "mapping", "", "every key's default",
                "inputs of the flow- and fragment-level simulator (`inatb simulate`) only"),
    ScenarioKey("simulation.worker_start", "mapping", "", "every worker at 0",
                "{worker: n}: fragment times each worker starts late in the fragment-level model (GOAT "
                "Fig. 2(b)); the emulation refuses it", "keys: workers of the jobs"),
    ScenarioKey("simulation.worker_start.<worker>", "integer", "fragments", "0",
                "fragment times the worker (a worker of a job as key) starts late", "0 to 10000000"),
    ScenarioKey("simulation.worker_pacing", "choice: uniform | host_link", "", "uniform",
                "how often a worker sends a fragment in the fragment-level model: uniform (one per time unit) "
                "or host_link (one every r_max / r_w, r_w its host link's rate)"),
    ScenarioKey("simulation.max_fragment_events", "integer", "", "2000000",
                "above this many fragment-hops per iteration the fragment-level model is replaced by its "
                "analytic count (no collisions)", "0 to 1099511627776"),
    ScenarioKey("simulation.results", "bool", "", "true",
                "whether the fluid model loads links with the RESULTs the PSs send back; false counts the "
                "gradient push only, as the papers' motivating examples"),
)
