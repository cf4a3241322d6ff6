"""Worker and parameter-server agents: processes inside Mininet host namespaces.

Agents import only the wire codec and their run config (``config.py``); they
never import the orchestrator or scheme code.
"""
