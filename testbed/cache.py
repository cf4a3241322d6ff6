"""Where INA Testbed keeps what it may rebuild or re-measure: ``$XDG_CACHE_HOME/inatb``, else
``~/.cache/inatb``. The compiled P4 program (``p4/``) and this machine's packet costs (``packet_costs.json``)
live under it, each movable on its own by an environment variable of its own."""

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/inatb``, else ``~/.cache/inatb``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inatb"
