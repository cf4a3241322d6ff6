"""What a straggler injection does to the running network (``stragglers``; the timing is
:class:`testbed.emulation.events.InjectionScheduler`'s, which calls :meth:`InjectionEffects.apply` and
:meth:`InjectionEffects.revert` from its thread).

- ``rate_change``: a worker's NIC (its host's htb) and the switch's egress queue toward it;
- ``link_degradation``: the link's two ends (a switch's egress queue, a host's htb);
- ``pause``: the worker's agent stopped (SIGSTOP) and continued (SIGCONT);
- ``failure``: the worker's agent killed (SIGKILL), for good; the worker is in :attr:`failing` before it dies,
  so the monitor takes its end for the injection's, not for the run's failure.
"""

import os
import signal

from testbed.emulation.events import htb_rate_argv
from testbed.emulation.network import run_in


class InjectionEffects:
    """Injections on ``network``: ``world`` is the scenario at wall-clock rates (the injections' rates come
    from it), ``runtimes`` the switches' by name, ``agents`` the launched agents by name (their ``proc``)."""

    def __init__(self, world, network, runtimes: dict, agents: dict):
        self.world = world
        self.network = network
        self.runtimes = runtimes
        self.agents = agents
        self.failing = set()

    def apply(self, inj, revert: bool = False) -> None:
        if inj.kind == "failure":
            # Marked before the kill: the monitor must not take the agent's end for the run's failure.
            self.failing.add(inj.target[0])
            os.kill(self.agents[inj.target[0]].proc.pid, signal.SIGKILL)
            return
        if inj.kind == "pause":
            os.kill(self.agents[inj.target[0]].proc.pid, signal.SIGCONT if revert else signal.SIGSTOP)
            return
        for link in self._links_of(inj):
            for end in (link.a, link.b):
                self._set_link_end_rate(end, link, link.rate_bps if revert else inj.rate_bps)

    def revert(self, inj) -> None:
        self.apply(inj, revert=True)

    def _links_of(self, inj) -> list:
        """The links an injection changes, at their wall-clock rates."""
        topo = self.world.topology
        if inj.kind == "rate_change":
            return [topo.host_link(inj.target[0])]
        return [link for link in topo.links if {link.a, link.b} == set(inj.target)]

    def _set_link_end_rate(self, node_name: str, link, rate_bps: float) -> None:
        topo = self.world.topology
        if topo.nodes[node_name].kind == "host":
            run_in(self.network.host(node_name), htb_rate_argv(f"{node_name}-eth0", rate_bps), "changing NIC rate")
        else:
            self.runtimes[node_name].set_port_shaping(topo.port(node_name, link), rate_bps,
                                                      self.world.switch.queue_depth_pkts)
