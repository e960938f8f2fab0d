"""Reading and writing gpuscope's own files, safely on shared file systems.

gpuscope runs inside other people's training jobs, often as root, often in
directories that other users can write to. Everything here is written so that
a neighbour who can create files next to ours cannot turn a write into an
overwrite of some other file, and so that a wrong or hostile input file
cannot hang the job or exhaust its memory.

``write_atomically(path, data, *, mode=None)``
    Replaces ``path`` with ``data`` so that a reader sees either the old file
    or the complete new one, never a part. The new content is written to a
    temporary file in the same directory and renamed over ``path``:

    * On Linux the temporary file is an unnamed inode (``O_TMPFILE``): it has
      no name while it is written, so a crash or ``kill -9`` during the write
      leaves nothing behind. Only once the data is written and fsynced is it
      given a random name (``linkat`` via ``/proc/self/fd``), which is then
      renamed over the target; a kill in that short window leaves one
      ``.NAME.<random>.gpuscope-tmp`` file.
    * Where ``O_TMPFILE`` is not supported (NFS, old kernels, other systems)
      the temporary file is created with a random name,
      ``.NAME.<random>.gpuscope-tmp``, with ``O_CREAT|O_EXCL|O_NOFOLLOW`` and
      mode 0600: it never opens an existing file or follows a link planted
      there. A ``kill -9`` during the write leaves that file behind.
    * All operations are relative to a descriptor of the target's directory,
      opened once, so the directory cannot be swapped midway.
    * The data is written in full, fsynced, the file closed (errors reported
      by close, as on NFS, count), then renamed; the directory is fsynced
      best effort.
    * Permissions: an existing regular target of the writer's own keeps its
      permission bits (``0o777`` part; setuid/setgid/sticky are dropped); the
      new file belongs to the writer, and a target of another user's lends
      neither its owner nor its mode, so that a neighbour who created the name
      first in a shared directory neither owns nor can read the job's output.
      A new file (or one replacing another user's) gets ``new_file_mode``, or
      ``0o666 & ~umask``, like ``open()``; the umask is read from
      ``/proc/self/status`` (where that is missing, by an ``os.umask`` round
      trip under a lock, which other threads creating files at that instant
      could observe). ``mode=`` always wins when given (applied as is, no
      umask). The temporary file is never more permissive than the result.
    * The target must be missing or a regular file. A symbolic link, a
      directory, a FIFO, a device or a socket at ``path`` is refused with
      ``UnsafePathError`` and left untouched. (The check is an ``lstat``
      before writing; a symlink planted at ``path`` after the check is
      replaced by the rename, which never follows links, so the race is safe.
      A directory planted there makes the rename fail: reported the same way.)
    * On any failure (disk full, file too large, I/O error, EISDIR at the
      rename, ``KeyboardInterrupt``, ...) the temporary file is closed and
      removed, the previous file is left as it was, and ``FileWriteError``
      says which path and why. ``KeyboardInterrupt``/``SystemExit`` are
      re-raised unchanged after the cleanup.

``read_capped(path, limit_bytes, what="file")``
    Reads a whole file that must be a regular file of at most
    ``limit_bytes``: checks the type and size with ``stat`` before opening
    (so a device is never opened), opens with ``O_NONBLOCK`` (a FIFO cannot
    block the open), checks again with ``fstat`` on the descriptor, and reads
    at most ``limit_bytes + 1`` bytes (a file that grows while read is
    refused). Every problem is an ``UnreadableFileError`` with a one-line
    message.

Standard library only; must not import the C extension.
"""

from __future__ import annotations

import errno as _errno
import os
import stat
import threading
from typing import List, Optional, Tuple, Union

__all__ = [
    "FileWriteError",
    "UnsafePathError",
    "UnreadableFileError",
    "TEMP_SUFFIX",
    "write_atomically",
    "read_capped",
]

TEMP_SUFFIX = ".gpuscope-tmp"
"""Every temporary file gpuscope ever gives a name ends with this."""

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)

# Tests set this to False to exercise the named temporary file path.
_USE_O_TMPFILE = bool(_O_TMPFILE)

# What open(O_TMPFILE) fails with where the kernel or file system lacks it
# (old kernels see O_DIRECTORY|O_WRONLY and say EISDIR).
_TMPFILE_UNSUPPORTED = frozenset(
    e for e in (getattr(_errno, n, None) for n in ("EOPNOTSUPP", "ENOTSUP", "EISDIR", "EINVAL", "ENOSYS")) if e)
# What linkat(/proc/self/fd/N) fails with where /proc or the trick is missing.
_LINK_UNSUPPORTED = frozenset(
    e for e in (getattr(_errno, n, None) for n in ("ENOENT", "EPERM", "EXDEV", "ENOSYS", "EOPNOTSUPP", "ENOTSUP",
                                                   "EINVAL")) if e)

_CHUNK = 1 << 20
_NAME_TRIES = 100
_umask_lock = threading.Lock()


class FileWriteError(OSError):
    """``write_atomically`` could not write the file. The message names the
    path and the reason; the previous file, if any, is unchanged and no
    temporary file is left. ``errno`` and ``filename`` are set when known."""

    def __init__(self, message: str, *, errno: Optional[int] = None, filename: Optional[str] = None) -> None:
        super().__init__(message)
        self.errno = errno
        self.filename = filename

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnsafePathError(FileWriteError):
    """The target of ``write_atomically`` exists and is not a regular file (a
    symbolic link, a directory, a FIFO, a device, a socket); it was left
    untouched. The message says what it is and what to pass instead."""


class UnreadableFileError(ValueError):
    """``read_capped`` refused or failed to read a file: missing, not
    readable, not a regular file, or too large. The one-line message starts
    with the path. ``path`` and ``errno`` (when an OS error) are set."""

    def __init__(self, message: str, *, path: Optional[str] = None, errno: Optional[int] = None) -> None:
        super().__init__(message)
        self.path = path
        self.errno = errno


# ---------------------------------------------------------------- helpers


def _kind(st_mode: int) -> str:
    if stat.S_ISREG(st_mode):
        return "a regular file"
    if stat.S_ISLNK(st_mode):
        return "a symbolic link"
    if stat.S_ISDIR(st_mode):
        return "a directory"
    if stat.S_ISFIFO(st_mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(st_mode):
        return "a character device"
    if stat.S_ISBLK(st_mode):
        return "a block device"
    if stat.S_ISSOCK(st_mode):
        return "a socket"
    return "not a regular file"


def _human(n: int) -> str:
    if n < 1024:
        return "1 byte" if n == 1 else f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024.0
        if value < 1024.0 or unit == "PiB":
            break
    if value == int(value):
        return f"{int(value)} {unit}"
    return f"{value:.1f} {unit}"


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return str(e) or type(e).__name__


def _current_umask() -> int:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8) & 0o777
    except (OSError, ValueError, IndexError):
        pass
    # No /proc (or a kernel before 4.7): the round trip briefly sets the
    # process umask to 0o077 (the safest value), under a lock.
    with _umask_lock:
        old = os.umask(0o077)
        os.umask(old)
    return old & 0o777


def _random_token() -> str:
    return os.urandom(8).hex()


def _temp_name(base: str) -> str:
    # Bound the name: NAME_MAX is 255 bytes and the base may already be long.
    short = os.fsdecode(os.fsencode(base)[:96])
    return f".{short}.{_random_token()}{TEMP_SUFFIX}"


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


# ---------------------------------------------------------------- writing


def _open_directory(name: str, directory: str) -> int:
    shown = directory or "."
    try:
        return os.open(shown, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except FileNotFoundError as e:
        raise FileWriteError(f"cannot write {name}: the directory {shown} does not exist; create it first",
                             errno=e.errno, filename=name) from e
    except NotADirectoryError as e:
        raise FileWriteError(f"cannot write {name}: {shown} is not a directory",
                             errno=e.errno, filename=name) from e
    except PermissionError as e:
        raise FileWriteError(f"cannot write {name}: permission denied on the directory {shown}",
                             errno=e.errno, filename=name) from e
    except OSError as e:
        raise FileWriteError(f"cannot write {name}: cannot open the directory {shown}: {_reason(e)}",
                             errno=e.errno, filename=name) from e


def _refusal(name: str, st_mode: int, link_to: Optional[str] = None) -> UnsafePathError:
    if stat.S_ISLNK(st_mode):
        where = f" (to {link_to})" if link_to is not None else ""
        return UnsafePathError(f"cannot write {name}: it is a symbolic link{where}; gpuscope does not write "
                               f"through links: pass the real path", errno=_errno.ELOOP, filename=name)
    if stat.S_ISDIR(st_mode):
        return UnsafePathError(f"cannot write {name}: it is a directory; pass the path of a file "
                               f"(e.g. {os.path.join(name, 'run.json')})", errno=_errno.EISDIR, filename=name)
    return UnsafePathError(f"cannot write {name}: it is {_kind(st_mode)}, not a regular file; gpuscope only "
                           f"replaces regular files: pass the path of a regular file or of a new one",
                           errno=_errno.EINVAL, filename=name)


def _existing_target(dfd: int, name: str, base: str) -> Optional[os.stat_result]:
    """The target's lstat if it is a regular file, None if missing; raises
    UnsafePathError for anything else."""
    try:
        st = os.lstat(base, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise FileWriteError(f"cannot write {name}: {_reason(e)}", errno=e.errno, filename=name) from e
    if stat.S_ISREG(st.st_mode):
        return st
    link_to = None
    if stat.S_ISLNK(st.st_mode):
        try:
            link_to = os.readlink(base, dir_fd=dfd)
        except OSError:
            pass
    raise _refusal(name, st.st_mode, link_to)


def _open_unnamed(dfd: int) -> int:
    """An O_TMPFILE descriptor in the directory, or -1 where unsupported."""
    if not (_USE_O_TMPFILE and _O_TMPFILE) or not os.path.isdir("/proc/self/fd"):
        return -1
    try:
        return os.open(".", _O_TMPFILE | os.O_WRONLY | _O_CLOEXEC, 0o600, dir_fd=dfd)
    except OSError as e:
        if e.errno in _TMPFILE_UNSUPPORTED:
            return -1
        raise


def _link_unnamed(dfd: int, fd: int, base: str) -> str:
    """Gives the O_TMPFILE inode a fresh random name; linkat never replaces
    or follows an existing name (EEXIST: try another)."""
    source = f"/proc/self/fd/{fd}"
    for _ in range(_NAME_TRIES):
        tmp = _temp_name(base)
        try:
            # dst_dir_fd makes CPython call linkat(..., AT_SYMLINK_FOLLOW),
            # which is what resolves the /proc magic link to the inode.
            os.link(source, tmp, dst_dir_fd=dfd, follow_symlinks=True)
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(_errno.EEXIST, "no free temporary file name")


def _create_named(dfd: int, base: str) -> Tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_BINARY
    for _ in range(_NAME_TRIES):
        tmp = _temp_name(base)
        try:
            return os.open(tmp, flags, 0o600, dir_fd=dfd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(_errno.EEXIST, "no free temporary file name")


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:
        n = os.write(fd, view[:_CHUNK])
        if n <= 0:
            raise OSError(_errno.EIO, os.strerror(_errno.EIO))
        view = view[n:]


def _fill(fd: int, payload: bytes, final_mode: int, old: Optional[os.stat_result]) -> None:
    os.fchmod(fd, final_mode)
    _write_all(fd, payload)
    os.fsync(fd)


def write_atomically(path: "os.PathLike[str] | str", data: Union[str, bytes], *, mode: Optional[int] = None,
                     new_file_mode: Optional[int] = None) -> str:
    """Replaces ``path`` with ``data`` (a str is written as UTF-8) so that a
    reader sees the old file or the complete new one; returns
    ``os.fspath(path)``. See the module docstring for the guarantees.

    The result's permission bits: ``mode`` if given; else those of the file
    replaced, if it is ours (the writer's user owns it); else
    ``new_file_mode`` if given, else ``0o666 & ~umask``. A file of another
    user's (one planted first in a shared directory) never lends its mode.

    Raises ``UnsafePathError`` if ``path`` is a symbolic link, a directory,
    a FIFO, a device or a socket (left untouched), ``FileWriteError`` (an
    OSError) naming the path and the reason on any other failure, with the
    previous file unchanged and no temporary file left."""
    fspath = os.fspath(path)
    name = os.fsdecode(fspath)
    if isinstance(data, str):
        payload = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        payload = bytes(data)
    else:
        raise TypeError(f"write_atomically: data must be str or bytes, not {type(data).__name__}")
    for what, value in (("mode", mode), ("new_file_mode", new_file_mode)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0o7777):
            raise ValueError(f"write_atomically: {what} must be an int between 0 and 0o7777, not {value!r}")

    directory, base = os.path.split(name)
    if base in ("", ".", ".."):
        raise _refusal(name, stat.S_IFDIR)

    dfd = _open_directory(name, directory)
    try:
        _write_in(dfd, name, base, payload, mode, new_file_mode)
    finally:
        _close_quietly(dfd)
    return fspath


def _write_in(dfd: int, name: str, base: str, payload: bytes, mode: Optional[int],
              new_file_mode: Optional[int]) -> None:
    old = _existing_target(dfd, name, base)
    if mode is not None:
        final_mode = mode
    elif old is not None and old.st_uid == os.geteuid():
        final_mode = stat.S_IMODE(old.st_mode) & 0o777
    elif new_file_mode is not None:
        final_mode = new_file_mode
    else:
        final_mode = 0o666 & ~_current_umask()

    fd = -1
    tmp: Optional[str] = None
    renaming = False
    try:
        fd = _open_unnamed(dfd)
        if fd >= 0:
            _fill(fd, payload, final_mode, old)
            try:
                tmp = _link_unnamed(dfd, fd, base)
            except OSError as e:
                if e.errno not in _LINK_UNSUPPORTED:
                    raise
                closing, fd = fd, -1
                _close_quietly(closing)  # the unnamed inode goes with it
        if tmp is None:
            fd, tmp = _create_named(dfd, base)
            _fill(fd, payload, final_mode, old)
        closing, fd = fd, -1
        os.close(closing)  # NFS reports write errors here
        renaming = True
        os.replace(tmp, base, src_dir_fd=dfd, dst_dir_fd=dfd)
        tmp = None
    except BaseException as e:
        if fd >= 0:
            _close_quietly(fd)
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
        if not isinstance(e, OSError) or isinstance(e, FileWriteError):
            raise  # KeyboardInterrupt, SystemExit, MemoryError...: cleaned up, re-raised as they are
        if renaming and isinstance(e, IsADirectoryError):
            raise _refusal(name, stat.S_IFDIR) from e
        unchanged = "the previous file is unchanged" if old is not None else "no file was created"
        raise FileWriteError(f"cannot write {name}: {_reason(e)}; {unchanged}",
                             errno=e.errno, filename=name) from e
    try:
        os.fsync(dfd)  # make the rename durable; best effort
    except OSError:
        pass


# ---------------------------------------------------------------- reading


def _unreadable(name: str, e: OSError) -> UnreadableFileError:
    if isinstance(e, FileNotFoundError):
        msg = f"{name}: no such file"
    elif isinstance(e, PermissionError):
        msg = f"{name}: permission denied"
    elif isinstance(e, NotADirectoryError):
        msg = f"{name}: no such file (a parent is not a directory)"
    else:
        msg = f"{name}: cannot read: {_reason(e)}"
    return UnreadableFileError(msg, path=name, errno=e.errno)


def _check_stat(name: str, st: os.stat_result, limit: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFileError(f"{name}: is {_kind(st.st_mode)}, not a regular file (expected a gpuscope {what})",
                                  path=name)
    if st.st_size > limit:
        raise UnreadableFileError(f"{name}: is {_human(st.st_size)}; a gpuscope {what} is at most {_human(limit)}: "
                                  f"is this the right file?", path=name)


def read_capped(path: "os.PathLike[str] | str", limit_bytes: int, what: str = "file") -> bytes:
    """The content of ``path``, which must be a regular file of at most
    ``limit_bytes`` bytes; ``UnreadableFileError`` (a ValueError, one-line
    message starting with the path) otherwise. Never blocks on a FIFO,
    never opens a device it has seen, never reads more than
    ``limit_bytes + 1`` bytes. Symbolic links are followed (reading through
    a link cannot damage anything)."""
    name = os.fsdecode(os.fspath(path))
    if isinstance(limit_bytes, bool) or not isinstance(limit_bytes, int) or limit_bytes < 0:
        raise ValueError(f"read_capped: limit_bytes must be a non-negative int, not {limit_bytes!r}")
    try:
        before = os.stat(name)
    except OSError as e:
        raise _unreadable(name, e) from None
    _check_stat(name, before, limit_bytes, what)  # refuses devices before opening them at all
    try:
        fd = os.open(name, os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY | _O_CLOEXEC | _O_BINARY)
    except OSError as e:
        raise _unreadable(name, e) from None
    try:
        try:
            st = os.fstat(fd)
        except OSError as e:
            raise _unreadable(name, e) from None
        _check_stat(name, st, limit_bytes, what)  # what was opened, not what was stat'ed by name
        chunks: List[bytes] = []
        remaining = limit_bytes + 1
        while remaining > 0:
            try:
                chunk = os.read(fd, min(remaining, _CHUNK))
            except OSError as e:
                raise _unreadable(name, e) from None
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        if remaining <= 0:
            raise UnreadableFileError(f"{name}: grew past {_human(limit_bytes)} while being read; a gpuscope {what} "
                                      f"is at most {_human(limit_bytes)}", path=name)
        return b"".join(chunks)
    finally:
        _close_quietly(fd)
