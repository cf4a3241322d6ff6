"""The commands of the ebpf target, built apart from running them (``*_argv``): loading and pinning
``ina.bpf.c``, attaching it to a port, shaping a port's link. :func:`run` runs one."""

from pathlib import Path

from testbed import bpf_build
from testbed.errors import DataplaneError

#: htb's bucket: one full frame (ina_egress's queue model lets a frame go once the link is idle, no burst)
HTB_BURST_BYTES = 1600


def load_argv(obj: Path, programs_dir: Path, maps_dir: Path) -> list:
    return ["bpftool", "prog", "loadall", str(obj), str(programs_dir), "pinmaps", str(maps_dir)]


def clsact_argv(ifname: str) -> list:
    return ["tc", "qdisc", "replace", "dev", ifname, "clsact"]


def filter_argv(ifname: str, direction: str, program: Path) -> list:
    return ["tc", "filter", "replace", "dev", ifname, direction, "bpf", "direct-action", "object-pinned",
            str(program)]


#: htb's floor for the reordered frames' class: all but nothing (a byte a second), it borrows what the queue
#: leaves; a floor of its own would let it overtake the queue whenever the queue's class waits for tokens
REORDERED_FLOOR_BPS = 8


def shaping_argvs(ifname: str, rate_bps: int, depth_frames: int) -> list:
    """A port's link: htb at ``rate_bps`` with two classes under it, each over a FIFO that holds twice the
    port's queue_depth. Class 1:10 is the port's queue: ina_egress models it (its depth, tail drop and CE
    marks, as bmv2's enq_qdepth sees it) at the same rate; the FIFO holds what the model admitted until
    htb sends it, with room for htb's timer running late. Class 1:20 holds reordered frames (ina.bpf.c's
    HTB_CLASS_*): it is served, at the link's rate, when class 1:10 has nothing to send."""
    rate, burst = f"{int(rate_bps)}bit", f"{HTB_BURST_BYTES}b"
    limit = str(2 * int(depth_frames) + 16)
    argvs = [["tc", "qdisc", "replace", "dev", ifname, "root", "handle", "1:", "htb", "default", "10"],
             ["tc", "class", "replace", "dev", ifname, "parent", "1:", "classid", "1:1", "htb", "rate", rate,
              "ceil", rate, "burst", burst, "cburst", burst]]
    for classid, floor, prio in (("1:10", rate, "0"), ("1:20", f"{REORDERED_FLOOR_BPS}bit", "1")):
        argvs.append(["tc", "class", "replace", "dev", ifname, "parent", "1:1", "classid", classid, "htb", "rate",
                      floor, "ceil", rate, "burst", burst, "cburst", burst, "prio", prio])
        argvs.append(["tc", "qdisc", "replace", "dev", ifname, "parent", classid, "pfifo", "limit", limit])
    return argvs


def unqdisc_argv(ifname: str, which: str) -> list:
    """Remove the ``clsact`` or the ``root`` qdisc of ``ifname``."""
    return ["tc", "qdisc", "del", "dev", ifname, which]


def run(argv: list, what: str) -> None:
    bpf_build.run(argv, what, DataplaneError)
