"""CPU use of a run's switch and agent processes, sampled over time.

A figure is only a result if the run was link-bound: a switch or agent that
had a whole core to itself and still could not keep up measures the machine,
not the scheme. :class:`CpuSampler` reads each process's user + system time
(``/proc/<pid>/stat``, fields 14-15, in clock ticks) and the machine's busy
time (``/proc/stat``) every ``interval_s``; :meth:`CpuSampler.shares` turns
the samples into, per process, the mean share of one core over the run and
the largest share over any one interval, and the same for the machine (share
of all its cores); per process too the largest share of one core any one of
its threads used over an interval (``thread_peak``, from
``/proc/<pid>/task/<tid>/stat``), the share of time it spent runnable but
waiting for a core (``waited_mean``, ``waited_peak``: the scheduler's run
delay, ``/proc/<pid>/schedstat``; reported, not judged), and the part of its
mean spent in the kernel (``system_mean``: its system time, field 15; the
system calls, and the network's work the kernel does in them, such as the
ebpf target's programs and the qdiscs, veths and sockets a sent packet passes).

A process keeps up as long as none of its threads is short of a core: the
switches and agents of this project are single-threaded (``thread_peak`` is
their ``peak``), but bmv2's ``simple_switch`` runs its ingress and egress
pipelines in threads of their own, so its process total may pass one core
while each stage still has time to spare (measured on GOAT's testbed at
1/1000: a process peak of 0.48 core with its busiest thread at 0.32).
:func:`cpu_share` and :func:`busiest_thread_peak` are the pure part,
unit-tested.

Peaks are taken over intervals of at least half ``interval_s``
(:func:`spaced_samples`): the last sample, taken when the sampler stops, can
come a millisecond after the one before it, and one clock tick (10 ms) over a
millisecond reads as ten cores.
"""

import os
import threading
import time

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def cgroup_cpu_limit(proc_cgroup: str, read_file) -> float:
    """The cores a CPU quota allows the process whose ``/proc/<pid>/cgroup`` text is ``proc_cgroup``, or None
    without a quota: cgroup v2's ``cpu.max`` ("QUOTA PERIOD" or "max PERIOD") or v1's ``cpu.cfs_quota_us``
    over ``cpu.cfs_period_us`` (-1: none), in its cgroup and every parent (the tightest counts).
    ``read_file(path) -> text or None`` reads below ``/sys/fs/cgroup``."""
    limits = []
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        segments = [s for s in path.split("/") if s]
        for depth in range(len(segments), -1, -1):
            here = "/".join(segments[:depth])
            if controllers == "":
                text = read_file(f"/sys/fs/cgroup/unified/{here}/cpu.max") or \
                    read_file(f"/sys/fs/cgroup/{here}/cpu.max")
                fields = (text or "").split()
                if len(fields) == 2 and fields[0] != "max":
                    limits.append(int(fields[0]) / int(fields[1]))
            elif "cpu" in controllers.split(","):
                base = f"/sys/fs/cgroup/{controllers}/{here}"
                quota, period = read_file(f"{base}/cpu.cfs_quota_us"), read_file(f"{base}/cpu.cfs_period_us")
                if quota and period and int(quota) > 0:
                    limits.append(int(quota) / int(period))
    return min(limits) if limits else None


def _read_or_none(path: str):
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None


def available_cores() -> float:
    """The cores this process and its children may use: the CPUs it may run on (``taskset``, cpusets), less
    any CPU quota of its cgroup (:func:`cgroup_cpu_limit`). The packet budget plans on these, and the
    machine's busy share is counted against them: a quota of one core on a two-core machine is a one-core
    machine for the run."""
    cores = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    limit = cgroup_cpu_limit(_read_or_none("/proc/self/cgroup") or "", _read_or_none)
    return min(cores, limit) if limit else cores


def process_times_s(pid: int):
    """(user, system) CPU seconds of ``pid`` so far, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return process_stat_times_s(f.read())
    except OSError:
        return None


def process_stat_times_s(text: str) -> tuple:
    """(user, system) CPU seconds from the text of a ``/proc/.../stat`` file."""
    fields = text[text.rindex(")") + 2:].split()   # after "pid (comm) ": state is fields[0]
    return int(fields[11]) / CLOCK_TICKS_PER_S, int(fields[12]) / CLOCK_TICKS_PER_S


def thread_cpu_s(pid: int) -> dict:
    """``{tid: user + system CPU seconds}`` of each thread of ``pid`` now ({} once it is gone; a thread that
    ends while being read is left out)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    threads = {}
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                threads[int(tid)] = sum(process_stat_times_s(f.read()))
        except (OSError, ValueError):
            continue
    return threads


def process_wait_s(pid: int):
    """Seconds ``pid`` has spent runnable but waiting for a core (``/proc/<pid>/schedstat``, its second
    field, the scheduler's run delay in ns), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def machine_cpu_s(cpus=None):
    """(busy, total) CPU seconds of the machine from /proc/stat: over all cores, or over the cores numbered in
    ``cpus`` (the run's: work elsewhere on a machine the run is held to one core of is not the run's)."""
    with open("/proc/stat") as f:
        return stat_cpu_s(f.read(), cpus)


def stat_cpu_s(stat_text: str, cpus=None):
    """(busy, total) CPU seconds from the text of /proc/stat (:func:`machine_cpu_s`)."""
    busy_s = total_s = 0.0
    for line in stat_text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu"):
            break
        if (cpus is None and name == "cpu") or (cpus is not None and name[3:].isdigit() and int(name[3:]) in cpus):
            values = [int(v) for v in fields]
            idle = values[3] + (values[4] if len(values) > 4 else 0)    # idle + iowait
            busy_s += (sum(values[:8]) - idle) / CLOCK_TICKS_PER_S
            total_s += sum(values[:8]) / CLOCK_TICKS_PER_S
    return busy_s, total_s


def spaced_samples(samples, min_interval_s: float):
    """``samples`` ([(wall_s, ...)], in time order) thinned so that consecutive ones are at least
    ``min_interval_s`` apart: a sample closer than that to the last one kept is dropped, except the final
    sample, which replaces the last one kept instead (its interval joins the one before). The first and
    the final sample are always kept."""
    kept = []
    for sample in samples:
        if not kept or sample[0] - kept[-1][0] >= min_interval_s:
            kept.append(sample)
    if samples and kept[-1] is not samples[-1]:
        if len(kept) > 1:
            kept[-1] = samples[-1]
        else:
            kept.append(samples[-1])
    return kept


def cpu_share(samples):
    """Mean and peak share from ``[(wall_s, cpu_s)]`` samples of one process (1.0 = one core busy).

    Returns ``{"mean": m, "peak": p}``; None where fewer than two samples exist.
    """
    samples = [(t, c) for t, c in samples if c is not None]
    if len(samples) < 2:
        return None
    (t_first, c_first), (t_last, c_last) = samples[0], samples[-1]
    peak = 0.0
    for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
        if t1 > t0:
            peak = max(peak, (c1 - c0) / (t1 - t0))
    mean = (c_last - c_first) / (t_last - t_first) if t_last > t_first else 0.0
    return {"mean": round(mean, 4), "peak": round(peak, 4)}


def busiest_thread_peak(samples):
    """The largest share of one core any single thread used over one interval, from ``[(wall_s, {tid:
    cpu_s})]`` samples of one process (a thread counts over the intervals it was seen at both ends of);
    None where fewer than two samples exist."""
    if len(samples) < 2:
        return None
    peak = 0.0
    for (t0, before), (t1, after) in zip(samples, samples[1:]):
        if t1 > t0:
            for tid in before.keys() & after.keys():
                peak = max(peak, (after[tid] - before[tid]) / (t1 - t0))
    return round(peak, 4)


class CpuSampler(threading.Thread):
    """Samples the CPU time of ``pids`` ({name: pid}) and of the machine until ``stop()``."""

    def __init__(self, pids: dict, interval_s: float = 1.0, clock=time.monotonic):
        super().__init__(name="cpu-sampler", daemon=True)
        self.pids = dict(pids)
        self.interval_s = interval_s
        self.clock = clock
        self.samples = {name: [] for name in self.pids}
        self.system = {name: [] for name in self.pids}    # [(wall_s, system CPU seconds)]
        self.waits = {name: [] for name in self.pids}     # [(wall_s, seconds waited for a core)]
        self.threads = {name: [] for name in self.pids}   # [(wall_s, {tid: cpu_s})]
        self.machine = []            # [(wall_s, busy_s / cores)]
        self.cores = available_cores()
        self.cpus = frozenset(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        self._stop_event = threading.Event()

    def sample(self):
        now = self.clock()
        for name, pid in self.pids.items():
            times = process_times_s(pid)
            self.samples[name].append((now, None if times is None else sum(times)))
            self.system[name].append((now, None if times is None else times[1]))
            self.waits[name].append((now, process_wait_s(pid)))
            self.threads[name].append((now, thread_cpu_s(pid)))
        busy_s, _ = machine_cpu_s(self.cpus)
        self.machine.append((now, busy_s / self.cores))

    def run(self):
        self.sample()
        while not self._stop_event.wait(self.interval_s):
            self.sample()
        self.sample()

    def stop(self):
        self._stop_event.set()
        self.join(timeout=5)

    def shares(self) -> dict:
        """``{"processes": {name: {"mean", "peak", "system_mean", "thread_peak", "threads", "waited_mean",
        "waited_peak"}}, "machine": {"mean", "peak"}, "cores": n}`` (``threads``: the most threads the process
        had at once; ``system_mean``: the part of ``mean`` in the kernel)."""
        def spaced(samples):   # the readings of a process that was still there, half an interval apart
            return spaced_samples([s for s in samples if s[1] not in (None, {})], self.interval_s / 2)
        processes = {name: cpu_share(spaced(s)) for name, s in self.samples.items()}
        for name, share in processes.items():
            if share is None:
                continue
            system = cpu_share(spaced(self.system[name]))
            if system is not None:
                share["system_mean"] = system["mean"]
            thread_peak = busiest_thread_peak(spaced(self.threads[name]))
            if thread_peak is not None:
                share.update(thread_peak=thread_peak, threads=max(len(t) for _, t in self.threads[name]))
            waited = cpu_share(spaced(self.waits[name]))
            if waited is not None:
                share.update(waited_mean=waited["mean"], waited_peak=waited["peak"])
        return {"processes": {n: v for n, v in processes.items() if v is not None},
                "machine": cpu_share(spaced(self.machine)), "cores": self.cores, "interval_s": self.interval_s}
