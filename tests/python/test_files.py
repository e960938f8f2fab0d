"""gpuscope._files: the atomic writer and the capped reader, against real
symlinks, FIFOs, device nodes, full file systems and processes killed with
SIGKILL. Every path a test writes to is under its tmp_path; the only real
/dev path used is /dev/zero, and only for reading."""

import errno
import json
import os
import pathlib
import re
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc

import pytest

from gpuscope import _files as F

IS_ROOT = os.geteuid() == 0
TEMP_RE = re.compile(r"^\..*\.[0-9a-f]+\.gpuscope-tmp$")
MiB = 1 << 20


@pytest.fixture(params=["o_tmpfile", "named"])
def impl(request, monkeypatch):
    """Runs a test with the O_TMPFILE temporary file and again with the named
    (O_EXCL, random name) fallback used where O_TMPFILE is unsupported."""
    if request.param == "named":
        monkeypatch.setattr(F, "_USE_O_TMPFILE", False, raising=False)
    return request.param


@pytest.fixture
def umask():
    """Sets the process umask for the test and restores it afterwards."""
    old = os.umask(0o022)

    def set_umask(value):
        os.umask(value)

    yield set_umask
    os.umask(old)


def listing(directory):
    return sorted(os.listdir(directory))


def attempt(target, data="new"):
    """write_atomically's OSError, or None if it wrote: the tests check what
    is on disk first, then the error."""
    try:
        F.write_atomically(target, data)
    except OSError as e:
        return e
    return None


def o_tmpfile_works(directory):
    if not hasattr(os, "O_TMPFILE"):
        return False
    try:
        fd = os.open(str(directory), os.O_TMPFILE | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    return True


# A child process that loads _files.py by its path as a standalone module:
# this also proves it imports without the gpuscope package or its extension.
CHILD_PRELUDE = textwrap.dedent("""
    import importlib.util, json, os, signal, sys, time
    spec = importlib.util.spec_from_file_location("gpuscope_files_under_test", sys.argv[1])
    F = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(F)
    if sys.argv[2] == "named":
        F._USE_O_TMPFILE = False
    target = sys.argv[3]
""")


def run_child(body, impl, target, *args, timeout=60, wrapper=()):
    script = CHILD_PRELUDE + textwrap.dedent(body)
    cmd = [*wrapper, sys.executable, "-c", script, F.__file__, impl, str(target), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ basics


def test_api_shape():
    assert issubclass(F.UnsafePathError, F.FileWriteError)
    assert issubclass(F.FileWriteError, OSError)
    assert issubclass(F.UnreadableFileError, ValueError)
    assert F.TEMP_SUFFIX == ".gpuscope-tmp"


def test_writes_str_and_bytes_overwrites_and_returns_the_path(tmp_path, impl, monkeypatch):
    target = tmp_path / "out.prom"
    assert F.write_atomically(target, "héllo\n") == str(target)
    assert target.read_bytes() == "héllo\n".encode("utf-8")
    assert F.write_atomically(str(target), b"\x00\xffraw") == str(target)
    assert target.read_bytes() == b"\x00\xffraw"
    assert F.write_atomically(target, bytearray(b"again")) == str(target)
    assert target.read_bytes() == b"again"
    assert listing(tmp_path) == ["out.prom"]
    monkeypatch.chdir(tmp_path)  # a bare name: the current directory
    assert F.write_atomically("rel.json", "{}") == "rel.json"
    assert (tmp_path / "rel.json").read_text() == "{}"
    assert listing(tmp_path) == ["out.prom", "rel.json"]


def test_long_file_name_gets_a_bounded_temporary_name(tmp_path, impl):
    # The old "PATH.tmp<pid>" overflowed NAME_MAX (255 bytes) for long names.
    target = tmp_path / ("r" * 250 + ".json")
    F.write_atomically(target, "x")
    assert target.read_text() == "x"
    assert listing(tmp_path) == [target.name]


def test_data_of_another_type_is_a_type_error(tmp_path):
    with pytest.raises(TypeError, match="str or bytes"):
        F.write_atomically(tmp_path / "x", 42)
    assert listing(tmp_path) == []


# ------------------------------------------------------------------ symlinks


@pytest.mark.parametrize("target_exists", [True, False])
def test_symlinks_planted_at_temporary_names_are_never_followed(tmp_path, impl, monkeypatch, target_exists):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out"
    if target_exists:
        target.write_text("old")
    # The old writer's predictable name for this process...
    old_name = pathlib.Path(f"{target}.tmp{os.getpid()}")
    os.symlink(victim, old_name)
    # ...and the new writer's random name, made predictable here: the first
    # draw collides with a planted link, so O_EXCL / linkat must refuse it.
    planted = tmp_path / ".out.aaaa.gpuscope-tmp"
    os.symlink(victim, planted)
    tokens = iter(["aaaa"] + [f"{i:04x}" for i in range(1000)])
    monkeypatch.setattr(F, "_random_token", lambda: next(tokens), raising=False)

    F.write_atomically(target, "new")

    assert victim.read_text() == "precious"
    assert os.readlink(old_name) == str(victim)
    assert os.readlink(planted) == str(victim)
    assert not target.is_symlink() and target.read_text() == "new"
    assert listing(tmp_path) == sorted([victim.name, target.name, old_name.name, planted.name])


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_at_the_target_is_refused_and_left_alone(tmp_path, impl, dangling):
    victim = tmp_path / ("would-be-created" if dangling else "victim")
    if not dangling:
        victim.write_text("precious")
    target = tmp_path / "run.json"
    os.symlink(victim, target)
    error = attempt(target)
    assert os.readlink(target) == str(victim)
    if dangling:
        assert not victim.exists()
        assert listing(tmp_path) == ["run.json"]
    else:
        assert victim.read_text() == "precious"
        assert listing(tmp_path) == ["run.json", "victim"]
    assert isinstance(error, F.UnsafePathError), error
    message = str(error)
    assert str(target) in message
    assert "is a symbolic link" in message and "gpuscope does not write through links: pass the real path" in message


@pytest.mark.parametrize("planted", ["symlink", "directory"])
def test_target_swapped_between_the_check_and_the_rename(tmp_path, impl, monkeypatch, planted):
    """A neighbour plants something at the target while the data is written
    (here: when the file is fsynced, just before the rename). A symlink is
    replaced, never followed; a directory makes the rename fail cleanly."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out"
    real_fsync = os.fsync
    calls = []

    def fsync_and_plant(fd):
        real_fsync(fd)
        if not calls:
            if planted == "symlink":
                os.symlink(victim, target)
            else:
                os.mkdir(target)
        calls.append(fd)

    monkeypatch.setattr(os, "fsync", fsync_and_plant)
    if planted == "symlink":
        F.write_atomically(target, "new")
        assert not target.is_symlink() and target.read_text() == "new"
        assert listing(tmp_path) == ["out", "victim"]
    else:
        with pytest.raises(F.FileWriteError, match="is a directory") as info:
            F.write_atomically(target, "new")
        assert str(target) in str(info.value)
        assert target.is_dir() and listing(target) == []
        assert listing(tmp_path) == ["out", "victim"]
    assert calls, "the file was never fsynced before the rename"
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("failure", ["open-EOPNOTSUPP", "open-EISDIR", "open-EINVAL", "link-EXDEV", "link-ENOENT"])
def test_falls_back_to_a_named_temporary_file(tmp_path, monkeypatch, umask, failure):
    """Where the file system refuses O_TMPFILE (NFS: EOPNOTSUPP; kernels
    before 3.11: EISDIR) or /proc/self/fd cannot be linked, the named
    temporary file is used: same result, nothing left over."""
    if not hasattr(os, "O_TMPFILE"):
        pytest.skip("no O_TMPFILE on this system: the fallback is the only path")
    umask(0o022)
    target = tmp_path / "run.json"
    target.write_text("old")
    os.chmod(target, 0o600)
    what, name = failure.split("-")
    code = getattr(errno, name)
    real_open, real_link = os.open, os.link
    refused = []

    def open_(path, flags, *args, **kwargs):
        if what == "open" and flags & os.O_TMPFILE == os.O_TMPFILE:
            refused.append(path)
            raise OSError(code, os.strerror(code))
        return real_open(path, flags, *args, **kwargs)

    def link(src, dst, *args, **kwargs):
        if what == "link" and str(src).startswith("/proc/self/fd/"):
            refused.append(src)
            raise OSError(code, os.strerror(code))
        return real_link(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    monkeypatch.setattr(os, "link", link)
    F.write_atomically(target, "new")
    assert target.read_text() == "new"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert listing(tmp_path) == ["run.json"]
    assert refused, "O_TMPFILE was never tried"


# ------------------------------------------------------ non-regular targets


def test_fifo_target_is_refused_and_stays_a_fifo(tmp_path, impl):
    target = tmp_path / "metrics.prom"
    os.mkfifo(target)
    error = attempt(target)
    assert stat.S_ISFIFO(os.lstat(target).st_mode)
    assert listing(tmp_path) == ["metrics.prom"]
    assert isinstance(error, F.UnsafePathError), error
    assert str(error) == (f"cannot write {target}: it is a FIFO (named pipe), not a regular file; gpuscope only "
                          "replaces regular files: pass the path of a regular file or of a new one")


@pytest.mark.skipif(not IS_ROOT, reason="mknod of a device node needs root")
def test_device_target_is_refused_and_stays_a_device(tmp_path, impl):
    target = tmp_path / "full"  # a node like /dev/null, made here, never a real /dev path
    os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    error = attempt(target)
    st = os.lstat(target)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert listing(tmp_path) == ["full"]
    assert isinstance(error, F.UnsafePathError), error
    assert str(target) in str(error) and "it is a character device, not a regular file" in str(error)


def test_socket_target_is_refused(tmp_path, impl):
    target = tmp_path / "s"
    if len(os.fsencode(str(target))) >= 100:
        pytest.skip("tmp_path too long for a unix socket name")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(target))
        error = attempt(target)
        assert stat.S_ISSOCK(os.lstat(target).st_mode)
        assert listing(tmp_path) == ["s"]
        assert isinstance(error, F.UnsafePathError) and "it is a socket" in str(error), error
    finally:
        sock.close()


def test_directory_target_is_refused_and_leaves_no_temporary_file(tmp_path, impl):
    target = tmp_path / "run.json"
    target.mkdir()
    (target / "inside").write_text("kept")
    error = attempt(target)
    slash_error = attempt(str(target) + "/")
    assert listing(tmp_path) == ["run.json"]
    assert listing(target) == ["inside"] and (target / "inside").read_text() == "kept"
    for e in (error, slash_error):
        assert isinstance(e, F.UnsafePathError), e
        assert "it is a directory; pass the path of a file" in str(e)
    assert str(target) in str(error)


def test_missing_directory_is_a_clear_error(tmp_path, impl):
    target = tmp_path / "no" / "such" / "run.json"
    error = attempt(target)
    assert listing(tmp_path) == []
    assert isinstance(error, F.FileWriteError), error
    assert str(error) == f"cannot write {target}: the directory {target.parent} does not exist; create it first"


# ------------------------------------------------------------ failure paths


def partial_then(monkeypatch, exc):
    """os.write writes a first piece, then raises exc."""
    real_write = os.write
    calls = []

    def write(fd, data):
        calls.append(fd)
        if len(calls) == 1:
            return real_write(fd, bytes(memoryview(data)[:4096]))
        raise exc

    monkeypatch.setattr(os, "write", write)
    return calls


@pytest.mark.parametrize("target_exists", [True, False])
def test_disk_full_mid_write_reports_the_path_and_cleans_up(tmp_path, impl, monkeypatch, target_exists):
    target = tmp_path / "run.json"
    if target_exists:
        target.write_text("old")
    partial_then(monkeypatch, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    with pytest.raises(F.FileWriteError) as info:
        F.write_atomically(target, "x" * 100_000)
    message = str(info.value)
    assert f"cannot write {target}: No space left on device" in message
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    if target_exists:
        assert "the previous file is unchanged" in message
        assert target.read_text() == "old"
        assert listing(tmp_path) == ["run.json"]
    else:
        assert "no file was created" in message
        assert listing(tmp_path) == []


def test_keyboard_interrupt_mid_write_cleans_up_and_propagates(tmp_path, impl, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old")
    partial_then(monkeypatch, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        F.write_atomically(target, "x" * 100_000)
    assert target.read_text() == "old"
    assert listing(tmp_path) == ["run.json"]


@pytest.mark.parametrize("child_impl", ["o_tmpfile", "named"])
def test_file_size_limit_in_a_subprocess(tmp_path, child_impl):
    """RLIMIT_FSIZE (SIGXFSZ ignored) stands in for a full disk: the write
    fails with EFBIG part way through."""
    target = tmp_path / "run.json"
    target.write_text("old")
    p = run_child("""
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = int(sys.argv[4])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            F.write_atomically(target, "x" * (4 * limit))
            print(json.dumps({"ok": True}))
        except OSError as e:
            print(json.dumps({"ok": False, "type": type(e).__name__, "message": str(e), "errno": e.errno}))
    """, child_impl, target, 64 * 1024)
    assert p.returncode == 0, p.stderr
    result = json.loads(p.stdout)
    assert result["ok"] is False
    assert str(target) in result["message"] and "File too large" in result["message"], result
    assert "the previous file is unchanged" in result["message"]
    assert result["errno"] == errno.EFBIG and result["type"] == "FileWriteError"
    assert target.read_text() == "old"
    assert listing(tmp_path) == ["run.json"]


@pytest.mark.skipif(not IS_ROOT or shutil.which("unshare") is None, reason="needs root and unshare(1)")
def test_really_full_tmpfs(tmp_path):
    """A real ENOSPC: a 256 KiB tmpfs mounted in a private mount namespace
    (gone with the child). Skipped where mounting is not permitted."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    body = """
        with open(target, "w") as f:
            f.write("old")
        try:
            F.write_atomically(target, "x" * (1 << 20))
            result = {"ok": True}
        except OSError as e:
            result = {"ok": False, "message": str(e), "errno": e.errno}
        result["listing"] = sorted(os.listdir(os.path.dirname(target)))
        result["content"] = open(target).read()
        print(json.dumps(result))
    """
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                            'mount -t tmpfs -o size=256k gpuscope-test "$0" && echo mounted', str(mnt)],
                           capture_output=True, text=True, timeout=60)
    if probe.stdout.strip() != "mounted":
        pytest.skip(f"cannot mount a tmpfs in a private mount namespace here: {probe.stderr.strip()[:200]}")
    results = {}
    for child_impl in ("o_tmpfile", "named"):
        script = CHILD_PRELUDE + textwrap.dedent(body)
        shell = 'mount -t tmpfs -o size=256k gpuscope-test "$0" || exit 77; exec "$@"'
        cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", shell, str(mnt),
               sys.executable, "-c", script, F.__file__, child_impl, str(mnt / "run.json")]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        results[child_impl] = json.loads(p.stdout)
    for child_impl, result in results.items():
        assert result["ok"] is False, child_impl
        assert result["errno"] == errno.ENOSPC, result
        assert f"cannot write {mnt / 'run.json'}: No space left on device" in result["message"]
        assert result["content"] == "old" and result["listing"] == ["run.json"], result
    assert listing(mnt) == []  # the tmpfs never existed out here


KILLED_CHILD = """
    import builtins
    real_write = os.write
    def announce_and_hang():
        print("writing", flush=True)
        time.sleep(60)
    def slow_write(fd, data):  # the first piece lands, then the writer hangs
        n = real_write(fd, bytes(memoryview(data)[:65536]))
        announce_and_hang()
        return n
    os.write = slow_write
    real_open = builtins.open
    class SlowFile:  # the same for a writer that goes through open()
        def __init__(self, f): self.f = f
        def __enter__(self): return self
        def __exit__(self, *exc): self.f.close()
        def write(self, text):
            self.f.write(text[:65536]); self.f.flush(); announce_and_hang()
    def slow_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        return SlowFile(f) if "w" in mode else f
    builtins.open = slow_open
    F.write_atomically(target, "x" * (4 << 20))
    print("finished", flush=True)
"""


@pytest.mark.parametrize("child_impl", ["o_tmpfile", "named"])
def test_kill_9_mid_write_keeps_the_old_file(tmp_path, child_impl):
    if child_impl == "o_tmpfile" and not o_tmpfile_works(tmp_path):
        pytest.skip(f"O_TMPFILE is not supported on the file system of {tmp_path}")
    target = tmp_path / "run.json"
    target.write_text("old")
    script = CHILD_PRELUDE + textwrap.dedent(KILLED_CHILD)
    child = subprocess.Popen([sys.executable, "-c", script, F.__file__, child_impl, str(target)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sel = selectors.DefaultSelector()
        sel.register(child.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 30
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline:
            if sel.select(timeout=0.5):
                piece = child.stdout.read1(64)
                if not piece:
                    break
                line += piece
        sel.close()
        assert line == b"writing\n", (line, child.stderr.read1(4000) if child.poll() is not None else b"")
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert target.read_text() == "old"
    left = [name for name in listing(tmp_path) if name != "run.json"]
    if child_impl == "o_tmpfile":
        assert left == []  # the unnamed inode died with the process
    else:
        # The fallback has a named temporary file while it writes: a kill -9
        # leaves exactly that one, hidden, marked .gpuscope-tmp, never the target.
        assert len(left) == 1 and TEMP_RE.match(left[0]) and left[0].startswith(".run.json."), left


# ------------------------------------------------------------------- modes


@pytest.mark.parametrize("existing", [0o600, 0o640, 0o444])
def test_an_existing_file_keeps_its_mode(tmp_path, impl, umask, existing):
    umask(0o022)
    target = tmp_path / "secret.json"
    target.write_text("old")
    os.chmod(target, existing)
    F.write_atomically(target, "new")
    assert stat.S_IMODE(os.stat(target).st_mode) == existing
    assert target.read_text() == "new"


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_a_new_file_gets_0666_minus_the_umask(tmp_path, impl, umask, mask):
    # (The old writer got this right through open(); mode=None, passed
    # explicitly here, is new.)
    umask(mask)
    target = tmp_path / "new.json"
    F.write_atomically(target, "new", mode=None)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o666 & ~mask


def test_an_explicit_mode_always_wins(tmp_path, impl, umask):
    umask(0o000)
    fresh = tmp_path / "fresh"
    F.write_atomically(fresh, "x", mode=0o600)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o600
    existing = tmp_path / "existing"
    existing.write_text("old")
    os.chmod(existing, 0o644)
    F.write_atomically(existing, "x", mode=0o600)
    assert stat.S_IMODE(os.stat(existing).st_mode) == 0o600
    umask(0o077)  # the umask does not apply to an explicit mode
    F.write_atomically(fresh, "y", mode=0o640)
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o640
    with pytest.raises(ValueError):
        F.write_atomically(fresh, "z", mode=0o1000000)
    assert fresh.read_text() == "y"


@pytest.mark.skipif(not IS_ROOT, reason="files of another user need root")
def test_a_file_someone_else_created_first_lends_neither_owner_nor_mode(tmp_path, impl):
    # A neighbour who created the name first in a shared directory must
    # neither own nor be able to read the job's output.
    target = tmp_path / "theirs.json"
    target.write_text("old")
    os.chown(target, 4321, 4322)
    os.chmod(target, 0o666)
    F.write_atomically(target, "new", new_file_mode=0o600)
    st = os.stat(target)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o600)
    assert target.read_text() == "new"


# -------------------------------------------------------------- read_capped
# None of these can pass against the old _files.py: it had no read_capped
# (the old readers called open().read() with no type or size check).


def test_read_round_trip_and_the_exact_limit(tmp_path):
    p = tmp_path / "run.json"
    p.write_bytes(b'{"schema": "gpuscope.run"}\n')
    assert F.read_capped(p, 1024) == b'{"schema": "gpuscope.run"}\n'
    assert F.read_capped(str(p), len(p.read_bytes())) == p.read_bytes()  # exactly at the limit: fine
    with pytest.raises(F.UnreadableFileError, match=r"is 27 bytes; a gpuscope run file is at most 26 bytes"):
        F.read_capped(p, 26, what="run file")
    link = tmp_path / "link.json"
    os.symlink(p, link)  # reading through a link is harmless
    assert F.read_capped(link, 1024) == p.read_bytes()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert F.read_capped(empty, 0) == b""


def test_read_refuses_dev_zero_at_once_without_reading(tmp_path):
    tracemalloc.start()
    try:
        start = time.monotonic()
        with pytest.raises(F.UnreadableFileError) as info:
            F.read_capped("/dev/zero", 64 * MiB, what="run file")
        elapsed = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value) == ("/dev/zero: is a character device, not a regular file "
                               "(expected a gpuscope run file)")
    assert elapsed < 1.0 and peak < MiB, (elapsed, peak)


@pytest.mark.skipif(not IS_ROOT, reason="mknod of a device node needs root")
def test_read_refuses_a_device_node(tmp_path):
    node = tmp_path / "zero"
    os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # like /dev/zero
    with pytest.raises(F.UnreadableFileError, match="is a character device, not a regular file"):
        F.read_capped(node, 64 * MiB)


def read_in_thread(*args):
    """read_capped in a daemon thread, so that a hang cannot hang the test."""
    result = {}

    def target():
        start = time.monotonic()
        try:
            result["value"] = F.read_capped(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            result["error"] = e
        result["elapsed"] = time.monotonic() - start

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(timeout=5)
    return t, result


def unblock_fifo(fifo):
    try:  # a reader stuck in open() is released by a writer showing up
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def test_read_fifo_without_a_writer_fails_at_once(tmp_path):
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    t, result = read_in_thread(fifo, 64 * MiB, "run file")
    if t.is_alive():
        unblock_fifo(fifo)
    assert not t.is_alive(), "read_capped blocked on a FIFO"
    assert isinstance(result.get("error"), F.UnreadableFileError), result
    assert str(result["error"]) == f"{fifo}: is a FIFO (named pipe), not a regular file (expected a gpuscope run file)"
    assert result["elapsed"] < 1.0


def test_read_fifo_swapped_in_after_the_check_does_not_block(tmp_path, monkeypatch):
    """The name was a regular file at the stat and is a FIFO at the open:
    O_NONBLOCK keeps the open from blocking, fstat refuses it."""
    regular = tmp_path / "regular"
    regular.write_text("{}")
    fifo = tmp_path / "base.json"
    os.mkfifo(fifo)
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda p, *a, **k: real_stat(regular if str(p) == str(fifo) else p, *a, **k))
    t, result = read_in_thread(fifo, 64 * MiB)
    if t.is_alive():
        unblock_fifo(fifo)
    monkeypatch.undo()
    assert not t.is_alive(), "read_capped blocked on a FIFO"
    assert isinstance(result.get("error"), F.UnreadableFileError), result
    assert "is a FIFO (named pipe), not a regular file" in str(result["error"])
    assert result["elapsed"] < 1.0


def test_read_refuses_a_huge_sparse_file_without_reading_it(tmp_path):
    big = tmp_path / "huge.json"
    big.write_bytes(b"{")
    os.truncate(big, 1 << 30)  # sparse: 1 GiB that takes no disk
    tracemalloc.start()
    try:
        start = time.monotonic()
        with pytest.raises(F.UnreadableFileError) as info:
            F.read_capped(big, 64 * MiB, what="run file")
        elapsed = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(info.value) == f"{big}: is 1 GiB; a gpuscope run file is at most 64 MiB: is this the right file?"
    assert elapsed < 0.5 and peak < MiB, (elapsed, peak)


def test_read_refuses_a_file_that_grows_while_read(tmp_path, monkeypatch):
    p = tmp_path / "growing.json"
    p.write_bytes(b"x" * (3 * MiB))
    real_stat, real_fstat = os.stat, os.fstat

    def small(st):  # as if the file had been 10 bytes when checked
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, 10,
                               st.st_atime, st.st_mtime, st.st_ctime))

    monkeypatch.setattr(os, "stat", lambda *a, **k: small(real_stat(*a, **k)))
    monkeypatch.setattr(os, "fstat", lambda *a, **k: small(real_fstat(*a, **k)))
    with pytest.raises(F.UnreadableFileError, match=r"grew past 1 MiB while being read"):
        F.read_capped(p, MiB)


def test_read_directory_missing_and_denied_files(tmp_path, monkeypatch):
    with pytest.raises(F.UnreadableFileError) as info:
        F.read_capped(tmp_path, MiB, "run file")
    assert str(info.value) == f"{tmp_path}: is a directory, not a regular file (expected a gpuscope run file)"
    missing = tmp_path / "missing.json"
    with pytest.raises(F.UnreadableFileError) as info:
        F.read_capped(missing, MiB)
    assert str(info.value) == f"{missing}: no such file"
    assert info.value.errno == errno.ENOENT
    p = tmp_path / "locked.json"
    p.write_text("{}")

    def denied(*args, **kwargs):  # root reads anything: simulate the EACCES
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(p))

    monkeypatch.setattr(os, "open", denied)
    with pytest.raises(F.UnreadableFileError) as info:
        F.read_capped(p, MiB)
    assert str(info.value) == f"{p}: permission denied"
