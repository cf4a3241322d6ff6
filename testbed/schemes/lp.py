"""Solving the schemes' linear programs through PuLP, and saying which solver ran.

``solver="auto"`` tries HiGHS (through ``highspy``) with its interior-point
method, which finishes a GRID-shaped LP of 8k variables in about half a
second where simplex takes 15-30 s on two cores; HiGHS runs crossover after the interior point, so the
answer is a basic (vertex) solution, which KRGS's rounding expects. When
HiGHS is missing or fails, PuLP's bundled CBC runs instead. ``"highs"`` and
``"cbc"`` force one solver.

Every solve returns a :class:`SolveRecord` (solver, status, wall time, size)
that the scheme copies into ``JobPlacement.notes``. An infeasible LP raises
:class:`~testbed.errors.InfeasibleError`; a solve that hits its time limit
raises it too, naming the limit, so a scheme never hangs.

The solvers run quiet: HiGHS prints its banner to the process's standard
output when PuLP creates it, whatever ``msg`` says, which would corrupt
``inatb simulate --json``; that file descriptor points at /dev/null while a
solver runs (:func:`_quiet_stdout`).
"""

import contextlib
import os
import sys
import time
from dataclasses import asdict, dataclass

import pulp

from testbed.errors import InfeasibleError, PlacementError

DEFAULT_TIME_LIMIT_S = 120.0
#: The ``policy_options`` of every scheme that solves an LP: the solver and its time limit.
LP_OPTIONS = {"solver": ("choice", ("auto", "highs", "cbc")), "time_limit": ("duration",)}


@dataclass
class SolveRecord:
    solver: str
    status: str
    solve_s: float
    variables: int
    constraints: int

    def as_notes(self, prefix: str = "lp") -> dict:
        return {f"{prefix}_{k}": v for k, v in asdict(self).items()}


@contextlib.contextmanager
def _quiet_stdout():
    """File descriptor 1 on /dev/null for the block (a solver library's own prints), restored after."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _candidates(choice: str, time_limit_s: float):
    highs = ("HiGHS (ipm)", lambda: pulp.HiGHS(msg=False, timeLimit=time_limit_s, solver="ipm"))
    cbc = ("CBC", lambda: pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s))
    if choice == "highs":
        return [highs]
    if choice == "cbc":
        return [cbc]
    return [highs, cbc]


def solve(problem: pulp.LpProblem, scheme: str, what: str, solver: str = "auto",
          time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> SolveRecord:
    """Solve ``problem`` to optimality or raise a typed error naming ``scheme`` and ``what``."""
    failures = []
    for name, make in _candidates(solver, time_limit_s):
        try:
            backend = make()
            if not backend.available():
                failures.append(f"{name}: not available")
                continue
            start = time.perf_counter()
            with _quiet_stdout():
                problem.solve(backend)
            elapsed = time.perf_counter() - start
        except Exception as exc:  # a solver crash: try the next one, report all if none works
            failures.append(f"{name}: {exc}")
            continue
        status = pulp.LpStatus.get(problem.status, str(problem.status))
        record = SolveRecord(name, status, elapsed, problem.numVariables(), problem.numConstraints())
        if status == "Optimal":
            return record
        if status == "Infeasible":
            raise InfeasibleError(f"{scheme}: {what} has no feasible solution ({name})")
        if status == "Unbounded":
            raise PlacementError(f"{scheme}: {what} is unbounded ({name}); a capacity is missing")
        if elapsed >= time_limit_s * 0.95:
            raise InfeasibleError(f"{scheme}: {what}: {name} found no solution within {time_limit_s:g} s "
                                  f"(policy_options.{scheme}.time_limit)")
        failures.append(f"{name}: status {status}")
    raise PlacementError(f"{scheme}: {what}: no LP solver succeeded ({'; '.join(failures)})")


def variable(problem: pulp.LpProblem, name: str, low: float = 0.0, high: float = None) -> pulp.LpVariable:
    """A continuous variable of ``problem`` (PuLP 3.3 attaches variables to their model; older PuLP builds them)."""
    if hasattr(problem, "add_variable"):
        return problem.add_variable(name, low, high)
    return pulp.LpVariable(name, low, high)


def value(var) -> float:
    v = var.value()
    return 0.0 if v is None else float(v)
