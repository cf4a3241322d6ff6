"""The ``switch`` and ``jobs`` sections resolved into :class:`SwitchSettings` and :class:`JobSpec`: each
job's scheme, hosts, model and sub-model partition (scaled), fragments, gradient bound, aggregation
switches, window and transport, and the options of its scheme (``policy_options``) and of its transport
(``transport_options``)."""

from testbed import gradient_profiles
from testbed.agents.transport import TRANSPORTS, default_transport
from testbed.dataplane.wire import MAX_WORKERS_PER_JOB, choose_scale_bits, fragments_of
from testbed.errors import brief_repr as _brief
from testbed.scenario.model import JobSpec, SwitchSettings, TrainingSpec
from testbed.scenario.schema import (AUTO_PROCESSES, DEFAULT_DATASET, DEFAULT_MIN_RTO, DEFAULT_WINDOW, JOB_KEYS,
                                     MAX_FRAGMENTS_PER_ITERATION, MAX_SIZE_BYTES, NOT_WITH_TRAINING,
                                     PER_SWITCH_PROCESSES, SCHEME_NAMES, SCHEME_OPTIONS, RING_SCHEMES,
                                     RING_TRANSPORTS, SWITCH_KEYS, TRAINING_KEYS, TRANSPORT_NAMES)
from testbed.training import datasets as training_datasets, models as training_models


def resolve_switch(c, spec, scale):
    c.keys(spec, "switch", SWITCH_KEYS)
    s = SwitchSettings()
    s.slots = c.integer(spec.get("slots", s.slots), "switch.slots", 1, 1 << 20)
    s.lanes = c.integer(spec.get("lanes", s.lanes), "switch.lanes", 1, 255)
    if "memory" in spec:
        # A switch's aggregation memory as a paper states it (GOAT §VII-B: ~20 MB of a Tofino), scaled like
        # the gradients, in slots of one fragment (lanes x 4 bytes) each.
        if "slots" in spec:
            c.fail("switch.memory", "give either memory (scaled, in slots of lanes x 4 bytes) or slots, not both")
        memory_bytes = c.size_bytes(spec["memory"], "switch.memory") * scale
        s.slots = int(memory_bytes // (4 * s.lanes))
        if not 1 <= s.slots <= 1 << 20:
            c.fail("switch.memory", f"{memory_bytes:,.0f} B after scale is {s.slots} slots of {4 * s.lanes} B; "
                                    f"expected 1 to {1 << 20} (raise or lower the memory, or scale)")
    if "aggregation_capacity" in spec:
        s.aggregation_capacity_bps = c.rate_bps(spec["aggregation_capacity"], "switch.aggregation_capacity") * scale
    s.queue_depth_pkts = c.integer(spec.get("queue_depth", s.queue_depth_pkts), "switch.queue_depth", 1, 100000)
    # Default: half the queue, so congestion-controlled senders (transport atp) halve their windows
    # before the queue tail-drops, while a burst from a switch process that waited for a core (a few
    # milliseconds of frames) does not mark; 0 turns marking off.
    s.ecn_threshold_pkts = c.integer(spec.get("ecn_threshold", max(1, s.queue_depth_pkts // 2)),
                                     "switch.ecn_threshold", 0, 100000)
    processes = spec.get("processes", AUTO_PROCESSES)
    if processes not in (AUTO_PROCESSES, PER_SWITCH_PROCESSES) and \
            (isinstance(processes, bool) or not isinstance(processes, int) or processes < 1):
        c.fail("switch.processes", f"expected {AUTO_PROCESSES}, {PER_SWITCH_PROCESSES} or a whole number of "
                                   f"processes >= 1, got {_brief(processes)}")
    s.processes = processes
    return s


def resolve_jobs(c, spec, topo, scale, switch):
    if not isinstance(spec, list) or not spec:
        c.fail("jobs", "expected a non-empty list of jobs")
    hosts = {h.name for h in topo.hosts()}
    used = {}
    jobs = [_resolve_job(c, i, job, topo, hosts, used, scale, switch) for i, job in enumerate(spec)]
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        c.fail("jobs", f"job names must be unique, got {names}")
    return jobs


def _resolve_job(c, i, job, topo, hosts, used, scale, switch):
    """``jobs.<i>`` -> its JobSpec; ``used`` (host -> the job and role it serves) gains the job's hosts."""
    p = f"jobs.{i}"
    c.keys(job, p, JOB_KEYS)
    scheme = _job_scheme(c, job, p)
    ring = scheme in RING_SCHEMES
    name = c.file_name(job.get("name", f"job{i}"), f"{p}.name")
    workers, ps = _job_hosts(c, job, p, scheme, name, hosts, used)
    training = _job_training(c, job, p, scheme, len(workers)) if "training" in job else None
    if training:
        model_name, elements = training.model, _training_submodels(c, job, p, training)
        submodels = len(elements)
    else:
        model_name, elements, submodels = _job_submodels(c, job, p, scale)
    if not ring and submodels > len(ps) * 4096:
        c.fail(f"{p}.submodels", "too many sub-models")
    if len(ps) > submodels:
        c.fail(f"{p}.ps", f"{len(ps)} parameter servers but only {submodels} sub-models to share among them")
    _check_fragments(c, job, p, elements, switch.lanes)
    bound = c.number(job.get("gradient_bound", 1.0), f"{p}.gradient_bound", 0, low_open=True)
    try:
        scale_bits = choose_scale_bits(len(workers), bound)
    except ValueError as exc:
        c.fail(f"{p}.gradient_bound", str(exc))
    agg_switches = _job_aggregation_switches(c, job, p, scheme, topo)
    transport, window, transport_options = _job_transport(c, job, p, scheme, switch, elements, scale)
    return JobSpec(
        name=name, job_id=i + 1, model=model_name, gradient_bytes=4 * sum(elements),
        submodel_elements=elements, workers=workers, ps=ps, scheme=scheme,
        iterations=c.integer(job.get("iterations", 10), f"{p}.iterations", 1, 10**6),
        compute_time_s=c.duration_s(job.get("compute_time", "0s"), f"{p}.compute_time"),
        window=window, gradient_bound=bound, scale_bits=scale_bits,
        retransmit_timeout_s=c.duration_s(job.get("retransmit_timeout", DEFAULT_MIN_RTO), f"{p}.retransmit_timeout",
                                          allow_zero=False),
        aggregation_switches=agg_switches,
        policy_options=_resolve_policy_options(c, job.get("policy_options") or {}, f"{p}.policy_options",
                                               workers),
        ps_memory_bytes=c.size_bytes(job["ps_memory"], f"{p}.ps_memory", allow_zero=True) * scale
        if "ps_memory" in job else 0.0,
        transport=transport, transport_options=transport_options,
        start_s=c.duration_s(job.get("start", "0s"), f"{p}.start"),
        straggler_allowance=c.boolean(job.get("straggler_allowance", True), f"{p}.straggler_allowance"),
        training=training)


def _job_training(c, job, p, scheme, workers):
    """``training:`` -> its TrainingSpec; the job then states no gradient of its own (NOT_WITH_TRAINING) and
    aggregates at a PS or in the network (a ring scheme's workers do not train yet)."""
    tp = f"{p}.training"
    spec = job["training"]
    c.keys(spec, tp, TRAINING_KEYS)
    for other in NOT_WITH_TRAINING:
        if other in job:
            c.fail(f"{p}.{other}", "a job with training sends its model's gradient; remove "
                                   f"{other} (training.model names the model)")
    if scheme in RING_SCHEMES:
        c.fail(tp, f"scheme {scheme} is a ring all-reduce; training runs with a PS scheme (e.g. ps, atp, ksgd)")
    if "model" not in spec:
        c.fail(f"{tp}.model", f"missing (required); expected one of {', '.join(training_models.MODELS)}")
    model = c.choice(spec["model"], f"{tp}.model", training_models.MODELS)
    dataset = c.choice(spec.get("dataset", DEFAULT_DATASET[model]), f"{tp}.dataset", training_datasets.DATASETS)
    reason = training_models.unsupported(model, training_datasets.INPUT_SHAPES[dataset])
    if reason:
        c.fail(f"{tp}.dataset", f"{reason}; expected a dataset of images (patterns)")
    shard = training_datasets.TRAIN_EXAMPLES // workers
    target = spec.get("target_accuracy")
    return TrainingSpec(
        model=model, dataset=dataset,
        learning_rate=c.number(spec.get("learning_rate", 0.1), f"{tp}.learning_rate", 0, 10, low_open=True),
        momentum=c.number(spec.get("momentum", 0.9), f"{tp}.momentum", 0, 0.999),
        batch_size=c.integer(spec.get("batch_size", 32), f"{tp}.batch_size", 1, shard),
        eval_every=c.integer(spec.get("eval_every", 5), f"{tp}.eval_every", 1, 10**6),
        target_accuracy=None if target is None else c.number(target, f"{tp}.target_accuracy", 0, 1,
                                                             low_open=True))


def _training_submodels(c, job, p, training):
    """Elements per sub-model of a training job: its model's parameter tensors (not scaled: the gradient is
    the model's) in ``submodels`` contiguous layer groups (at most one per tensor; 4 unless given)."""
    shapes = training_models.tensor_shapes(training.model, training_datasets.INPUT_SHAPES[training.dataset],
                                           training_datasets.CLASSES)
    sizes = training_models.tensor_sizes(training.model, training_datasets.INPUT_SHAPES[training.dataset],
                                         training_datasets.CLASSES)
    tensors = tuple(zip((name for name, _ in shapes), sizes))
    groups = c.integer(job.get("submodels", min(4, len(tensors))), f"{p}.submodels", 1, len(tensors))
    return gradient_profiles.GradientProfile(training.model, tensors).partition(groups)


def _job_scheme(c, job, p):
    """The job's scheme (``policy``, ps unless given); a ring scheme's job needs ``workers`` and has no
    ``ps``, any other's needs both."""
    scheme = job.get("policy", "ps")
    if not isinstance(scheme, str) or scheme not in SCHEME_NAMES:
        c.fail(f"{p}.policy", f"unknown scheme {_brief(scheme)}; expected one of {', '.join(SCHEME_NAMES)}")
    ring = scheme in RING_SCHEMES
    if ring and "ps" in job:
        c.fail(f"{p}.ps", f"scheme {scheme} is a ring all-reduce of the workers: it has no parameter server "
                          f"(remove ps, or choose a PS scheme)")
    for required in ("workers",) if ring else ("workers", "ps"):
        if required not in job:
            c.fail(f"{p}.{required}", "missing (required)")
    return scheme


def _job_hosts(c, job, p, scheme, name, hosts, used):
    """``(workers, ps)`` of the job named ``name``: hosts of the topology that serve no other job (a PS may
    share a host with one of the job's own workers), at most MAX_WORKERS_PER_JOB workers; ``used`` gains them."""
    ring = scheme in RING_SCHEMES
    workers = c.names(job["workers"], f"{p}.workers")
    if ring and len(workers) < 2:
        c.fail(f"{p}.workers", f"a ring all-reduce (scheme {scheme}) needs at least 2 workers")
    ps = [] if ring else c.names(job["ps"], f"{p}.ps")
    for role, names in (("workers", workers), ("ps", ps)):
        for k, h in enumerate(names):
            if h not in hosts:
                listed = ", ".join(sorted(hosts)[:12]) + (" ..." if len(hosts) > 12 else "")
                c.fail(f"{p}.{role}.{k}", f"host {_brief(h)} is not defined in the topology (hosts: {listed})")
            if h in used and not (role == "ps" and h in workers):
                c.fail(f"{p}.{role}.{k}", f"host {h!r} already serves {used[h]}")
            used[h] = f"{name} as {role}"
    if len(workers) > MAX_WORKERS_PER_JOB:
        c.fail(f"{p}.workers", f"{len(workers)} workers; the INA bitmap holds at most {MAX_WORKERS_PER_JOB}")
    return workers, ps


def _job_submodels(c, job, p, scale):
    """``(model name, elements per sub-model after scale, number of sub-models)``: the partition given
    directly (``submodel_elements``), or a model's profile (its size ``gradient_size`` if given), scaled
    and cut into pieces of ``submodel_size`` or into ``submodels`` layer groups."""
    if "submodel_elements" in job:
        model_name, elements = _explicit_submodels(c, job, p, scale)
        return model_name, elements, len(elements)
    model = job.get("model", "resnet18")
    try:
        profile = gradient_profiles.load_profile(model) if isinstance(model, str) else None
    except KeyError:
        profile = None
    if profile is None:
        c.fail(f"{p}.model",
               f"unknown model {_brief(model)}; expected one of {', '.join(gradient_profiles.available_models())}")
    if "gradient_size" in job:
        profile = profile.with_gradient_bytes(c.size_bytes(job["gradient_size"], f"{p}.gradient_size"))
    profile = profile.scaled(scale)
    if "submodel_size" in job:
        if "submodels" in job:
            c.fail(f"{p}.submodels", "give either submodels (layer groups) or submodel_size, not both")
        most_elements = max(1, round(c.size_bytes(job["submodel_size"], f"{p}.submodel_size") * scale / 4))
        elements = gradient_profiles.even_pieces(profile.elements, most_elements)
        submodels = len(elements)
        if submodels > 65535:
            c.fail(f"{p}.submodel_size", f"{submodels:,} sub-models of the {profile.gradient_bytes:,} B "
                                         f"gradient; at most 65,535 (give a larger size)")
        return profile.name, elements, submodels
    submodels = c.integer(job.get("submodels", 4), f"{p}.submodels", 1, 65535)
    return profile.name, profile.partition(submodels), submodels


def _job_aggregation_switches(c, job, p, scheme, topo):
    """``aggregation_switches``: programmable switches of the topology (empty: any); a ring scheme takes
    neither them nor ``ps_memory``."""
    for key in ("aggregation_switches", "ps_memory"):
        if scheme in RING_SCHEMES and key in job:
            c.fail(f"{p}.{key}", f"scheme {scheme} aggregates nowhere but in its workers; remove {key}")
    agg_switches = c.items(job.get("aggregation_switches"), f"{p}.aggregation_switches", "switch names")
    for k, sw in enumerate(agg_switches):
        node = topo.nodes.get(sw) if isinstance(sw, str) else None
        if node is None or node.kind != "switch":
            c.fail(f"{p}.aggregation_switches.{k}", f"{_brief(sw)} is not a switch of this topology")
        if not node.programmable:
            c.fail(f"{p}.aggregation_switches.{k}",
                   f"switch {sw!r} is not programmable; aggregation needs a programmable switch "
                   f"(see topology.programmable)")
    return list(agg_switches)


def _job_transport(c, job, p, scheme, switch, elements, scale):
    """``(transport, window, transport_options)`` of the job: how its workers send, their window of
    fragments (within the switches' slots unless the transport lets it outrun them) and the transport's
    options."""
    ring = scheme in RING_SCHEMES
    transport = c.choice(job.get("transport", default_transport(scheme)), f"{p}.transport",
                         RING_TRANSPORTS if ring else TRANSPORT_NAMES)
    # Default: ATP's largest window (100 fragments), so a worker's window can cover the round trip of
    # a 5 Mb/s link with the switches' processing in it (RTTs of 30-50 ms measured on 2 cores); at most
    # the switches' slots (a switch of a paper's small memory at reduced scale holds fewer).
    window = c.integer(job.get("window", DEFAULT_WINDOW if ring else min(DEFAULT_WINDOW, switch.slots)),
                       f"{p}.window", 1, 65535)
    transport_options = _resolve_transport_options(
        c, job.get("transport_options"), f"{p}.transport_options", transport, window,
        sum(fragments_of(n, switch.lanes) for n in elements), scale)
    # ATP's window is a congestion window: with slot_bound false it may outrun the slots, and a
    # fragment that finds its slot still held by the one a window earlier overflows (GOAT §III-A).
    if not ring and window > switch.slots and TRANSPORTS[transport].window_within_slots(transport_options):
        hint = (" (transport_options.slot_bound: false lets ATP's window outrun them)" if transport == "atp"
                else "")
        c.fail(f"{p}.window", f"window {window} exceeds switch.slots {switch.slots}{hint}")
    return transport, window, transport_options


def _explicit_submodels(c, job, p, scale):
    """``submodel_elements: [64, 64, 64]``: the sub-model partition given directly (elements, scaled).

    For examples that need exact fragment counts or split ratios (GOAT Fig. 2's
    three one-fragment sub-models); excludes ``submodels`` and ``gradient_size``.
    """
    for other in ("submodels", "submodel_size", "gradient_size"):
        if other in job:
            c.fail(f"{p}.{other}", "give either submodel_elements or submodels/submodel_size/gradient_size, "
                                   "not both")
    spec = job["submodel_elements"]
    if not isinstance(spec, list) or not spec:
        c.fail(f"{p}.submodel_elements", "expected a non-empty list of element counts, e.g. [64, 64, 64]")
    elements = [max(1, round(c.integer(n, f"{p}.submodel_elements.{k}", 1, int(MAX_SIZE_BYTES) // 4) * scale))
                for k, n in enumerate(spec)]
    model = job.get("model", "custom")
    if not isinstance(model, str):
        c.fail(f"{p}.model", f"expected a label (text), got {_brief(model)}")
    return model, elements


def _check_fragments(c, job, p, elements, lanes):
    """Refuse a gradient whose fragments per worker per iteration exceed MAX_FRAGMENTS_PER_ITERATION."""
    fragments = sum(fragments_of(n, lanes) for n in elements)
    if fragments > MAX_FRAGMENTS_PER_ITERATION:
        field = next((k for k in ("gradient_size", "submodel_elements", "model") if k in job), "model")
        c.fail(f"{p}.{field}", f"{fragments:,} fragments of {lanes} lanes per worker per iteration after scale; "
                               f"at most {MAX_FRAGMENTS_PER_ITERATION:,} (lower the size or scale)")


def _resolve_policy_options(c, spec, path, workers):
    """``policy_options: {goat: {roundings: 4}, ksgd: {k: 6}}`` -> {scheme: {option: value}} (see SCHEME_OPTIONS)."""
    c.keys(spec, path, set(SCHEME_OPTIONS))
    resolved = {}
    for scheme, options in spec.items():
        sp = f"{path}.{scheme}"
        allowed = SCHEME_OPTIONS[scheme]
        if not allowed and options:
            c.fail(sp, f"{scheme} takes no options")
        c.keys(options or {}, sp, set(allowed))
        out = {}
        for key, value in (options or {}).items():
            kind, kp = allowed[key], f"{sp}.{key}"
            if kind[0] == "int":
                out[key] = c.integer(value, kp, kind[1], kind[2])
            elif kind[0] == "number":
                out[key] = c.number(value, kp, kind[1], kind[2])
            elif kind[0] == "bool":
                out[key] = c.boolean(value, kp)
            elif kind[0] == "choice":
                out[key] = c.choice(value, kp, kind[1])
            elif kind[0] == "int_or":
                if value != kind[3] and (isinstance(value, bool) or not isinstance(value, int)
                                         or not kind[1] <= value <= kind[2]):
                    c.fail(kp, f"expected an integer in [{kind[1]}, {kind[2]}] or {kind[3]}, got {_brief(value)}")
                out[key] = value
            elif kind[0] == "duration":
                out[f"{key}_s"] = c.duration_s(value, kp, allow_zero=False)
            else:  # worker_durations
                c.keys(value, kp, set(workers))
                out[f"{key}_s"] = {w: c.duration_s(d, f"{kp}.{w}", allow_zero=False) for w, d in value.items()}
        resolved[scheme] = out
    return resolved


def _resolve_transport_options(c, spec, path, transport, window, fragments, scale):
    """``transport_options: {initial_cwd: 16, awd_limit: false}`` for the job's ``transport``, checked
    against that transport's ``OPTIONS`` (kinds in testbed/agents/transport/base.py) and its
    ``option_conflict``; ``window`` is the job's window, ``fragments`` what a worker sends per iteration."""
    if spec is None:
        return {}
    allowed = TRANSPORTS[transport].OPTIONS
    if not isinstance(spec, dict):
        c.fail(path, f"expected a mapping of {transport}'s options, got {_brief(spec)}")
    if spec and not allowed:
        c.fail(path, f"transport {transport} takes no options")
    c.keys(spec, path, set(allowed))
    out = {}
    for key, value in spec.items():
        kind, kp = allowed[key], f"{path}.{key}"
        if kind[0] == "window":
            most = window if kind[1] is None else min(window, kind[1])
            out[key] = c.integer(value, kp, 1, most)
        elif kind[0] == "fragments":
            out[key] = c.integer(value, kp, 1, fragments)
        elif kind[0] == "weight":
            out[key] = c.number(value, kp, 0, 1, low_open=True)
        elif kind[0] == "duration":
            out[f"{key}_s"] = c.duration_s(value, kp, allow_zero=False)
        elif kind[0] == "rate":
            out[f"{key}_bps"] = c.rate_bps(value, kp) * scale
        else:  # bool
            out[key] = c.boolean(value, kp)
    conflict = TRANSPORTS[transport].option_conflict(out)
    if conflict:
        c.fail(f"{path}.{conflict[0]}", conflict[1])
    return out
