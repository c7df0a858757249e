"""One writer per output: the lock every verb holds on what it writes (its ``--out``).

Two commands writing one folder corrupt it silently (two ``train-supernet`` runs interleave
``metrics.jsonl`` and delete each other's temporary checkpoints; two ``evolve`` runs leave one
search on disk while both print a result). So every verb that writes an output holds
:class:`OutputLock` on it from its first check to its exit, and a second command on the same
path (new, ``--resume`` or ``--overwrite``) refuses at once, naming the path and the holder.

Where the lock lives: a file ``.NAME.lock`` **beside** the output ``NAME`` (in its parent
folder), not inside it, because ``--overwrite`` deletes or renames the output folder: a lock
inside would go with it and the next command would find the new folder unlocked. The file
holds the holder's pid, host name, start time and command line (JSON) for the message.

How it is held: ``fcntl.flock`` on that file. The kernel drops the lock when its holder dies,
however it dies (SIGKILL included), so a lock file left behind by a killed command is *stale*:
the next command takes it over with a warning naming the dead pid. The holder deletes the file
on release (normal exit, error or Ctrl-C); a command that opened the file just before it was
deleted notices (the path then names another file or none) and tries again.

Re-entrant within a process (a job that calls another job on the same path holds it once).
Under torchrun only rank 0 takes it (the other ranks belong to the same command).
"""

from __future__ import annotations

import errno
import fcntl
import functools
import inspect
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lvsearch.errors import LvsearchError

#: The lock file of output ``NAME``: ``.NAME.lock`` in the same folder.
LOCK_SUFFIX = ".lock"


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file of the output ``out`` (a folder or a file, existing or not): ``.NAME.lock``
    beside it, with symbolic links in its existing part resolved so that two spellings of one
    path share one lock."""
    target = Path(os.path.abspath(Path(out).expanduser())).resolve()
    if not target.name:  # the file-system root: no parent to put it in
        return target / f".lvsearch{LOCK_SUFFIX}"
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


def read_holder(path: str | os.PathLike) -> dict:
    """What the lock file ``path`` says about its holder (``pid``, ``host``, ``started``,
    ``command``); ``{}`` when it is missing, empty or unreadable (a holder that has not written
    it yet)."""
    try:
        with open(path, "rb") as f:
            return _parse(f.read())
    except OSError:
        return {}


def _parse(data: bytes) -> dict:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _read_fd(fd: int) -> dict:
    try:
        return _parse(os.pread(fd, 1 << 16, 0))
    except OSError:
        return {}


def pid_alive(pid: Any) -> bool:
    """Whether a process ``pid`` exists on this host (an int > 0; anything else is not alive)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OverflowError:
        return False
    return True


def _describe(holder: dict) -> str:
    pid, host = holder.get("pid"), holder.get("host")
    if pid is None:
        return "a process that has not recorded its pid yet"
    text = f"pid {pid}" + (f" on {host}" if host else "")
    if holder.get("started"):
        text += f", since {holder['started']}"
    if holder.get("command"):
        text += f": {str(holder['command'])[:200]}"
    return text


@dataclass
class _Held:
    fd: int
    pid: int
    count: int = 1
    created: list[Path] = field(default_factory=list)


_held: dict[str, _Held] = {}
_registry = threading.Lock()


class OutputLock:
    """The lock on one output path; a context manager (``with OutputLock(out): ...``).

    Args:
        out: the output folder or file (as the user gave it; shown in messages).
        flag: the option that named it (``--out``), shown in messages.

    :meth:`acquire` raises :class:`LvsearchError` when another live process holds it:
    ``--out OUT is being written by another lvsearch command (pid N on HOST, since …: COMMAND)``
    with the fix (wait for it or stop it, or choose another path). Nothing is created or changed
    then. A stale lock file (its holder died) is taken over with a warning.
    """

    def __init__(self, out: str | os.PathLike, *, flag: str = "--out"):
        self.out, self.flag = Path(out), flag
        self.path = lock_path(out)
        self._acquired = False

    # ------------------------------------------------------------------ public API
    def acquire(self) -> "OutputLock":
        """Take the lock (see the class). Returns ``self``.

        Raises:
            LvsearchError: another live process holds it, or the lock file cannot be created
                (the message names ``flag`` and the path).
        """
        if self._acquired:
            return self
        if int(os.environ.get("RANK", "0") or 0) != 0:  # torchrun: rank 0 holds it for the job
            self._acquired = True
            return self
        key = str(self.path)
        with _registry:
            held = _held.get(key)
            if held is not None and held.pid == os.getpid():
                held.count += 1
                self._acquired = True
                return self
            created = self._make_parents()
            try:
                fd, previous = self._lock_file()
            except BaseException:
                _remove_empty(created)
                raise
            _held[key] = _Held(fd, os.getpid(), created=created)
        self._acquired = True
        if previous.get("pid") is not None:
            from lvsearch import ui

            ui.warn(f"{self.flag} {self.out}: took over the lock {self.path} of a command that is no longer running "
                    f"({_describe(previous)}; killed or crashed)")
        return self

    def release(self) -> None:
        """Give the lock up (the outermost release in this process deletes the lock file);
        a no-op when not held."""
        if not self._acquired:
            return
        self._acquired = False
        with _registry:
            held = _held.get(str(self.path))
            if held is None or held.pid != os.getpid():
                return
            held.count -= 1
            if held.count:
                return
            del _held[str(self.path)]
            try:
                if _same_file(self.path, held.fd):
                    os.unlink(self.path)  # before closing: a waiter on this file then sees it gone
            finally:
                os.close(held.fd)
            _remove_empty(held.created)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    # ------------------------------------------------------------------ internals
    def _make_parents(self) -> list[Path]:
        """Create the missing folders above the lock file (innermost last); return them."""
        missing, p = [], self.path.parent
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        created = []
        for p in reversed(missing):
            try:
                p.mkdir()
            except FileExistsError:
                continue
            except OSError:
                _remove_empty(created)
                self._not_writable()
            created.append(p)
        return created

    def _not_writable(self) -> None:
        from lvsearch.io import check_writable_folder

        check_writable_folder(self.path.parent, self.flag, shown=str(self.out))  # its message, when it finds the cause
        raise LvsearchError(f"{self.flag} {self.out}: cannot create its lock file {self.path}",
                            fix=f"choose a {self.flag} in a writable folder")

    def _lock_file(self) -> tuple[int, dict]:
        """Open, flock and stamp the lock file; return ``(fd, what a stale file said)``."""
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
            except OSError:
                self._not_writable()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _read_fd(fd)
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    # a file system without flock: go by the recorded pid alone
                    if not (holder.get("host") == socket.gethostname() and pid_alive(holder.get("pid"))
                            and holder.get("pid") != os.getpid()):
                        return self._stamp(fd)
                os.close(fd)
                self._refuse(holder)
            if _same_file(self.path, fd):
                return self._stamp(fd)
            os.close(fd)  # its holder deleted it between our open and flock: take the new one

    def _stamp(self, fd: int) -> tuple[int, dict]:
        previous = _read_fd(fd)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": _command_line()}
        data = (json.dumps(me, sort_keys=True) + "\n").encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
        except BaseException:
            os.close(fd)
            raise
        return fd, previous

    def _refuse(self, holder: dict) -> None:
        pid = holder.get("pid")
        gone = (holder.get("host") == socket.gethostname() and pid is not None and not pid_alive(pid))
        note = f" (pid {pid} has exited, but a process it started still holds the lock)" if gone else ""
        raise LvsearchError(
            f"{self.flag} {self.out} is being written by another lvsearch command ({_describe(holder)}){note}; "
            f"two commands writing one output would corrupt it, so this one stops without touching it",
            fix=f"wait for that command to finish (or stop it: kill {pid}), then re-run this one; or choose another "
                f"{self.flag}" if pid is not None else
                f"wait for that command to finish, then re-run this one; or choose another {self.flag}")


def _command_line() -> str:
    """This process's command line as the user typed it (``lvsearch VERB ...`` for the CLI)."""
    argv = list(sys.argv)
    if argv and (argv[0].endswith("lvsearch") or argv[0].endswith(os.path.join("lvsearch", "__main__.py"))):
        argv[0] = "lvsearch"
    return " ".join(argv)


def _same_file(path: Path, fd: int) -> bool:
    try:
        a, b = os.stat(path), os.fstat(fd)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _remove_empty(folders: list[Path]) -> None:
    for p in reversed(folders):
        try:
            p.rmdir()
        except OSError:
            return


def holds_output(where: str | Callable[[dict], Any] = "out", *, flag: str = "--out"):
    """Decorator: the job function holds :class:`OutputLock` on its output for the whole call.

    Args:
        where: the name of the function's parameter that gives the output path, or a function
            of the bound arguments (a dict, defaults included) returning it; None means no
            output to lock (the job's own checks word that).
        flag: the option that names it, for messages.
    """
    def deco(func):
        sig = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            out = bound.arguments[where] if isinstance(where, str) else where(bound.arguments)
            if out is None:
                return func(*args, **kwargs)
            with OutputLock(out, flag=flag):
                return func(*args, **kwargs)

        return wrapper

    return deco
