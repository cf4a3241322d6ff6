"""The papers the testbed reproduces: each one's directory under ``scenarios/papers/`` and its name."""

from testbed.provenance import PROJECT_ROOT

PAPERS = {"goat": "GOAT", "grid": "GRID", "inart": "InArt", "pa-atp": "PA-ATP", "rina": "Rina"}
PAPERS_DIR = PROJECT_ROOT / "scenarios" / "papers"
