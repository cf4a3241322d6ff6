"""Reports of what runs and sweeps left on disk: the text report (``inatb report``), the HTML page
(``inatb report --html``) and the comparison of two results (``inatb compare``).

Everything here reads a results directory and nothing else: a run directory (its ``summary.json``,
``plots/``, ``scenario.yaml``, ``iftop/``) or a sweep directory (its ``table.csv`` and ``plots/``;
:mod:`testbed.sweep.runner` states the layout). :func:`results_kind` tells the two apart.
"""

from pathlib import Path

from testbed.errors import UsageError


def results_kind(path) -> str:
    """``"run"`` (a directory with summary.json) or ``"sweep"`` (one with table.csv); else one-line UsageError."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: no such directory (give a run directory or a sweep directory)")
    if (path / "summary.json").is_file():
        return "run"
    if (path / "table.csv").is_file():
        return "sweep"
    raise UsageError(f"{path}: neither a run directory (summary.json) nor a sweep directory (table.csv)")
