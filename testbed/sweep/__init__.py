"""Sweeps: a base scenario run over axes of ``--set`` values and repetitions (``inatb sweep``).

:mod:`.spec` reads and checks a sweep file and expands its points, :mod:`.runner` runs the points
not done yet (resumable), :mod:`.table` writes the tidy table and the plots, :mod:`.dry_run` lists what
running them would do (``--dry-run``).
"""

from testbed.sweep.runner import SweepResult, run_sweep
from testbed.sweep.spec import Point, SweepSpec, derive_seed, load_sweep

__all__ = ["Point", "SweepResult", "SweepSpec", "derive_seed", "load_sweep", "run_sweep"]
