"""What every benchmark script writes beside its table: its figures as JSON, with the machine, the time and
the command that measured them."""

import datetime
import json
import os
import platform
import sys
from pathlib import Path


def write_report(path, figures: dict):
    """``figures`` plus ``host``, ``when`` and ``command`` as JSON at ``path`` (its directory made)."""
    report = {**figures, "host": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                  "kernel": platform.release()},
              "when": datetime.datetime.now().isoformat(timespec="seconds"),
              "command": " ".join([sys.executable] + sys.argv)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten {path}")
