"""Output directories: what a command may write or delete, and how it marks a run whole.

Every command that writes files goes through :func:`open_output`:

- the directory the user named is checked (not empty, not a file, creatable) and locked
  (``flock`` on its marker file), so a second run on the same directory is refused;
- a marker file (:data:`MARKER`) says adabatch created or wrote the directory, and only a
  directory with a marker is ever deleted (:func:`remove_tree`), and only inside the
  directory the user named;
- names are resolved inside the directory without following a symlink, and every file is
  written under a temporary name and renamed into place (a planted symlink is replaced,
  never written through);
- :meth:`OutputDir.begin` writes :data:`INCOMPLETE` and removes the files an earlier run
  left; :meth:`OutputDir.complete` removes it once ``summary.json`` is written, so a run
  that stops half-way never sits next to an earlier run's files unmarked.

JSON written here is RFC 8259 JSON: NaN and infinities become ``null``
(:func:`clean_json`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import math
import os
import shutil
import signal
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from adabatch.errors import AdabatchError, shown

MARKER = ".adabatch"
"""Marker (and lock) file in every directory adabatch creates or writes."""
LEGACY_MARKERS = ("bench.json",)
"""Older marker files that also prove a directory is ours (``adabatch bench``)."""
INCOMPLETE = "INCOMPLETE"
"""Present while a run writes its files; left behind by a run that did not finish."""
SUMMARY = "summary.json"

_MARKER_TEXT = b"written by adabatch; a run holds a lock on this file while it writes here\n"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def clean_json(value: Any, where: str = "") -> tuple[Any, list[str]]:
    """``value`` with every NaN or infinite float replaced by ``None``, and the dotted
    paths of the replaced values (so a summary can say which fields were not numbers)."""
    if isinstance(value, float):
        return (value, []) if math.isfinite(value) else (None, [where or "value"])
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        bad: list[str] = []
        for k, v in value.items():
            out[k], more = clean_json(v, f"{where}.{k}" if where else str(k))
            bad += more
        return out, bad
    if isinstance(value, list | tuple):
        items = [clean_json(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return [v for v, _ in items], [p for _, ps in items for p in ps]
    return value, []


def dumps_json(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of ``value`` as RFC-valid JSON (non-finite floats become ``null``)."""
    return json.dumps(clean_json(value)[0], allow_nan=False, **kwargs)


def summary_json(summary: dict[str, Any]) -> str:
    """``summary.json`` text: non-finite values become ``null`` and, when there are any,
    ``nonfinite_fields`` lists them."""
    clean, bad = clean_json(summary)
    if bad:
        clean["nonfinite_fields"] = bad
    return json.dumps(clean, indent=2, allow_nan=False) + "\n"


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a new temporary file in the same directory
    (created with ``O_EXCL | O_NOFOLLOW``) renamed onto it: a symlink at ``path`` is
    replaced, never written through. For files outside an :class:`OutputDir`."""
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, _NEW_FILE, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def append_text(path: str | os.PathLike[str], text: str) -> None:
    """Append ``text`` to file ``path`` (created if missing); a symlink there is refused
    (``O_NOFOLLOW``), never followed."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o644)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(text)


def save_figure(
    fig: Any, target: str | os.PathLike[str] | tuple[OutputDir, str], **kw: Any
) -> Path:
    """Save a matplotlib figure to a path (its directory made if needed) or to a name in
    an :class:`OutputDir` (``(out, name)``); either way by a temporary name and a rename."""
    if isinstance(target, tuple):
        return target[0].savefig(fig, target[1], **kw)
    p = Path(target)
    p.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    fig.savefig(buf, format=p.suffix.lstrip(".") or "png", **kw)
    return write_atomic(p, buf.getvalue())


def check_new_file(path: str | os.PathLike[str] | None, what: str, *, force: bool = False) -> Path:
    """``path`` as a :class:`Path` if a file may be written there: not empty, not a
    directory, and not an existing file unless ``force`` (then the file, or a symlink
    there, is replaced by a rename, never written through)."""
    text = "" if path is None else os.fspath(path)
    if not str(text).strip():
        msg = f"{what} is empty: allowed a file path"
        raise AdabatchError(msg)
    p = Path(text)
    if p.is_dir() and not p.is_symlink():
        raise _fail(what, p, "is a directory: allowed a file path")
    if (p.exists() or p.is_symlink()) and not force:
        raise _fail(what, p, "already exists: pass --force to replace it")
    return p


def _fail(what: str, path: Any, reason: str) -> AdabatchError:
    return AdabatchError(f"{what} {shown(str(path))} {reason}")


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_dir_path(path: str | os.PathLike[str] | None, what: str = "--out") -> Path:
    """``path`` as a :class:`Path` if it can name an output directory: not empty, not an
    existing non-directory."""
    text = "" if path is None else os.fspath(path)
    if not str(text).strip():
        msg = f"{what} is empty: allowed a directory path"
        raise AdabatchError(msg)
    p = Path(text)
    if (p.exists() or p.is_symlink()) and not p.is_dir():
        raise _fail(what, p, "names an existing file, not a directory: allowed a directory path")
    return p


def _write_marker(dir_fd: int) -> int:
    """Create (or open) the marker file in ``dir_fd``; returns its descriptor."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(MARKER, flags, 0o644, dir_fd=dir_fd)
    if os.fstat(fd).st_size == 0:
        os.write(fd, _MARKER_TEXT)
    return fd


def is_marked(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a real directory (not a symlink) carrying an adabatch marker."""
    p = Path(path)
    if p.is_symlink() or not p.is_dir():
        return False
    return any((p / m).is_file() and not (p / m).is_symlink() for m in (MARKER, *LEGACY_MARKERS))


def mark_dir(path: str | os.PathLike[str], *, what: str = "directory") -> Path:
    """Create ``path`` if needed (parents too) and put the marker in it: adabatch made it
    and may delete it later. A symlink is refused."""
    p = Path(path)
    if p.is_symlink():
        raise _fail(what, p, "is a symlink: adabatch does not write through it")
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, _DIR_FLAGS)
        try:
            os.close(_write_marker(fd))
        finally:
            os.close(fd)
    except OSError as exc:
        raise _fail(what, p, f"cannot be written: {_os_reason(exc)}") from None
    return p


def remove_tree(
    path: str | os.PathLike[str], *, inside: str | os.PathLike[str], what: str = "directory"
) -> bool:
    """Delete directory ``path`` if adabatch made it (it carries a marker) and it lies
    inside ``inside``; ``False`` if there was nothing to delete (absent, or an empty
    directory, which is left in place). Anything else is refused with one line and
    nothing is deleted."""
    p = Path(path)
    if not (p.exists() or p.is_symlink()):
        return False
    root = Path(inside).resolve()
    if p.is_symlink() or not p.is_dir():
        raise _fail(what, p, "is not a directory adabatch created (a file or symlink); not deleted")
    real = p.resolve()
    if real == root or root not in real.parents:
        raise _fail(what, p, f"is not inside {shown(str(root))}; not deleted")
    if not is_marked(p):
        if next(p.iterdir(), None) is None:  # empty: nothing to clear, the caller may use it
            return False
        raise _fail(
            what, p, f"was not created by adabatch (it has no {MARKER} marker); not deleted"
        )
    shutil.rmtree(p)
    return True


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the block is done, then act on them.

    A signal mask would not do: the kernel hands a process signal to any thread that does
    not block it (numpy's BLAS threads), and CPython then raises in the main thread anyway.
    So the Python handlers are swapped for ones that only record the signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kept = {s: h for s, h in kept.items() if h is not None}  # None: not set from Python
    for s in kept:
        signal.signal(s, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        for s, handler in kept.items():
            signal.signal(s, handler)
        for signum in caught[:1]:
            signal.raise_signal(signum)


class OutputDir:
    """A locked output directory; names inside it are never resolved through a symlink.

    Made by :func:`open_output`; ``root`` is the directory's path as the user named it."""

    def __init__(self, root: Path, fd: int, lock_fd: int | None, what: str) -> None:
        self.root = root
        self.what = what
        self._fd = fd
        self._lock_fd = lock_fd
        self._replaces: tuple[str, ...] = ()

    # -- names -------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        """The path of ``name`` inside the directory (checked: relative, no ``..``)."""
        self._parts(name)
        return self.root / name

    def _parts(self, name: str) -> list[str]:
        parts = str(name).split("/")
        if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise _fail(self.what, self.root / str(name), "is not a name inside the directory")
        return parts

    @contextlib.contextmanager
    def _parent(self, name: str, *, create: bool) -> Iterator[tuple[int, str]]:
        """A descriptor of ``name``'s directory (opened without following a symlink,
        made and marked if ``create``) and the last component of ``name``."""
        parts = self._parts(name)
        fds: list[int] = []
        fd = self._fd
        try:
            for part in parts[:-1]:
                try:
                    fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                    os.close(_write_marker(fd))
                fds.append(fd)
            yield fd, parts[-1]
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                reason = "goes through a symlink or a file: adabatch does not write through it"
                raise _fail(self.what, self.root / name, reason) from None
            raise
        finally:
            for f in fds:
                os.close(f)

    def mkdir(self, name: str) -> Path:
        """Make (and mark) subdirectory ``name``; an existing symlink there is refused."""
        with self._parent(f"{name}/{MARKER}", create=True):
            pass
        return self.root / name

    # -- writing -----------------------------------------------------------------------
    @contextlib.contextmanager
    def open_write(self, name: str, *, text: bool = False) -> Iterator[IO[Any]]:
        """A new file opened for writing under a temporary name in ``name``'s directory;
        renamed onto ``name`` when the block ends without an error (the rename replaces a
        symlink at ``name`` itself, never its target)."""
        with self._parent(name, create=True) as (dfd, base):
            tmp = f".{base}.{os.getpid()}.tmp"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, _NEW_FILE, 0o644, dir_fd=dfd)
            done = False
            try:
                with os.fdopen(fd, "wb") as raw:
                    fh: IO[Any] = (
                        io.TextIOWrapper(raw, encoding="utf-8", newline="") if text else raw
                    )
                    yield fh
                    fh.flush()
                    if text:
                        fh.detach()  # type: ignore[attr-defined]
                os.replace(tmp, base, src_dir_fd=dfd, dst_dir_fd=dfd)
                done = True
            finally:
                if not done:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp, dir_fd=dfd)

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write ``data`` to ``name`` (temporary name, then rename)."""
        with self.open_write(name) as fh:
            fh.write(data)
        return self.root / name

    def write_text(self, name: str, text: str) -> Path:
        """Write ``text`` (UTF-8) to ``name`` (temporary name, then rename)."""
        return self.write_bytes(name, text.encode("utf-8"))

    def write_json(self, name: str, value: Any, **kwargs: Any) -> Path:
        """Write ``value`` as RFC-valid JSON (non-finite floats become ``null``)."""
        return self.write_text(name, dumps_json(value, **kwargs) + "\n")

    def write_summary(self, summary: dict[str, Any], name: str = SUMMARY) -> Path:
        """Write ``summary.json`` (see :func:`summary_json`); write it last of a run."""
        return self.write_text(name, summary_json(summary))

    def savefig(self, fig: Any, name: str, **kwargs: Any) -> Path:
        """Save a matplotlib figure to ``name`` (format from its suffix)."""
        fmt = Path(name).suffix.lstrip(".") or "png"
        with self.open_write(name) as fh:
            fig.savefig(fh, format=fmt, **kwargs)
        return self.root / name

    def copy_file(self, src: str | os.PathLike[str], name: str) -> Path:
        """Copy the file ``src`` to ``name`` (temporary name, then rename)."""
        with open(src, "rb") as fin, self.open_write(name) as fout:
            shutil.copyfileobj(fin, fout)
        return self.root / name

    def remove(self, name: str) -> None:
        """Remove file ``name`` if present (a symlink there is removed, not its target)."""
        with self._parent(name, create=False) as (dfd, base):
            try:
                st = os.stat(base, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                raise _fail(self.what, self.root / name, "is a directory; not deleted")
            os.unlink(base, dir_fd=dfd)

    def is_symlink(self, name: str) -> bool:
        """Whether ``name`` is a symlink (not followed)."""
        try:
            with self._parent(name, create=False) as (dfd, base):
                st = os.stat(base, dir_fd=dfd, follow_symlinks=False)
        except (FileNotFoundError, AdabatchError):
            return False
        return stat.S_ISLNK(st.st_mode)

    def read_bytes(self, name: str) -> bytes:
        """The bytes of file ``name`` (``b""`` if absent); a symlink is not followed."""
        try:
            with self._parent(name, create=False) as (dfd, base):
                fd = os.open(base, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise _fail(self.what, self.root / name, f"cannot be read: {_os_reason(exc)}") from None
        with os.fdopen(fd, "rb") as fh:
            return fh.read()

    def exists(self, name: str) -> bool:
        """Whether ``name`` exists in the directory (a symlink counts; it is not followed)."""
        try:
            with self._parent(name, create=False) as (dfd, base):
                os.stat(base, dir_fd=dfd, follow_symlinks=False)
        except (FileNotFoundError, AdabatchError):
            return False
        return True

    # -- whole or marked ---------------------------------------------------------------
    def begin(self, replaces: Sequence[str] | None = None, *, appends: Sequence[str] = ()) -> None:
        """Start writing a run: write ``INCOMPLETE``, then remove the files of an earlier
        run (``replaces``, by default the names given to :func:`open_output`) and any
        symlink at a name the run appends to (``appends``: adabatch never made it)."""
        names = self._replaces if replaces is None else tuple(replaces)
        for name in (*names, *appends):  # refuse before anything changes
            self._parts(name)
        with _interrupts_deferred():  # Ctrl-C here would leave the marker beside old files
            self.write_bytes(INCOMPLETE, b"a run is writing here, or stopped before it finished\n")
            for name in names:
                self.remove(name)
            for name in appends:
                if self.is_symlink(name):
                    self.remove(name)

    def complete(self) -> None:
        """The run's files are all written (``summary.json`` last): remove ``INCOMPLETE``."""
        self.remove(INCOMPLETE)

    def close(self) -> None:
        """Release the lock and the directory."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _open_dir(p: Path, what: str) -> int:
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd = os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        reason = (
            f"cannot be created or opened ({_os_reason(exc)}): allowed a directory you can write"
        )
        raise _fail(what, p, reason) from None
    if not os.access(p, os.W_OK | os.X_OK):
        os.close(fd)
        raise _fail(what, p, "is not writable: allowed a directory you can write")
    return fd


def _check_claim(p: Path, fd: int, what: str, replaces: Sequence[str]) -> None:
    """Refuse a directory adabatch did not mark that holds a file a run would replace."""
    if is_marked(p):
        return
    for name in (*replaces, INCOMPLETE):
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            continue
        msg = (
            f"{what} {shown(str(p))} holds {name!r} but was not written by adabatch (no "
            f"{MARKER} marker): use a new or empty directory"
        )
        raise AdabatchError(msg)


def lock_dir(p: Path, fd: int, what: str) -> int:
    """Mark directory ``fd`` and hold an exclusive lock on its marker; refused if another
    process holds it."""
    try:
        lock_fd = _write_marker(fd)
    except OSError as exc:
        raise _fail(what, p, f"cannot be written: {_os_reason(exc)}") from None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        msg = (
            f"{what} {shown(str(p))} is in use by another adabatch run (it holds the lock on "
            f"{MARKER}): wait for it to finish or use another directory"
        )
        raise AdabatchError(msg) from None
    return lock_fd


@contextlib.contextmanager
def open_output(
    path: str | os.PathLike[str] | None,
    *,
    what: str = "--out",
    replaces: Sequence[str] = (),
) -> Iterator[OutputDir]:
    """Check, create, mark and lock output directory ``path`` for one run.

    ``replaces`` names the files a run writes: :meth:`OutputDir.begin` removes them, and a
    directory without the marker that already holds one of them is refused. If the block
    raises after ``begin`` and before ``complete``, ``INCOMPLETE`` stays."""
    p = check_dir_path(path, what)
    if p.is_symlink() and not p.is_dir():
        raise _fail(what, p, "is a broken symlink: allowed a directory path")
    fd = _open_dir(p, what)
    lock_fd = None
    try:
        _check_claim(p, fd, what, replaces)
        lock_fd = lock_dir(p, fd, what)
    except BaseException:
        if lock_fd is not None:
            os.close(lock_fd)
        os.close(fd)
        raise
    out = OutputDir(p, fd, lock_fd, what)
    out._replaces = tuple(replaces)
    try:
        yield out
    finally:
        out.close()
