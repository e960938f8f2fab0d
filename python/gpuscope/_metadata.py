"""What a run file records about where and how a run was made, gathered
without running anything.

gpuscope runs inside other people's training jobs, on shared machines, so
gathering this metadata must neither run a command (``git`` would run
whatever a repository's config names: ``core.fsmonitor``, filter drivers,
hooks) nor write the job's secrets into a file others can read:

- ``git_info(dir)`` reads the commit from the repository's files (HEAD,
  refs, packed-refs), every read capped and non-regular files refused, and
  asks pygit2 (libgit2, which runs nothing a repository names) whether
  tracked files changed: without pygit2 that is unknown (None);
- ``redact_argv`` / ``redact_mapping`` replace secret-looking values with
  ``"<redacted>"`` (the flag names and everything else are kept);
- ``environment()`` records only an allowlist of variables, redacted;
- ``run_metadata()`` puts it together; every string in it is valid UTF-8.

Standard library only, but for two lazy imports whose absence only empties
fields: ``pygit2`` (the dirty flag) and ``gpuscope._gpuscope`` (GPU names and
driver version).
"""

from __future__ import annotations

import datetime
import getpass
import os
import platform
import re
import socket
import stat
import sys
import threading
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

REDACTED = "<redacted>"

# ----------------------------------------------------------------------------
# Reading repository files safely
# ----------------------------------------------------------------------------

_SMALL_CAP = 1 << 20            # HEAD, loose refs, .git files, commondir
_PACKED_REFS_CAP = 64 << 20     # packed-refs, read line by line
_PACKED_REFS_LINE_CAP = 64 << 10
_MAX_SYMREF_DEPTH = 5

DEFAULT_TIME_BUDGET_S = 2.0     # for the dirty check
DEFAULT_MAX_FILES = 200_000     # tracked files past which the dirty check is not started

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
               | getattr(os, "O_NOCTTY", 0))


class _Odd(Exception):
    """Something in the repository is not as git writes it: give up on the
    part being read."""


def _open_regular(path: "str | bytes") -> Optional[int]:
    """A read-only descriptor on `path` if it is a regular file, else None.
    Never opens anything else (a FIFO would block, a device node can act on
    open): stat first, open non-blocking, and check again on the descriptor."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        fd = os.open(path, _OPEN_FLAGS)
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
# Whether the tree is dirty: through pygit2 (libgit2), never through git
# ----------------------------------------------------------------------------

# What libgit2 reads when it opens the repository and compares it, checked to
# be regular files of a sane size before it is handed the repository (it
# would block on a FIFO, as git would); the index has its own, larger, cap.
_LIBGIT2_READS = ("config", "config.worktree", "info/attributes", "info/exclude", "objects/info/alternates")
_WORKTREE_READS = (".gitattributes", ".gitmodules")
_LIBGIT2_FILE_CAP = 16 << 20
_INDEX_CAP = 128 << 20
_DELTA_WORDS = {"D": "deleted", "T": "type changed"}

# Held while a check runs: libgit2 cannot be stopped once started, so a check
# still running past its budget finishes in the background, and until then
# later checks say "unknown" instead of starting another.
_CHECK_RUNNING = threading.Lock()


def _after_fork_in_child() -> None:
    global _CHECK_RUNNING
    _CHECK_RUNNING = threading.Lock()   # the thread that held it is not in the child


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

# Worktrees whose check ran past its budget, with their index's (inode, size,
# mtime) then: not checked again until the index changes, so that a tree too
# large for the budget is not hashed in the background at every save.
_OVER_BUDGET: Dict[str, Tuple[int, int, int]] = {}


def _unfit(path: str, cap: int) -> bool:
    """Whether `path` exists but is not a regular file of at most `cap` bytes
    (a FIFO, a device, a symlink loop, a directory, a huge file)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        return True
    return not stat.S_ISREG(st.st_mode) or st.st_size > cap


def _why_not_check(worktree: str, gitdir: str, commondir: str, max_files: int) -> Optional[str]:
    """Why the repository is not handed to libgit2, or None when it may be."""
    names = [os.path.join(d, *n.split("/")) for d in {gitdir, commondir} for n in _LIBGIT2_READS]
    names += [os.path.join(worktree, n) for n in _WORKTREE_READS]
    for path in names:
        if _unfit(path, _LIBGIT2_FILE_CAP):
            return f"{os.path.relpath(path, worktree)} is not a regular file or is over 16 MiB"
    index = os.path.join(gitdir, "index")
    if _unfit(index, _INDEX_CAP):
        return "the index is not a regular file or is over 128 MiB"
    fd = _open_regular(index)
    if fd is not None:
        try:
            head = os.pread(fd, 12, 0)
        finally:
            os.close(fd)
        if head[:4] == b"DIRC" and int.from_bytes(head[8:12], "big") > max_files:
            return f"more than {max_files} tracked files"
    return None


def _head_commit(path: str) -> Optional[str]:
    """The commit checked out in the repository at `path` (a submodule), None
    when it has no .git (not checked out)."""
    dotgit = os.path.join(path, ".git")
    try:
        st = os.stat(dotgit)
    except OSError:
        return None
    _, gitdir, commondir = _open_repository(path, dotgit, st)
    return _resolve(gitdir, commondir)[0]


def _pygit2_dirty(pygit2: Any, worktree: str, commit: str) -> Tuple[bool, str]:
    """(dirty, why) from libgit2's index-to-HEAD and worktree-to-index diffs,
    what `git status` compares. libgit2 runs no hook, no core.fsmonitor and
    no filter driver a config names (only its built-in end-of-line and ident
    filters), never writes, and is not asked about untracked files."""
    from pygit2.enums import DiffOption, RepositoryOpenFlag

    repo = pygit2.Repository(worktree, RepositoryOpenFlag.NO_SEARCH)
    index = repo.index
    if index.conflicts is not None:
        return True, "unmerged paths"
    if len(index.diff_to_tree(repo[commit].peel(pygit2.Tree))):
        return True, "staged changes (the index differs from HEAD)"
    # Submodules are left to the loop below: by default libgit2 would also look
    # inside each one and count its changed and untracked files.
    for delta in index.diff_to_workdir(DiffOption.IGNORE_SUBMODULES).deltas:
        return True, f"{_DELTA_WORDS.get(delta.status_char(), 'modified')}: {delta.new_file.path}"
    # A submodule counts when checked out at another commit than the index
    # records (a missing one is a deletion, above); one not checked out never.
    for path in repo.listall_submodules():
        if path in index:
            head = _head_commit(os.path.join(worktree, path))
            if head is not None and head != str(index[path].id):
                return True, f"submodule at another commit: {path}"
    return False, "clean"


def _dirty(worktree: str, gitdir: str, commondir: str, commit: str, time_budget_s: float,
           max_files: int) -> Tuple[Optional[bool], str]:
    """(dirty, why): True when a tracked file differs from the index or the
    index from HEAD's tree, False when neither, None when not known."""
    try:
        import pygit2
    except ImportError:
        return None, "dirty state unknown: pygit2 is not installed (pip install pygit2 to record it)"
    why = _why_not_check(worktree, gitdir, commondir, max_files)
    if why is not None:
        return None, f"dirty state unknown: {why}"
    try:
        st = os.stat(os.path.join(gitdir, "index"))
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        stamp = (0, 0, 0)
    running = _CHECK_RUNNING
    if not running.acquire(blocking=False):
        return None, "dirty state unknown: an earlier check is still running"
    if _OVER_BUDGET.get(worktree) == stamp:
        running.release()
        return None, ("dirty state unknown: the last check ran past the time budget (`git status` "
                      "refreshes what the index knows of the files, which makes the check quick)")
    result: List[Tuple[Optional[bool], str]] = []

    def check() -> None:
        try:
            result.append(_pygit2_dirty(pygit2, worktree, commit))
        except Exception as exc:  # noqa: BLE001 - libgit2's errors, odd submodules: unknown
            result.append((None, f"dirty state unknown: {type(exc).__name__}: {exc}"))
        finally:
            running.release()

    # In a thread: libgit2 runs with the GIL released, so the job waits at most
    # the budget however large the tree or slow the disk.
    worker = threading.Thread(target=check, name="gpuscope-git-dirty", daemon=True)
    worker.start()
    worker.join(max(0.0, time_budget_s))
    if result:
        return result[0]
    _OVER_BUDGET[worktree] = stamp
    return None, f"dirty state unknown: over the time budget ({time_budget_s:g} s)"


def git_info(start_dir: "str | os.PathLike[str]", *, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
             max_files: int = DEFAULT_MAX_FILES) -> Dict[str, Any]:
    """The git state of the repository holding `start_dir`, without running
    git or anything its config names.

    Returns ``{"commit": hex id or None, "dirty": True/False/None,
    "branch": name or None, "object_format": "sha1"/"sha256"/None,
    "reason": why commit/dirty are None, or what made it dirty}``.
    ``commit`` is read here from HEAD, the refs and packed-refs; None
    outside a repository, on an unborn branch, and when HEAD or a ref is not
    as git writes it. ``dirty`` comes from pygit2 (libgit2): True when a
    tracked file differs from the index (content, symlink target,
    executable bit, type, deleted), the index from HEAD's tree (staged
    changes, unmerged paths) or a submodule is missing or at another commit;
    False when none; None when not known: pygit2 not installed, more than
    `max_files` tracked files, over `time_budget_s`, or a repository libgit2
    cannot read (a split index, a repository owned by another user and not
    in git's safe.directory, an object format it lacks). Untracked files
    never count. Never raises."""
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
        info["dirty"], info["reason"] = _dirty(worktree, gitdir, commondir, commit, time_budget_s, max_files)
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
    directory; "-dirty" appended when tracked files changed, as git_info
    says, without running git), container image, dataset id, host, user, GPUs, driver,
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
