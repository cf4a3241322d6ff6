"""Markdown for the pages the testbed writes: the generated reference pages (testbed/reference.py) and the
reproduction pages (testbed/reproduce.py)."""


def cell(value) -> str:
    """A table cell: the value as text on one line, its pipes escaped; empty for None or ""."""
    return str(value).replace("|", "\\|").replace("\n", " ") if value not in (None, "") else ""


def table(header, rows) -> str:
    """A Markdown table of ``header`` and ``rows`` (sequences of values, :func:`cell` each)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)
