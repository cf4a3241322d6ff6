"""Close bmv2's Thrift ports to everyone but the run (nftables).

bmv2's ``simple_switch`` serves its runtime API (table writes, register
reads and writes, multicast, queue rates) over Thrift on
``0.0.0.0:<thrift port>``, with no authentication and no option to bind
elsewhere: anyone who reaches the port rewrites the switch. The run needs it
only from its own orchestrator, a root process in the root network
namespace, over loopback. So for the run's Thrift ports this module
installs, in an nftables table of the run's own (``inet
inatb_guard_<run id>``, so removing it never touches any other rule):

- chain ``input`` (hook input): TCP to those ports arriving on any
  interface but ``lo`` is dropped -- other network namespaces (Mininet
  hosts, containers) and other machines;
- chain ``output`` (hook output): TCP to those ports leaving by ``lo`` from
  a socket not owned by uid 0 is rejected with a TCP reset (``meta skuid !=
  0``) -- local users other than root. (A local connection to any of the
  machine's own addresses leaves by ``lo`` too.)

Both chains have priority -10 and policy accept: they only ever drop, and a
drop in any table is final, so other firewalls' accepts cannot reopen the
ports. The run installs the guard before the switches start and deletes the
table when the network is gone; ``inatb cleanup`` deletes the table of a
dead run it cleans (``remove_stale``).

The commands are argv lists built by pure functions (``install_commands``,
``remove_argv``, ...) and run apart from building them (``ThriftGuard``).
"""

import re
import shutil
import subprocess

from testbed.errors import EmulationError

NFT = "nft"
FAMILY = "inet"
TABLE_PREFIX = "inatb_guard_"
CHAIN_PRIORITY = -10
#: nftables' NFT_NAME_MAXLEN is 256; run ids are far shorter.
MAX_TABLE_NAME_CHARS = 64
ROOT_UID = 0


def table_name(run_id: str) -> str:
    """The run's table: ``inatb_guard_`` + the run id with anything but letters and digits as '_'."""
    safe = re.sub(r"[^A-Za-z0-9]", "_", str(run_id))
    if not safe.strip("_"):
        raise ValueError(f"run id {run_id!r} has no letters or digits to name a firewall table after")
    return (TABLE_PREFIX + safe)[:MAX_TABLE_NAME_CHARS]


def checked_ports(ports) -> tuple:
    """The ports, sorted and unique; ValueError for an empty list or anything but TCP port numbers."""
    ports = list(ports)
    if not ports:
        raise ValueError("no Thrift ports to guard")
    for port in ports:
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ValueError(f"not a TCP port: {port!r}")
    return tuple(sorted(set(ports)))


def port_set(ports) -> str:
    """An nftables anonymous set: ``{ 9091, 9092 }``."""
    return "{ " + ", ".join(str(p) for p in checked_ports(ports)) + " }"


def add_table_argv(table: str) -> list:
    return [NFT, "add", "table", FAMILY, table]


def add_chain_argv(table: str, chain: str, hook: str) -> list:
    return [NFT, "add", "chain", FAMILY, table, chain,
            f"{{ type filter hook {hook} priority {CHAIN_PRIORITY} ; policy accept ; }}"]


def drop_foreign_interfaces_argv(table: str, ports) -> list:
    """input: TCP to the ports from any interface but lo is dropped."""
    return [NFT, "add", "rule", FAMILY, table, "input", "iifname", "!=", '"lo"', "tcp", "dport", port_set(ports),
            "drop"]


def reject_non_root_argv(table: str, ports) -> list:
    """output: TCP to the ports over lo from a socket not owned by root is reset."""
    return [NFT, "add", "rule", FAMILY, table, "output", "oifname", '"lo"', "tcp", "dport", port_set(ports),
            "meta", "skuid", "!=", str(ROOT_UID), "reject", "with", "tcp", "reset"]


def install_commands(run_id: str, ports) -> list:
    """Every command that installs the guard of ``run_id`` for ``ports``, in order."""
    table = table_name(run_id)
    return [add_table_argv(table),
            add_chain_argv(table, "input", "input"),
            add_chain_argv(table, "output", "output"),
            drop_foreign_interfaces_argv(table, ports),
            reject_non_root_argv(table, ports)]


def list_table_argv(run_id: str) -> list:
    return [NFT, "list", "table", FAMILY, table_name(run_id)]


def remove_argv(run_id: str) -> list:
    """Deleting the run's table removes its chains and rules, and nothing else."""
    return [NFT, "delete", "table", FAMILY, table_name(run_id)]


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True)


def is_installed(run_id: str, runner=_run) -> bool:
    return runner(list_table_argv(run_id)).returncode == 0


def remove_stale(run_id: str, runner=_run) -> bool:
    """Delete the guard table of ``run_id`` if it exists (cleanup of a dead run); True if it did."""
    if shutil.which(NFT) is None or not is_installed(run_id, runner):
        return False
    return runner(remove_argv(run_id)).returncode == 0


class ThriftGuard:
    """The guard of one run's Thrift ports: ``install()`` before the switches start, ``remove()`` once
    the network is down (or use it as a context manager around the network's life).

    ``install`` on failure removes whatever part it installed and raises EmulationError with nft's
    message; ``remove`` is idempotent and never fails because the table is already gone.
    """

    def __init__(self, run_id: str, ports, runner=_run):
        self.run_id = run_id
        self.ports = checked_ports(ports)
        self.table = table_name(run_id)
        self._runner = runner

    def install(self) -> None:
        if shutil.which(NFT) is None:
            raise EmulationError("nft not found: the bmv2 target needs nftables to close its Thrift ports to "
                                 "other users and namespaces (apt-get install nftables, or scripts/bootstrap.sh)")
        if is_installed(self.run_id, self._runner):       # a leftover of a crashed run of the same id
            self.remove()
        for argv in install_commands(self.run_id, self.ports):
            done = self._runner(argv)
            if done.returncode != 0:
                message = (done.stderr or done.stdout or "").strip()
                self.remove()
                raise EmulationError(f"closing the Thrift ports {list(self.ports)} failed ({' '.join(argv)}): "
                                     f"{message}")

    def remove(self) -> None:
        if shutil.which(NFT) is None or not is_installed(self.run_id, self._runner):
            return
        done = self._runner(remove_argv(self.run_id))
        if done.returncode != 0 and is_installed(self.run_id, self._runner):
            raise EmulationError(f"removing the Thrift guard table {self.table} failed: "
                                 f"{(done.stderr or done.stdout or '').strip()}")

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.remove()
        return False
