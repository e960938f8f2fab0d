"""What a run file records about where and how a run was made, gathered
without running anything.

gpuscope runs inside other people's training jobs, on shared machines, so
gathering this metadata must neither run a command (``git`` would run
whatever a repository's config names: ``core.fsmonitor``, filter drivers,
hooks) nor write the job's secrets into a file others can read:

- ``git_info(dir)`` reads the commit and whether tracked files changed from
  the repository's files (HEAD, refs, packed-refs, the index, the HEAD
  commit object), every read capped and non-regular files refused;
- ``redact_argv`` / ``redact_mapping`` replace secret-looking values with
  ``"<redacted>"`` (the flag names and everything else are kept);
- ``environment()`` records only an allowlist of variables, redacted;
- ``run_metadata()`` puts it together; every string in it is valid UTF-8.

Standard library only; ``gpuscope._gpuscope`` is imported lazily (GPU names
and driver version) and its absence only empties those fields.
"""

from __future__ import annotations

import datetime
import getpass
import hashlib
import os
import platform
import re
import socket
import stat
import struct
import sys
import time
import zlib
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

REDACTED = "<redacted>"

# ----------------------------------------------------------------------------
# Reading repository files safely
# ----------------------------------------------------------------------------

_SMALL_CAP = 1 << 20            # HEAD, loose refs, .git files, commondir, config
_PACKED_REFS_CAP = 64 << 20     # packed-refs, read line by line
_PACKED_REFS_LINE_CAP = 64 << 10
_INDEX_CAP = 128 << 20          # .git/index
_LOOSE_OBJECT_CAP = 16 << 20    # a compressed loose object (only commits are read)
_OBJECT_CAP = 16 << 20          # an inflated object or delta
_MAX_DELTA_CHAIN = 1000
_MAX_PACKS = 4096
_MAX_ALTERNATES = 16
_MAX_SYMREF_DEPTH = 5

DEFAULT_TIME_BUDGET_S = 2.0
DEFAULT_HASH_BUDGET_BYTES = 512 << 20

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOCTTY", 0))


class _Odd(Exception):
    """Something in the repository is not as git writes it: give up on the
    part being read (the commit, or the dirty state)."""


def _open_regular(path: "str | bytes", nofollow: bool = False) -> Optional[int]:
    """A read-only descriptor on `path` if it is a regular file, else None.
    Never opens anything else (a FIFO would block, a device node can act on
    open): stat first, open non-blocking, and check again on the descriptor."""
    try:
        st = os.lstat(path) if nofollow else os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    flags = _OPEN_FLAGS | (getattr(os, "O_NOFOLLOW", 0) if nofollow else 0)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _read_capped(path: "str | bytes", cap: int) -> Optional[bytes]:
    """The content of regular file `path` if at most `cap` bytes, else None."""
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        chunks: List[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                return None
    except OSError:
        return None
    finally:
        os.close(fd)


def _pread_exact(fd: int, n: int, offset: int) -> bytes:
    data = os.pread(fd, n, offset)
    if len(data) != n:
        raise _Odd("short read")
    return data


# ----------------------------------------------------------------------------
# Finding the repository
# ----------------------------------------------------------------------------

def _truthy(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _find_repository(start_dir: str) -> Tuple[str, str, str]:
    """(worktree, gitdir, commondir) of the repository holding `start_dir`,
    found as git finds it: the nearest `.git` walking up (a directory, or a
    file `gitdir: PATH` as in linked worktrees and submodules), not past a
    filesystem boundary (unless GIT_DISCOVERY_ACROSS_FILESYSTEM is set)."""
    d = os.path.realpath(start_dir)
    try:
        dev = os.stat(d).st_dev
    except OSError:
        raise _Odd("directory not found") from None
    across = _truthy(os.environ.get("GIT_DISCOVERY_ACROSS_FILESYSTEM"))
    while True:
        dotgit = os.path.join(d, ".git")
        try:
            st: Optional[os.stat_result] = os.stat(dotgit)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError:
            raise _Odd("cannot read .git") from None
        if st is not None:
            return _open_repository(d, dotgit, st)
        parent = os.path.dirname(d)
        if parent == d:
            raise _Odd("not a git repository")
        if not across:
            try:
                if os.stat(parent).st_dev != dev:
                    raise _Odd("not a git repository (stopped at a filesystem boundary)")
            except OSError:
                raise _Odd("not a git repository") from None
        d = parent


def _open_repository(worktree: str, dotgit: str, st: os.stat_result) -> Tuple[str, str, str]:
    if stat.S_ISDIR(st.st_mode):
        gitdir = dotgit
    elif stat.S_ISREG(st.st_mode):
        data = _read_capped(dotgit, 64 << 10)
        if data is None or not data.startswith(b"gitdir:"):
            raise _Odd(".git file is not 'gitdir: PATH'")
        target = data[len(b"gitdir:"):].strip()
        if not target or b"\0" in target or b"\n" in target:
            raise _Odd(".git file is not 'gitdir: PATH'")
        gitdir = os.path.normpath(os.path.join(worktree, os.fsdecode(target)))
    else:
        raise _Odd(".git is neither a directory nor a file")
    commondir = gitdir
    if os.path.lexists(os.path.join(gitdir, "commondir")):
        data = _read_capped(os.path.join(gitdir, "commondir"), 64 << 10)
        target = data.strip() if data is not None else b""
        if not target or b"\0" in target or b"\n" in target:
            raise _Odd("unreadable commondir")
        commondir = os.path.normpath(os.path.join(gitdir, os.fsdecode(target)))
    if not (os.path.isdir(os.path.join(commondir, "objects")) and os.path.isdir(os.path.join(commondir, "refs"))):
        raise _Odd("not a git directory")
    return worktree, gitdir, commondir


# ----------------------------------------------------------------------------
# HEAD and refs
# ----------------------------------------------------------------------------

_OID_RE = re.compile(rb"(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})")
_PER_WORKTREE_REFS = (b"refs/worktree/", b"refs/bisect/", b"refs/rewritten/")


def _parse_oid(text: bytes) -> str:
    text = text.strip()
    if not _OID_RE.fullmatch(text):
        raise _Odd("not an object id")
    return text.decode("ascii").lower()


def _check_refname(name: bytes) -> None:
    """Refuses what git would not write as a ref name (and anything that
    could step outside the refs directories)."""
    if not name.startswith(b"refs/") or len(name) > 4096:
        raise _Odd("bad ref name")
    if any(c < 0x21 or c == 0x7F or c in b"\\~^:?*[" for c in name) or b".." in name or b"@{" in name:
        raise _Odd("bad ref name")
    for part in name.split(b"/"):
        if not part or part.startswith(b".") or part.endswith(b".lock"):
            raise _Odd("bad ref name")


def _packed_ref(commondir: str, name: bytes) -> Optional[str]:
    """The id `name` has in packed-refs (peel lines `^...` skipped), None if
    it is not there."""
    fd = _open_regular(os.path.join(commondir, "packed-refs"))
    if fd is None:
        if os.path.lexists(os.path.join(commondir, "packed-refs")):
            raise _Odd("packed-refs is not a regular file")
        return None
    with os.fdopen(fd, "rb", buffering=1 << 16) as f:
        total = 0
        while True:
            line = f.readline(_PACKED_REFS_LINE_CAP + 1)
            if not line:
                return None
            total += len(line)
            if total > _PACKED_REFS_CAP or len(line) > _PACKED_REFS_LINE_CAP:
                raise _Odd("packed-refs too large")
            line = line.rstrip(b"\r\n")
            if not line or line[:1] in (b"#", b"^"):
                continue
            oid, _, ref = line.partition(b" ")
            if ref == name:
                return _parse_oid(oid)


def _resolve(gitdir: str, commondir: str) -> Tuple[str, Optional[str]]:
    """(commit id, branch) that HEAD names; _Odd if it names none."""
    data = _read_capped(os.path.join(gitdir, "HEAD"), _SMALL_CAP)
    if data is None:
        raise _Odd("HEAD is missing, too large or not a regular file")
    branch: Optional[str] = None
    for _ in range(_MAX_SYMREF_DEPTH + 1):
        if not data.startswith(b"ref:"):
            return _parse_oid(data), branch
        name = data[4:].strip()
        _check_refname(name)
        if branch is None:
            branch = name[len(b"refs/heads/"):].decode("utf-8", "replace") if name.startswith(b"refs/heads/") else None
        base = gitdir if name.startswith(_PER_WORKTREE_REFS) else commondir
        path = os.path.join(base, *os.fsdecode(name).split("/"))
        try:
            st: Optional[os.stat_result] = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError:
            raise _Odd("cannot read a ref") from None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            loose = _read_capped(path, _SMALL_CAP)
            if loose is None:
                raise _Odd("a ref is too large or not a regular file")
            data = loose
            continue
        packed = _packed_ref(commondir, name)
        if packed is None:
            raise _Odd("HEAD names a branch without commits (or a ref this reader cannot find)")
        return packed, branch
    raise _Odd("symbolic refs nest too deep")


# ----------------------------------------------------------------------------
# Config: only core.filemode and extensions.objectformat are read
# ----------------------------------------------------------------------------

def _read_config(commondir: str) -> Dict[str, bytes]:
    """`section.key` -> value for the section-without-subsection entries of
    the repository's own config file (includes are not followed: only
    core.filemode and extensions.objectformat are used)."""
    data = _read_capped(os.path.join(commondir, "config"), _SMALL_CAP)
    out: Dict[str, bytes] = {}
    if not data:
        return out
    section: Optional[bytes] = None
    for raw in data.split(b"\n"):
        line = raw.strip()
        if not line or line[:1] in (b"#", b";"):
            continue
        if line.startswith(b"["):
            end = line.find(b"]")
            inner = line[1:end].strip() if end > 0 else b""
            section = inner.lower() if inner and re.fullmatch(rb"[A-Za-z0-9-]+", inner) else None
            continue
        if section is None:
            continue
        key, eq, value = line.partition(b"=")
        key = key.strip().lower()
        value = re.split(rb"\s[#;]", value, maxsplit=1)[0].strip().strip(b'"') if eq else b"true"
        out[section.decode("ascii") + "." + key.decode("ascii", "replace")] = value.lower()
    return out


def _config_bool(value: Optional[bytes], default: bool) -> bool:
    if value is None:
        return default
    if value in (b"true", b"yes", b"on", b"1"):
        return True
    if value in (b"false", b"no", b"off", b"0", b""):
        return False
    return default


# ----------------------------------------------------------------------------
# The index
# ----------------------------------------------------------------------------

_S_IFMT = 0o170000
_MODE_FILE = 0o100000
_MODE_LINK = 0o120000
_MODE_GITLINK = 0o160000
_MODE_DIR = 0o040000

_ASSUME_VALID = 0x8000
_EXTENDED = 0x4000
_STAGE_MASK = 0x3000
_SKIP_WORKTREE = 0x4000   # extended flags
_INTENT_TO_ADD = 0x2000   # extended flags


class _Index:
    __slots__ = ("entries", "tree", "split")

    def __init__(self) -> None:
        # (path, mode, size, mtime_s, mtime_ns, oid, flags, extended flags)
        self.entries: List[Tuple[bytes, int, int, int, int, bytes, int, int]] = []
        self.tree: Optional[bytes] = None   # root of a valid cache-tree ("TREE")
        self.split = False                   # a split index ("link"): entries elsewhere


def _varint(data: bytes, pos: int) -> Tuple[int, int]:
    """git's offset varint (index v4 prefix lengths, OFS_DELTA offsets)."""
    c = data[pos]
    pos += 1
    value = c & 0x7F
    while c & 0x80:
        if value > (1 << 56):
            raise _Odd("varint overflow")
        c = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (c & 0x7F)
    return value, pos


def _parse_index(data: bytes, hash_len: int, new_hash: Callable[[], Any], budget: "_Budget") -> _Index:
    if len(data) < 12 + hash_len or data[:4] != b"DIRC":
        raise _Odd("index: not a DIRC file")
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        raise _Odd(f"index: version {version} not read")
    end = len(data) - hash_len
    trailer = data[end:]
    if trailer.strip(b"\0"):   # all zeros: written with index.skipHash
        h = new_hash()
        h.update(memoryview(data)[:end])
        if h.digest() != trailer:
            raise _Odd("index: checksum mismatch")
    index = _Index()
    entries = index.entries
    pos = 12
    prev = b""
    fixed = 40 + hash_len
    unpack = struct.Struct(">10I").unpack_from
    for n in range(count):
        if not n & 4095:
            budget.check()
        if pos + fixed + 2 > end:
            raise _Odd("index: truncated")
        _cs, _cn, mtime_s, mtime_ns, _dev, _ino, mode, _uid, _gid, size = unpack(data, pos)
        oid = data[pos + 40:pos + fixed]
        flags = (data[pos + fixed] << 8) | data[pos + fixed + 1]
        p = pos + fixed + 2
        xflags = 0
        if flags & _EXTENDED:
            if version < 3 or p + 2 > end:
                raise _Odd("index: extended flags in a v2 index")
            xflags = (data[p] << 8) | data[p + 1]
            p += 2
        if version == 4:
            strip, p = _varint(data, p)
            nul = data.find(b"\0", p, end)
            if nul < 0 or strip > len(prev):
                raise _Odd("index: bad v4 path")
            path = prev[:len(prev) - strip] + data[p:nul]
            p = nul + 1
        else:
            nul = data.find(b"\0", p, end)
            if nul < 0:
                raise _Odd("index: bad path")
            path = data[p:nul]
            p = pos + ((p - pos + len(path) + 8) & ~7)
        if (flags & 0x0FFF) != min(len(path), 0x0FFF) or p > end:
            raise _Odd("index: path length mismatch")
        entries.append((path, mode, size, mtime_s, mtime_ns, oid, flags, xflags))
        prev = path
        pos = p
    while pos < end:
        if pos + 8 > end:
            raise _Odd("index: truncated extension")
        sig = data[pos:pos + 4]
        (size,) = struct.unpack_from(">I", data, pos + 4)
        body_end = pos + 8 + size
        if body_end > end:
            raise _Odd("index: truncated extension")
        if sig == b"TREE":
            index.tree = _cache_tree_root(data[pos + 8:body_end], hash_len)
        elif sig == b"link":
            index.split = True
        elif sig == b"sdir":
            pass   # sparse index: its directory entries are read as trees
        elif not (b"A" <= sig[:1] <= b"Z"):
            raise _Odd("index: a required extension this reader does not know")
        pos = body_end
    return index


def _cache_tree_root(body: bytes, hash_len: int) -> Optional[bytes]:
    """The root tree id recorded in a "TREE" extension, None if invalid."""
    if not body.startswith(b"\0"):
        return None
    nl = body.find(b"\n", 1)
    if nl < 0:
        return None
    fields = body[1:nl].split(b" ")
    try:
        entry_count = int(fields[0])
    except ValueError:
        return None
    if entry_count < 0 or len(body) < nl + 1 + hash_len:
        return None
    return body[nl + 1:nl + 1 + hash_len]


def _index_tree(entries: Sequence[Tuple[bytes, int, int, int, int, bytes, int, int]],
                new_hash: Callable[[], Any]) -> bytes:
    """The root tree id `git write-tree` would write for these (stage 0,
    not intent-to-add) entries."""
    root: Dict[bytes, Any] = {}
    for path, mode, _size, _ms, _mn, oid, _flags, _x in entries:
        if (mode & _S_IFMT) == _MODE_DIR:            # sparse-index directory entry: a tree
            parts = path.rstrip(b"/").split(b"/")
        else:
            parts = path.split(b"/")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise _Odd("index: a file and a directory of the same name")
            node = child
        if parts[-1] in node:
            raise _Odd("index: duplicate path")
        node[parts[-1]] = (mode, oid)

    def tree_id(node: Dict[bytes, Any]) -> bytes:
        items = []
        for name, value in node.items():
            if isinstance(value, dict):
                items.append((name + b"/", b"40000 " + name + b"\0" + tree_id(value)))
            else:
                mode, oid = value
                if (mode & _S_IFMT) == _MODE_DIR:
                    items.append((name + b"/", b"40000 " + name + b"\0" + oid))
                else:
                    items.append((name, b"%o " % mode + name + b"\0" + oid))
        items.sort(key=lambda item: item[0])
        body = b"".join(item[1] for item in items)
        h = new_hash()
        h.update(b"tree %d\0" % len(body))
        h.update(body)
        digest: bytes = h.digest()
        return digest

    return tree_id(root)


# ----------------------------------------------------------------------------
# Objects: only the HEAD commit is read (for its tree id)
# ----------------------------------------------------------------------------

_TYPES = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}


class _Budget:
    __slots__ = ("deadline", "bytes_left")

    def __init__(self, seconds: float, nbytes: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.bytes_left = nbytes

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise _OverBudget("over the time budget")

    def spend(self, nbytes: int) -> None:
        self.bytes_left -= nbytes
        if self.bytes_left < 0:
            raise _OverBudget("over the byte budget")
        self.check()


class _OverBudget(Exception):
    pass


class _ObjectStore:
    """Reads objects from loose files and pack files (v2 .idx), following
    objects/info/alternates; never writes, never runs anything."""

    def __init__(self, commondir: str, hash_len: int, new_hash: Callable[[], Any], budget: _Budget) -> None:
        self.hash_len = hash_len
        self.new_hash = new_hash
        self.budget = budget
        self.dirs: List[str] = []
        self._add_dir(os.path.join(commondir, "objects"), 0)
        self._packs: Optional[List[Tuple[str, str]]] = None

    def _add_dir(self, objdir: str, depth: int) -> None:
        real = os.path.realpath(objdir)
        if real in self.dirs or len(self.dirs) >= _MAX_ALTERNATES or not os.path.isdir(real):
            return
        self.dirs.append(real)
        if depth >= 5:
            return
        data = _read_capped(os.path.join(real, "info", "alternates"), _SMALL_CAP)
        for line in (data or b"").split(b"\n"):
            line = line.strip()
            if not line or line.startswith((b"#", b'"')):
                continue
            self._add_dir(os.path.join(real, os.fsdecode(line)), depth + 1)

    def packs(self) -> List[Tuple[str, str]]:
        if self._packs is None:
            self._packs = []
            for objdir in self.dirs:
                packdir = os.path.join(objdir, "pack")
                try:
                    names = sorted(os.listdir(packdir))
                except OSError:
                    continue
                for name in names:
                    if name.endswith(".idx") and len(self._packs) < _MAX_PACKS:
                        self._packs.append((os.path.join(packdir, name),
                                            os.path.join(packdir, name[:-4] + ".pack")))
        return self._packs

    def read(self, oid: bytes, depth: int = 0) -> Tuple[bytes, bytes]:
        """(type, content) of object `oid`, its hash checked."""
        if depth > 8:
            raise _Odd("objects: REF_DELTA bases nest too deep")
        found = self._read_loose(oid)
        if found is None:
            for idx_path, pack_path in self.packs():
                offset = self._find_in_idx(idx_path, oid)
                if offset is not None:
                    found = self._read_packed(pack_path, offset, depth)
                    break
        if found is None:
            raise _Odd("objects: HEAD's commit not found")
        kind, content = found
        h = self.new_hash()
        h.update(b"%s %d\0" % (kind, len(content)))
        h.update(content)
        if h.digest() != oid:
            raise _Odd("objects: object does not match its id")
        return kind, content

    def _read_loose(self, oid: bytes) -> Optional[Tuple[bytes, bytes]]:
        hexid = oid.hex()
        for objdir in self.dirs:
            path = os.path.join(objdir, hexid[:2], hexid[2:])
            if not os.path.lexists(path):
                continue
            data = _read_capped(path, _LOOSE_OBJECT_CAP)
            if data is None:
                raise _Odd("objects: loose object too large or not a regular file")
            d = zlib.decompressobj()
            raw = d.decompress(data, _OBJECT_CAP + 64)
            if not d.eof:
                raise _Odd("objects: loose object truncated or too large")
            header, nul, content = raw.partition(b"\0")
            kind, _, size = header.partition(b" ")
            if not nul or kind not in _TYPES.values() or not size.isdigit() or int(size) != len(content):
                raise _Odd("objects: bad loose object header")
            self.budget.spend(len(content))
            return kind, content
        return None

    def _find_in_idx(self, idx_path: str, oid: bytes) -> Optional[int]:
        fd = _open_regular(idx_path)
        if fd is None:
            return None
        try:
            hl = self.hash_len
            head = _pread_exact(fd, 8 + 256 * 4, 0)
            if head[:8] != b"\xfftOc\x00\x00\x00\x02":
                raise _Odd("objects: pack index not version 2")
            fanout = struct.unpack_from(">256I", head, 8)
            n = fanout[255]
            lo = fanout[oid[0] - 1] if oid[0] else 0
            hi = fanout[oid[0]]
            if not lo <= hi <= n or os.fstat(fd).st_size < 1032 + n * (hl + 8) + 2 * hl:
                raise _Odd("objects: bad pack index")
            if (hi - lo) * hl > 64 << 20:
                raise _Odd("objects: pack index too large")
            names = _pread_exact(fd, (hi - lo) * hl, 1032 + lo * hl)
            a, b = 0, hi - lo
            while a < b:
                mid = (a + b) // 2
                cur = names[mid * hl:(mid + 1) * hl]
                if cur < oid:
                    a = mid + 1
                elif cur > oid:
                    b = mid
                else:
                    i = lo + mid
                    offset: int = struct.unpack(">I", _pread_exact(fd, 4, 1032 + n * (hl + 4) + 4 * i))[0]
                    if offset & 0x80000000:
                        offset = struct.unpack(
                            ">Q", _pread_exact(fd, 8, 1032 + n * (hl + 8) + 8 * (offset & 0x7FFFFFFF)))[0]
                    return offset
            return None
        finally:
            os.close(fd)

    def _inflate(self, fd: int, pos: int, size: int) -> bytes:
        if size > _OBJECT_CAP:
            raise _Odd("objects: object too large")
        self.budget.spend(size)
        d = zlib.decompressobj()
        out = bytearray()
        pending = b""
        while not d.eof:
            if not pending:
                pending = os.pread(fd, 1 << 16, pos)
                pos += len(pending)
                if not pending:
                    raise _Odd("objects: pack truncated")
            out += d.decompress(pending, size + 1 - len(out))
            pending = d.unconsumed_tail
            if len(out) > size:
                raise _Odd("objects: pack entry larger than its header says")
        if len(out) != size:
            raise _Odd("objects: pack entry size mismatch")
        return bytes(out)

    def _read_packed(self, pack_path: str, offset: int, depth: int) -> Tuple[bytes, bytes]:
        fd = _open_regular(pack_path)
        if fd is None:
            raise _Odd("objects: pack file missing or not a regular file")
        try:
            head = _pread_exact(fd, 12, 0)
            if head[:4] != b"PACK" or struct.unpack_from(">I", head, 4)[0] not in (2, 3):
                raise _Odd("objects: not a pack file")
            deltas: List[bytes] = []
            base: Optional[Tuple[bytes, bytes]] = None
            cur = offset
            while base is None:
                if len(deltas) > _MAX_DELTA_CHAIN or cur < 12:
                    raise _Odd("objects: bad delta chain")
                hdr = os.pread(fd, 32 + self.hash_len, cur)
                if not hdr:
                    raise _Odd("objects: pack truncated")
                c = hdr[0]
                kind = (c >> 4) & 7
                size = c & 15
                shift = 4
                i = 1
                while c & 0x80:
                    if i >= 10:
                        raise _Odd("objects: bad pack entry header")
                    c = hdr[i]
                    i += 1
                    size |= (c & 0x7F) << shift
                    shift += 7
                if kind in _TYPES:
                    base = (_TYPES[kind], self._inflate(fd, cur + i, size))
                elif kind == 6:     # OFS_DELTA: base at a negative offset in this pack
                    back, i = _varint(hdr, i)
                    deltas.append(self._inflate(fd, cur + i, size))
                    if back <= 0 or back > cur:
                        raise _Odd("objects: bad OFS_DELTA")
                    cur -= back
                elif kind == 7:     # REF_DELTA: base named by its id
                    base_oid = hdr[i:i + self.hash_len]
                    if len(base_oid) != self.hash_len:
                        raise _Odd("objects: pack truncated")
                    deltas.append(self._inflate(fd, cur + i + self.hash_len, size))
                    base = self.read(base_oid, depth + 1)
                else:
                    raise _Odd("objects: bad pack entry type")
        finally:
            os.close(fd)
        base_kind, content = base
        for delta in reversed(deltas):
            content = _apply_delta(content, delta)
            self.budget.spend(len(content))
        return base_kind, content


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    def size_varint(pos: int) -> Tuple[int, int]:
        value = shift = 0
        while True:
            c = delta[pos]
            pos += 1
            value |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return value, pos

    try:
        src_size, pos = size_varint(0)
        dst_size, pos = size_varint(pos)
        if src_size != len(base) or dst_size > _OBJECT_CAP:
            raise _Odd("objects: delta does not fit its base")
        out = bytearray()
        while pos < len(delta):
            op = delta[pos]
            pos += 1
            if op & 0x80:
                off = n = 0
                for k in range(4):
                    if op & (1 << k):
                        off |= delta[pos] << (8 * k)
                        pos += 1
                for k in range(3):
                    if op & (0x10 << k):
                        n |= delta[pos] << (8 * k)
                        pos += 1
                n = n or 0x10000
                if off + n > len(base):
                    raise _Odd("objects: delta copies past its base")
                out += base[off:off + n]
            elif op:
                if pos + op > len(delta):
                    raise _Odd("objects: truncated delta")
                out += delta[pos:pos + op]
                pos += op
            else:
                raise _Odd("objects: bad delta opcode")
        if len(out) != dst_size:
            raise _Odd("objects: delta result size mismatch")
        return bytes(out)
    except IndexError:
        raise _Odd("objects: truncated delta") from None


def _commit_tree(store: _ObjectStore, commit_hex: str) -> bytes:
    kind, content = store.read(bytes.fromhex(commit_hex))
    if kind != b"commit":
        raise _Odd("objects: HEAD is not a commit")
    line = content.split(b"\n", 1)[0]
    if not line.startswith(b"tree "):
        raise _Odd("objects: commit without a tree")
    tree = _parse_oid(line[5:])
    if len(tree) != 2 * store.hash_len:
        raise _Odd("objects: tree id of another hash")
    return bytes.fromhex(tree)


# ----------------------------------------------------------------------------
# Dirty detection
# ----------------------------------------------------------------------------

def _safe_index_path(path: bytes) -> bool:
    if not path or path.startswith(b"/") or path.endswith(b"/") or b"//" in path:
        return False
    if b"/." not in path and not path.startswith(b"."):
        return True
    for part in path.split(b"/"):
        if part in (b"", b".", b"..") or part.lower() == b".git":
            return False
    return True


def _hash_worktree_file(full: bytes, header_kind: bytes, new_hash: Callable[[], Any],
                        budget: _Budget) -> Optional[bytes]:
    """The blob id git would compute for a regular file (no filters applied),
    None if it changed while being read."""
    fd = _open_regular(full, nofollow=True)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        budget.spend(size)
        h = new_hash()
        h.update(b"%s %d\0" % (header_kind, size))
        done = 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            done += len(chunk)
            if done > size:
                return None
            h.update(chunk)
            budget.check()
        return h.digest() if done == size else None
    finally:
        os.close(fd)


def _show(path: bytes) -> str:
    return path.decode("utf-8", "backslashreplace")


def _submodule_moved(path: str, recorded: bytes) -> bool:
    dotgit = os.path.join(path, ".git")
    try:
        st = os.stat(dotgit)
    except OSError:
        return False
    _, gitdir, commondir = _open_repository(path, dotgit, st)
    commit, _ = _resolve(gitdir, commondir)
    return commit != recorded.hex()


def _dirty(worktree: str, gitdir: str, commondir: str, commit: str, budget: _Budget) -> Tuple[Optional[bool], str]:
    """(dirty, why): True when a tracked file differs from the index or the
    index from HEAD's tree, False when neither, None when not known."""
    hash_len = len(commit) // 2
    new_hash: Callable[[], Any] = (lambda: hashlib.new("sha1", usedforsecurity=False)) if hash_len == 20 \
        else (lambda: hashlib.new("sha256"))
    config = _read_config(commondir)
    fmt = config.get("extensions.objectformat", b"sha1")
    if fmt != (b"sha1" if hash_len == 20 else b"sha256"):
        raise _Odd("HEAD's id does not match the repository's object format")
    filemode = _config_bool(config.get("core.filemode"), True)

    index_path = os.path.join(gitdir, "index")
    try:
        index_mtime_ns = os.stat(index_path).st_mtime_ns
    except OSError:
        return None, "no index"
    data = _read_capped(index_path, _INDEX_CAP)
    if data is None:
        return None, "index too large or not a regular file"
    index = _parse_index(data, hash_len, new_hash, budget)
    del data
    if index.split:
        return None, "split index not read"

    wt = os.path.join(os.fsencode(worktree), b"")
    dirs_ok: Dict[bytes, bool] = {}

    def leading_dirs_ok(path: bytes) -> bool:
        # git treats a path below a symlink (or a non-directory) as deleted
        cut = path.rfind(b"/")
        if cut < 0:
            return True
        parent = path[:cut]
        ok = dirs_ok.get(parent)
        if ok is None:
            ok = leading_dirs_ok(parent)
            if ok:
                try:
                    ok = stat.S_ISDIR(os.lstat(wt + parent).st_mode)
                except OSError:
                    ok = False
            dirs_ok[parent] = ok
        return ok

    has_ita = False
    for n, (path, mode, size, mtime_s, mtime_ns, oid, flags, xflags) in enumerate(index.entries):
        if not n & 63:
            budget.check()
        if flags & _STAGE_MASK:
            return True, f"unmerged: {_show(path)}"
        if xflags & _INTENT_TO_ADD:
            has_ita = True
            continue
        kind = mode & _S_IFMT
        if flags & _ASSUME_VALID or xflags & _SKIP_WORKTREE or kind == _MODE_DIR:
            continue
        if kind not in (_MODE_FILE, _MODE_LINK, _MODE_GITLINK) or not _safe_index_path(path):
            raise _Odd("index: an entry git would not write")
        full = wt + path
        if not leading_dirs_ok(path):
            return True, f"deleted: {_show(path)}"
        try:
            st = os.lstat(full)
        except (FileNotFoundError, NotADirectoryError):
            return True, f"deleted: {_show(path)}"
        if kind == _MODE_GITLINK:
            # a submodule counts when its directory is gone or replaced, or when it is
            # checked out at another commit than the one recorded (changes inside it
            # are not looked at); one not checked out (no .git in it) never does
            if not stat.S_ISDIR(st.st_mode):
                return True, f"type changed: {_show(path)}"
            if _submodule_moved(os.fsdecode(full), oid):
                return True, f"submodule at another commit: {_show(path)}"
            continue
        if kind == _MODE_LINK:
            if not stat.S_ISLNK(st.st_mode):
                return True, f"type changed: {_show(path)}"
        elif not stat.S_ISREG(st.st_mode):
            return True, f"type changed: {_show(path)}"
        elif filemode and bool(mode & 0o100) != bool(st.st_mode & 0o100):
            return True, f"mode changed: {_show(path)}"
        st_mtime_s, st_mtime_ns = divmod(st.st_mtime_ns, 1_000_000_000)
        racy = mtime_s * 1_000_000_000 + mtime_ns >= index_mtime_ns
        if (not racy and size == st.st_size & 0xFFFFFFFF and mtime_s == st_mtime_s & 0xFFFFFFFF
                and mtime_ns == st_mtime_ns):
            continue
        if kind == _MODE_LINK:
            target = os.readlink(full)
            budget.spend(len(target))
            h = new_hash()
            h.update(b"blob %d\0" % len(target))
            h.update(target)
            digest: Optional[bytes] = h.digest()
        else:
            digest = _hash_worktree_file(full, b"blob", new_hash, budget)
            if digest is None:
                return None, f"changed while read: {_show(path)}"
        if digest != oid:
            return True, f"modified: {_show(path)}"

    if has_ita:
        return True, "intent-to-add entries (git add -N)"
    tree = index.tree
    if tree is None:
        tree = _index_tree(index.entries, new_hash)
    store = _ObjectStore(commondir, hash_len, new_hash, budget)
    if tree != _commit_tree(store, commit):
        return True, "staged changes (the index differs from HEAD)"
    return False, "clean"


def git_info(start_dir: "str | os.PathLike[str]", *, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
             hash_budget_bytes: int = DEFAULT_HASH_BUDGET_BYTES) -> Dict[str, Any]:
    """The git state of the repository holding `start_dir`, read from its
    files without running git or anything its config names.

    Returns ``{"commit": hex id or None, "dirty": True/False/None,
    "branch": name or None, "object_format": "sha1"/"sha256"/None,
    "reason": why commit/dirty are None, or what made it dirty}``.
    ``commit`` is None outside a repository, on an unborn branch, and when
    anything is not as git writes it. ``dirty``: True when a tracked file
    differs from the index (content, symlink target, executable bit, type,
    deleted) or the index from HEAD's tree (staged changes, also ``git add
    -N`` and unmerged paths); False when neither; None when not known (over
    the time or hashing budget, split index, unreadable objects). Untracked
    files never count. Never raises."""
    info: Dict[str, Any] = {"commit": None, "dirty": None, "branch": None, "object_format": None,
                            "reason": None}
    try:
        worktree, gitdir, commondir = _find_repository(os.fspath(start_dir))
        commit, branch = _resolve(gitdir, commondir)
    except _Odd as exc:
        info["reason"] = str(exc)
        return info
    except Exception as exc:  # noqa: BLE001 - metadata is best effort; never fail a save on it
        info["reason"] = f"unexpected: {type(exc).__name__}"
        return info
    info.update(commit=commit, branch=branch, object_format="sha1" if len(commit) == 40 else "sha256")
    try:
        budget = _Budget(time_budget_s, hash_budget_bytes)
        info["dirty"], info["reason"] = _dirty(worktree, gitdir, commondir, commit, budget)
    except _OverBudget as exc:
        info["reason"] = f"dirty state unknown: {exc}"
    except _Odd as exc:
        info["reason"] = f"dirty state unknown: {exc}"
    except Exception as exc:  # noqa: BLE001
        info["reason"] = f"dirty state unknown: {type(exc).__name__}"
    return info


# ----------------------------------------------------------------------------
# Redaction
# ----------------------------------------------------------------------------

_SECRET_WORDS = frozenset({
    "token", "secret", "secrets", "password", "passwords", "passwd", "pwd", "pass", "passphrase",
    "credential", "credentials", "cred", "creds", "auth", "authorization", "cookie", "cookies",
    "apikey", "apikeys", "signature", "sig",
})
# one-word names that end in one of these are secret too (hftoken, accesskey, ...)
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "apikey", "accesskey", "secretkey",
                    "privatekey", "credential", "credentials")
# "token" next to these is a vocabulary token, not a credential (pad_token_id, max_token, ...)
_TOKEN_BEFORE = frozenset({"pad", "eos", "bos", "unk", "sep", "cls", "mask", "special", "start", "end", "stop",
                           "image", "video", "audio", "vision", "placeholder", "max", "min", "num"})
_TOKEN_AFTER = frozenset({"id", "ids", "idx", "index", "type", "types", "len", "length", "count", "counts",
                          "limit", "budget", "size", "dim", "num", "position", "positions"})
# a last word that makes the name describe a secret rather than hold it (auth_type,
# token_path, password_file, secret_name, token_env, password_length)
_DESCRIPTORS = _TOKEN_AFTER | frozenset({
    "file", "files", "path", "dir", "directory", "env", "var", "name", "method", "mode", "scheme", "provider",
    "backend", "kind", "format", "url", "uri", "host", "endpoint", "server", "enabled", "disabled", "required",
    "timeout", "ttl", "expiry", "expires"})
# "<x> key" that names a field rather than a credential (sort_key, label_key, ...)
_KEY_BEFORE = frozenset({"sort", "text", "label", "labels", "image", "input", "output", "target", "column",
                         "field", "metric", "monitor", "caption", "prompt", "response", "cache", "group"})


def _words(name: str) -> List[str]:
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w]


def is_secret_name(name: str) -> bool:
    """Whether a flag, key or variable name looks like it holds a secret:
    one of its words (split on -, _, ., camelCase) is token, secret,
    password/passwd/pwd/pass, credential(s), auth, cookie, apikey, ...,
    or its last word is key (api-key, wandb_key, access_key); vocabulary
    tokens (pad_token_id, max-tokens, tokenizer) and names that describe a
    secret (auth_type, token_path, password_file, secret_name) are not."""
    words = _words(name)
    if len(words) > 1 and words[-1] in _DESCRIPTORS:
        return False
    for i, word in enumerate(words):
        if word in _SECRET_WORDS or word.endswith(_SECRET_SUFFIXES):
            if word.endswith("token") and ((i > 0 and words[i - 1] in _TOKEN_BEFORE)
                                           or (i + 1 < len(words) and words[i + 1] in _TOKEN_AFTER)):
                continue
            return True
    return bool(words) and words[-1] == "key" and not (len(words) > 1 and words[-2] in _KEY_BEFORE)


_NAME = r"[A-Za-z_][\w.\-]*"
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^\s/?#@:]*):([^\s/?#]*)@")
_ASSIGNMENT = re.compile(r"(?<![\w.\-])((?:--?)?" + _NAME + r")=(?!=)([^\s&#;,]+)")
_SPACED_FLAG = re.compile(r"(?<![\w.\-])(--?" + _NAME + r")(\s+)(?!-)([^\s\"']+)")
_QUOTED_PAIR = re.compile(r"""(["'])(""" + _NAME + r""")\1(\s*:\s*)(["'])((?:\\.|(?!\4)[^\\])*)\4""")
_WEAK_HEADER_NAMES = frozenset({"key", "pass", "auth", "sig"})   # too common in prose as "key: ..."
_HEADER = re.compile(r"(?<![\w.\-])(" + _NAME + r")(\s*:\s*)((?:Bearer|Basic|Digest|Token|Negotiate)\s+)?"
                     r"(?!<redacted>)([^\s\"',;]+)")
_CREDENTIALS = [re.compile(p) for p in (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)",
    r"(?<![A-Za-z0-9])hf_[A-Za-z0-9]{30,}",                          # Hugging Face
    r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}",                       # OpenAI, Anthropic
    r"(?<![A-Za-z0-9])[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",          # Stripe
    r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{30,}",                   # GitHub
    r"(?<![A-Za-z0-9])github_pat_[A-Za-z0-9_]{20,}",
    r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_\-]{20,}",                     # GitLab
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])",      # AWS access key ids
    r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}",                       # Google API keys
    r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}",                 # Slack
    r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*",  # JWT
)]
_COOKIE_HEADER = re.compile(r"(?i)(?<![\w.\-])((?:set-)?cookie\s*:\s*)[^\r\n\"']+")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=\-]{8,}")


def redact_text(text: str) -> str:
    """`text` with the secrets it visibly holds replaced by "<redacted>":
    a URL's password (``https://user:<redacted>@host``), ``name=value``
    pairs (hydra overrides, URL query parameters, env assignments),
    ``"name": "value"`` and ``Name: value`` pairs whose name looks secret,
    and well-known credential formats anywhere."""
    if not text:
        return text
    text = _URL_USERINFO.sub(lambda m: m.group(1) + m.group(2) + ":" + REDACTED + "@", text)
    text = _ASSIGNMENT.sub(lambda m: m.group(1) + "=" + REDACTED if is_secret_name(m.group(1)) else m.group(0), text)
    text = _SPACED_FLAG.sub(
        lambda m: m.group(1) + m.group(2) + REDACTED if is_secret_name(m.group(1)) else m.group(0), text)
    text = _QUOTED_PAIR.sub(
        lambda m: (m.group(1) + m.group(2) + m.group(1) + m.group(3) + m.group(4) + REDACTED + m.group(4)
                   if is_secret_name(m.group(2)) else m.group(0)), text)
    text = _COOKIE_HEADER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _HEADER.sub(
        lambda m: (m.group(1) + m.group(2) + (m.group(3) or "") + REDACTED
                   if is_secret_name(m.group(1)) and m.group(1).lower() not in _WEAK_HEADER_NAMES else m.group(0)),
        text)
    for pattern in _CREDENTIALS:
        text = pattern.sub(REDACTED, text)
    return _BEARER.sub(lambda m: m.group(1) + REDACTED, text)


_FLAG = re.compile(r"-{1,2}[A-Za-z]")


def redact_argv(argv: Sequence[str]) -> List[str]:
    """A command line with its secrets replaced by "<redacted>":
    ``--flag=value`` and ``--flag value`` where the flag's name looks secret
    (is_secret_name), ``name=value`` arguments likewise, and everywhere what
    redact_text finds (credential formats, URL passwords, query parameters)."""
    out: List[str] = []
    value_next = False
    for arg in argv:
        arg = arg if isinstance(arg, str) else str(arg)
        if value_next:
            value_next = False
            if not arg.startswith("--"):     # the secret flag's value (never a next --flag)
                out.append(REDACTED)
                continue
        if _FLAG.match(arg):
            flag, eq, value = arg.partition("=")
            if is_secret_name(flag):
                if eq:
                    out.append(flag + "=" + REDACTED)
                else:
                    out.append(arg)
                    value_next = True
                continue
            out.append(flag + eq + redact_text(value) if eq else arg)
            continue
        out.append(redact_text(arg))
    return out


def _redact_value(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if depth > 32:
        return REDACTED
    if isinstance(value, Mapping):
        return _redact_pairs(value, depth + 1)
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            return redact_argv(value)
        return [_redact_value(v, depth + 1) for v in value]
    return value


def _redact_pairs(d: Mapping[Any, Any], depth: int) -> Dict[Any, Any]:
    out: Dict[Any, Any] = {}
    for key, value in d.items():
        if isinstance(key, str) and is_secret_name(key) and value is not None and not isinstance(value, bool):
            out[redact_text(key)] = REDACTED
        else:
            out[redact_text(key) if isinstance(key, str) else key] = _redact_value(value, depth)
    return out


def redact_mapping(d: Mapping[str, Any]) -> Dict[str, Any]:
    """A copy of `d` with secrets replaced by "<redacted>": the whole value
    of a secret-looking key (None and booleans kept), and in every other
    value (nested mappings and lists included) what redact_text /
    redact_argv find."""
    return _redact_pairs(d, 0)


# ----------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------

_ENV_NAMES = frozenset({
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG", "CUDNN_LOGINFO_DBG", "TOKENIZERS_PARALLELISM",
    "PYTHONHASHSEED", "RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_NODEID", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",
})
_ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "TORCHINDUCTOR_", "PYTORCH_", "GPUSCOPE_")


def environment(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment variables worth recording to reproduce a run (an
    allowlist: CUDA_*, NCCL_*, TORCH_*, TORCHINDUCTOR_*, PYTORCH_*,
    GPUSCOPE_*, thread counts, the torch.distributed and SLURM rank/job
    variables, ...), redacted like redact_mapping; nothing else."""
    env = os.environ if environ is None else environ
    picked = {k: v for k, v in env.items()
              if isinstance(k, str) and isinstance(v, str) and re.fullmatch(r"[A-Z][A-Z0-9_]*", k)
              and (k in _ENV_NAMES or k.startswith(_ENV_PREFIXES))}
    return dict(sorted(redact_mapping(picked).items()))


# ----------------------------------------------------------------------------
# The run metadata
# ----------------------------------------------------------------------------

def _container_image() -> Optional[str]:
    for var in ("GPUSCOPE_CONTAINER_IMAGE", "CONTAINER_IMAGE", "APPTAINER_CONTAINER", "SINGULARITY_CONTAINER",
                "ENROOT_ROOTFS"):
        if os.environ.get(var):
            return redact_text(os.environ[var])
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return "container (image not named: set GPUSCOPE_CONTAINER_IMAGE)"
    return None


def _gpus_and_driver() -> Tuple[List[str], Optional[str], Optional[int]]:
    try:
        from . import _gpuscope
        report = _gpuscope.run_doctor()
        facts = report.facts
        names = [facts[f"gpu{i}.name"] for i in range(report.gpu_count) if f"gpu{i}.name" in facts]
        cuda = report.cuda_driver_version
        return names, report.driver_version or None, cuda if cuda > 0 else None
    except Exception:  # noqa: BLE001 - metadata is best effort; never fail a save on it
        return [], None, None


def _gpuscope_version() -> Optional[str]:
    try:
        from . import _gpuscope
        return str(_gpuscope.__version__)
    except Exception:  # noqa: BLE001
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(m: "re.Match[str]") -> str:
    cp = ord(m.group())
    return "\\x%02x" % (cp - 0xDC00) if 0xDC80 <= cp <= 0xDCFF else "\\u%04x" % cp


def valid_text(obj: Any) -> Any:
    """`obj` (str, or dicts and lists of them) with every string encodable as
    UTF-8: an undecodable byte carried as a lone surrogate (os.fsdecode of
    b"imag\\xe9net" is "imag\\udce9net") becomes a backslash escape (the 11
    characters imag\\xe9net); any other lone surrogate becomes \\udXXX."""
    if isinstance(obj, str):
        return _SURROGATE.sub(_escape_surrogate, obj)
    if isinstance(obj, Mapping):
        return {valid_text(k): valid_text(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [valid_text(v) for v in obj]
    return obj


def run_metadata(dataset: Optional[str] = None, extra: Optional[Mapping[str, Any]] = None, *,
                 cwd: "Optional[str | os.PathLike[str]]" = None) -> Dict[str, Any]:
    """Where and how this run is made, for a run file: command line
    (redacted), working directory, git commit of `cwd` (default: the current
    directory; "-dirty" appended when tracked files changed, read without
    running git), container image, dataset id, host, user, GPUs, driver,
    library versions, an allowlist of environment variables (redacted) and
    `extra` (redacted). Every string is valid UTF-8. Never raises on the
    metadata it cannot gather (those fields are null/empty)."""
    try:
        here: Optional[str] = os.fspath(cwd) if cwd is not None else os.getcwd()
    except (OSError, TypeError):
        here = None
    info = git_info(here) if here else {"commit": None, "dirty": None}
    commit, dirty = info.get("commit"), info.get("dirty")
    gpus, driver, cuda_driver = _gpus_and_driver()
    libraries: Dict[str, Optional[str]] = {"gpuscope": _gpuscope_version(), "python": platform.python_version()}
    torch = sys.modules.get("torch")  # never imported here: only reported if the job uses it
    if torch is not None:
        libraries["torch"] = str(getattr(torch, "__version__", ""))
        torch_cuda = getattr(getattr(torch, "version", None), "cuda", None)
        if torch_cuda:
            libraries["torch_cuda"] = str(torch_cuda)
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001
        user = ""
    try:
        host = socket.gethostname()
    except OSError:
        host = ""
    meta: Dict[str, Any] = {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": redact_argv(sys.argv),
        "cwd": here,
        "git_commit": (commit + ("-dirty" if dirty is True else "")) if commit else None,
        "git_dirty": dirty if commit else None,
        "container_image": _container_image(),
        "dataset": redact_text(dataset) if isinstance(dataset, str) else dataset,
        "host": host,
        "user": user,
        "gpus": gpus,
        "driver_version": driver,
        "cuda_driver_version": cuda_driver,
        "libraries": libraries,
        "environment": environment(),
    }
    if extra:
        meta["extra"] = redact_mapping(extra)
    clean: Dict[str, Any] = valid_text(meta)
    return clean
