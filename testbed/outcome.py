"""What a finished run, sweep or reproduction says as ``inatb``'s exit status (pure: summaries in, a code out).

Without ``--strict`` a run exits 0 when its aggregation was exact and a sweep when every point ended ``ok``
(or was refused at plan time): a figure the run itself marks ``distorted`` still exits 0. ``--strict`` (or
``INATB_STRICT=1``, :func:`strict_from_env`), for a CI job that must not pass on figures the testbed calls
meaningless, also asks that every run ended ``ok``, exact and undistorted:

- a run that did not end ``ok``, or not exact, exits :data:`EXIT_NOT_EXACT` (8), as without ``--strict``;
  a sweep's point likewise, and a simulated point counts as exact (the model has no aggregates to check);
- one that ended ``ok`` and exact but ``distorted`` exits :data:`EXIT_DISTORTED` (9);
- of a sweep's points, the worst decides: 8 before 9.

An ``inatb run`` or ``inatb fidelity`` that stalls or fails never reaches :func:`run_exit_code`: its error
ends ``inatb`` first (exit 5, :class:`testbed.errors.EmulationError`), with or without ``--strict``; a sweep's
point that did is a row whose ``status`` says so. ``testbed.cli`` lists the codes (``EXIT_CODES``).
"""

from testbed.errors import UsageError

EXIT_DONE = 0
EXIT_NOT_EXACT = 8
EXIT_DISTORTED = 9

#: The environment variable that means ``--strict`` for ``run``, ``fidelity``, ``sweep`` and ``reproduce``.
STRICT_ENV = "INATB_STRICT"
STRICT_ON = ("1", "true", "yes", "on")
STRICT_OFF = ("", "0", "false", "no", "off")


def strict_from_env(environ) -> bool:
    """Whether ``environ`` (``os.environ``) asks for ``--strict``: ``INATB_STRICT`` one of :data:`STRICT_ON`
    (any case); unset or one of :data:`STRICT_OFF` does not. Anything else is a usage error."""
    value = environ.get(STRICT_ENV, "").strip().lower()
    if value in STRICT_ON:
        return True
    if value in STRICT_OFF:
        return False
    raise UsageError(f"environment variable {STRICT_ENV}={environ[STRICT_ENV]!r}: expected 1 (strict) or 0")


def run_exit_code(summary: dict, strict: bool = False) -> int:
    """``inatb run``'s and ``inatb fidelity``'s exit status from the run's summary."""
    if summary.get("aggregation_exact") is not True or (strict and summary.get("status") != "ok"):
        return EXIT_NOT_EXACT
    if strict and summary.get("distorted"):
        return EXIT_DISTORTED
    return EXIT_DONE


def point_exit_code(row: dict, strict: bool = False) -> int:
    """One sweep point's share of the exit status, from its table row (:func:`testbed.sweep.table.row`: its
    ``status``, and the summary's ``aggregation_exact``, ``simulated`` and ``distorted`` when it ran)."""
    status = row.get("status")
    if status == "refused":                  # refused at plan time: the scheme cannot serve it, a finding
        return EXIT_DONE
    if status != "ok":
        return EXIT_NOT_EXACT
    if not strict:
        return EXIT_DONE
    if not row.get("simulated") and row.get("aggregation_exact") is not True:
        return EXIT_NOT_EXACT
    return EXIT_DISTORTED if row.get("distorted") else EXIT_DONE


def sweep_exit_code(rows, strict: bool = False) -> int:
    """``inatb sweep``'s and ``inatb reproduce``'s exit status from the points' rows: the worst point's."""
    codes = {point_exit_code(row, strict) for row in rows}
    return next((code for code in (EXIT_NOT_EXACT, EXIT_DISTORTED) if code in codes), EXIT_DONE)
