"""Who owns what a command writes: results made through ``sudo`` are handed to the user who typed it.

A run, sweep, reproduction or report needs root (Mininet) and so writes as root; started through
``sudo`` (``SUDO_UID``/``SUDO_GID`` in the environment, effective uid 0), what it wrote under the
results root is handed over to that user (:func:`invoking_user`) when it finishes, ended well or
not, so they can open ``report.html``, read ``summary.json`` or copy the results without ``sudo``.
Modes are kept as written (run directories 0700: the results stay private to that user). Without
``sudo``, or not as root, nothing changes.

Only what the command created changes owner (an :class:`Output`, taken before the command writes):
the directories it made on the way to the directory it writes in, and inside that directory every
entry that was not there before it began (a file it replaced is a new file). A directory that
existed before, whoever owns it, and what it held are left alone, and so is anything not owned by
the effective user at hand-over time. Symlinks are never followed. Run state, the lock and control
sockets (``/run/inatb``) are never an output: they stay root's.

A ``SUDO_UID`` or ``SUDO_GID`` that is not a user id is refused before anything is written
(:class:`testbed.errors.UsageError`, one line): results given to a guessed user would be worse than
results left to root. A hand-over that fails (a file system that refuses ``chown``) leaves the results where they
are, root's, and says so in one line (:attr:`Handover.problem`); it never raises.
"""

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional

from testbed.errors import UsageError

SUDO_UID = "SUDO_UID"
SUDO_GID = "SUDO_GID"


@dataclass(frozen=True)
class InvokingUser:
    """The user who started the command through sudo."""
    uid: int
    gid: int


def _id_from(environ: Mapping, name: str) -> int:
    text = environ.get(name)
    if text is None or not text.strip().isdigit():
        shown = "unset" if text is None else repr(text)
        raise UsageError(f"{name} is {shown}: expected the numeric id sudo sets (unset {SUDO_UID} and "
                         f"{SUDO_GID} to leave the results to root)")
    return int(text)


def invoking_user(environ: Mapping = None, euid: int = None) -> Optional[InvokingUser]:
    """The user to hand results to: ``SUDO_UID``/``SUDO_GID`` when running as root (effective uid 0)
    and that user is not root; None otherwise (nothing is handed over). A value that is not a
    non-negative integer raises :class:`UsageError`."""
    environ = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    if euid != 0 or SUDO_UID not in environ:
        return None
    user = InvokingUser(_id_from(environ, SUDO_UID), _id_from(environ, SUDO_GID))
    return None if user.uid == 0 else user


def missing_dirs(path) -> tuple:
    """The directories creating ``path`` with its parents makes: ``path`` and each missing ancestor,
    outermost first (empty when ``path`` exists)."""
    path = Path(path)
    missing = []
    while not os.path.lexists(path):
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    return tuple(reversed(missing))


def _entries(tree: Path):
    """Every entry under ``tree`` (not ``tree`` itself), as paths, without following symlinks; entries
    that vanish or cannot be listed meanwhile are skipped."""
    for top, dirs, files in os.walk(tree, followlinks=False):
        for name in dirs + files:
            yield Path(top) / name


def _inode(path: Path):
    st = os.lstat(path)
    return st.st_dev, st.st_ino


def snapshot(tree) -> dict:
    """``tree``'s entries now (relative path -> (device, inode)); empty when ``tree`` does not exist."""
    tree = Path(tree)
    if not tree.is_dir() or tree.is_symlink():
        return {}
    found = {}
    for path in _entries(tree):
        try:
            found[str(path.relative_to(tree))] = _inode(path)
        except OSError:
            continue
    return found


@dataclass(frozen=True)
class Output:
    """What a command writes in the directory ``tree``, to hand over when it finishes: ``made``, the
    directories it creates on the way (``tree`` among them when it creates it), outermost first, and
    ``before``, ``tree``'s entries when it began (relative path -> (device, inode)), which stay as they
    are. Everything else under ``tree`` when it finishes is its own."""
    tree: Path
    made: tuple = ()
    before: dict = field(default_factory=dict)


def output_into(tree) -> Output:
    """The :class:`Output` of a command about to write in ``tree`` (which may exist already); take it
    before the command creates anything there."""
    tree = Path(tree)
    return Output(tree, missing_dirs(tree), snapshot(tree))


def new_tree(tree, made_on_the_way: tuple = ()) -> Output:
    """The :class:`Output` of a directory the command created itself (everything in it is its own),
    with the directories ``made_on_the_way`` to it (:func:`missing_dirs` of its parent, taken before)."""
    tree = Path(tree)
    return Output(tree, tuple(made_on_the_way) + (tree,))


@dataclass
class Handover:
    """What :func:`hand_over` did with an output's ``tree``: how many entries changed owner, and those
    that could not (``failures``: [(path, reason)])."""
    tree: Path
    user: Optional[InvokingUser]
    handed: int = 0
    failures: list = field(default_factory=list)

    @property
    def problem(self) -> str:
        """One line when something could not be handed over (empty otherwise)."""
        if not self.failures:
            return ""
        path, reason = self.failures[0]
        more = f" and {len(self.failures) - 1} more" if len(self.failures) > 1 else ""
        return (f"cannot give {path}{more} to uid {self.user.uid}: {reason}; the results are whole but root's "
                f"(sudo chown -R {self.user.uid}:{self.user.gid} {self.tree} gives them)")


def hand_over(output: Output, user: Optional[InvokingUser]) -> Handover:
    """Give what ``output`` names to ``user`` (None: nothing to do), modes unchanged. Only entries the
    effective user owns now change owner; a symlink itself, never its target. Never raises: what could
    not be given is listed in the result."""
    tree = Path(output.tree)
    done = Handover(tree, user)
    if user is None:
        return done
    euid = os.geteuid()

    def give(path: Path):
        try:
            if os.lstat(path).st_uid == euid:
                os.chown(path, user.uid, user.gid, follow_symlinks=False)
                done.handed += 1
        except FileNotFoundError:
            pass
        except OSError as exc:
            done.failures.append((path, exc.strerror or str(exc)))

    for path in output.made:
        give(Path(path))
    try:
        if tree.is_symlink() or not tree.is_dir():
            return done
        for path in _entries(tree):
            try:
                unchanged = output.before.get(str(path.relative_to(tree))) == _inode(path)
            except OSError:
                continue
            if not unchanged:
                give(path)
    except OSError as exc:
        done.failures.append((tree, exc.strerror or str(exc)))
    return done


@contextlib.contextmanager
def handing_over(*outputs: Output, say):
    """Run the block, then hand each of ``outputs`` (taken before it) to the invoking user, however the
    block ends; ``say`` gets the line of a hand-over that failed. The user is read on entry, so a bad
    ``SUDO_UID`` is refused before the block writes anything."""
    owner = invoking_user()
    try:
        yield
    finally:
        for output in outputs:
            problem = hand_over(output, owner).problem
            if problem:
                say(problem)
