"""Where INA Testbed keeps what it may rebuild or re-measure: ``$XDG_CACHE_HOME/inatb``, else
``~/.cache/inatb``. The compiled P4 program (``p4/``), the BPF objects (``bpf/``) and this machine's packet
costs (``packet_costs.json``) live under it; the P4 program and the packet costs are each movable by an
environment variable of their own. Builds are kept while they are among the most recently used of their kind
(:func:`prune`)."""

import os
import shutil
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/inatb``, else ``~/.cache/inatb``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "inatb"


#: How many entries of one kind the cache keeps, the most recently used: a test suite's or a sweep's builds
#: (one per kernel, source and definitions) fit, and the cache does not grow with every edit of a source.
KEEP_RECENT_ENTRIES = 32


def mark_used(entry: Path) -> None:
    """``entry`` (a cached file or directory) was used now: the last that :func:`prune` removes."""
    os.utime(entry)


def prune(entries, keep: int = KEEP_RECENT_ENTRIES) -> list:
    """Remove all but the ``keep`` most recently used of ``entries`` (files or directories of one kind in
    the cache); returns what it removed. An entry that disappears meanwhile is skipped."""
    dated = []
    for entry in entries:
        try:
            dated.append((entry.stat().st_mtime, str(entry), Path(entry)))
        except FileNotFoundError:
            continue
    removed = []
    for _, _, entry in sorted(dated, reverse=True)[keep:]:
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    return removed
