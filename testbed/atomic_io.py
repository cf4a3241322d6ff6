"""Result files appear whole or not at all.

:func:`write_text_atomic` writes beside the target (same directory, so the
same file system), flushes and fsyncs, then renames over the target: a
reader, a crash or a second Ctrl-C sees the old file or the new one, never
half of one.
"""

import os
from pathlib import Path


def write_text_atomic(path, text: str, mode: int = 0o644) -> Path:
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
