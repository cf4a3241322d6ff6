"""Typed errors of the testbed.

Library code raises these; only the CLI turns them into one-line messages and
exit codes. Each error's ``str()`` is that one line.
"""

import difflib


#: Longest message a ScenarioError prints; values quoted from a file are cut to fit one readable line.
MAX_MESSAGE_CHARS = 400


def one_line(text, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` with every run of whitespace (newlines included) made one space, cut to ``limit`` chars."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."


def brief_repr(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for quoting user input inside a message."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def closest(word, candidates):
    """The one of ``candidates`` ``word`` most likely misspells (a typo's "did you mean"), or None."""
    found = difflib.get_close_matches(str(word), sorted(str(c) for c in candidates), n=1)
    return found[0] if found else None


class TestbedError(Exception):
    """Base of every error the CLI reports as a one-line message."""

    exit_code = 1


class ScenarioError(TestbedError):
    """A scenario file is invalid: names the file, the field path and what was expected.

    A value given on the command line (``--set KEY=VALUE``) is named by that
    argument instead of a line of the file (``override``): ``--set scale=big:
    expected a number, got 'big'``, with the field after it when it is not KEY
    (``--set policy=x: jobs.0.policy: ...``).

    Always one line: the field and message are flattened and cut (they may quote
    whatever the file held), so a hostile value cannot flood the terminal.
    """

    exit_code = 2

    def __init__(self, field: str, message: str, source: str = "<scenario>", line: int = 0, override: str = ""):
        self.field = one_line(field, 120)
        self.message = one_line(message)
        self.source = one_line(source, 200)
        self.line = line
        self.override = override
        field, message, source = self.field, self.message, self.source
        if override:
            where = f"--set {one_line(override, 120)}"
            if field != override.partition("=")[0].strip():
                where = f"{where}: {field}"
        else:
            where = f"{source}:{line}: {field}" if line else f"{source}: {field}"
        super().__init__(f"{where}: {message}")


class UnitError(ValueError):
    """A quantity with a missing or unknown unit; ScenarioError wraps it with the field path."""


class TopologyError(TestbedError):
    """A topology cannot be built as described."""

    exit_code = 2


class PlacementError(TestbedError):
    """A scheme cannot serve the given topology/jobs (names the scheme and the missing element)."""

    exit_code = 3


class InfeasibleError(PlacementError):
    """An optimisation problem of a scheme has no feasible solution."""


class DataplaneError(TestbedError):
    """A switch rejected an entry, or a switch could not be started or reached."""

    exit_code = 4


class EmulationError(TestbedError):
    """The emulated network or an agent failed during a run."""

    exit_code = 5


class RunStalled(EmulationError):
    """No job made progress for the stall bound; the run stopped early (see diagnosis.json)."""


class UsageError(TestbedError):
    """Command-line options that do not go together."""

    exit_code = 2


class RunLockError(TestbedError):
    """Another run holds the machine-wide run lock."""

    exit_code = 6


class EnvironmentMissingError(TestbedError):
    """A required binary or privilege is missing (root, mnexec, simple_switch ...)."""

    exit_code = 7
