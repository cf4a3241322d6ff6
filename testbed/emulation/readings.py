"""What the orchestrator reads from a live run before it takes the network down: the processes to sample
for CPU, each switch's final counters and its process's host delay, and the hosts' losses. Each reading
goes into the run's :class:`testbed.emulation.results.RunObservations`; nothing here starts or stops
anything."""

from testbed.budget import switch_process_phrase
from testbed.emulation.network import run_in
from testbed.metrics.losses import host_losses


def switch_processes(network, topology) -> dict:
    """Every switch process of the run by its pid: ``{pid: (its switches' names, in topology order)}``
    (an ebpf switch has no process and is absent)."""
    switches_of_pid = {}
    for sw in topology.switches():
        proc = getattr(network.switch(sw.name), "proc", None)
        if proc is not None:
            switches_of_pid.setdefault(proc.pid, []).append(sw.name)
    return {pid: tuple(names) for pid, names in switches_of_pid.items()}


def process_ids(network, topology, agents: dict) -> dict:
    """Every switch and agent process of the run: ``{"switch s1": pid, "worker w1": pid, ...}``; switches
    sharing a process (``switch.processes``) are one entry, ``"switch process of s1 and 3 more"``."""
    pids = {switch_process_phrase(names): pid for pid, names in switch_processes(network, topology).items()}
    for name, agent in agents.items():
        pids[f"{agent.role} {name}"] = agent.proc.pid
    return pids


def read_switches(seen, runtimes: dict, network, topology) -> None:
    """The switches' counters, read once (on a failed run too: they say where packets went), and each
    switch process's host delay (a pyswitch process's meter, a bmv2 or ebpf switch's ``switch_wait``
    register), into ``seen``; ``network`` is None when the run failed before it was built."""
    for name, runtime in runtimes.items():
        if name not in seen.switch_stats:
            seen.switch_stats[name] = runtime.counters()
    if network is None or seen.switch_host_delay:
        return
    processes = list(switch_processes(network, topology).values())
    in_process = {name for names in processes for name in names}
    # a switch without a process (ebpf): its own switch_wait register
    processes += [(sw.name,) for sw in topology.switches() if sw.name not in in_process]
    for names in processes:
        runtime = runtimes.get(names[0])
        if runtime is not None:
            seen.switch_host_delay[switch_process_phrase(names)] = runtime.host_delay()


def read_host_losses(seen, network, jobs) -> None:
    """Each worker's and PS's losses at its own interface (:func:`testbed.metrics.losses.host_losses`)."""
    for job in jobs:
        for host in list(job.workers) + list(job.ps):
            seen.host_losses[host] = host_losses(network.host(host), f"{host}-eth0", run_in)
