"""Emulation: Mininet networks of P4 switches, run orchestration and cleanup.

``network.py`` builds and tears down a Mininet network from a Topology,
``nodes.py`` holds the switch node classes of each target, ``state.py`` the
run lock and the record of what a run created (so cleanup removes exactly
that), ``orchestrator.py`` runs a scenario end to end.
"""
