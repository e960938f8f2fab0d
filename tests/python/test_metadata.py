"""Run-file metadata (gpuscope._metadata): the git commit is read from the
repository's files and the dirty flag comes from pygit2 (libgit2), without
running git or anything its config names (without pygit2 the flag is
unknown, None); secrets in the command line, environment, dataset, container
image and `extra` are redacted; every string is valid UTF-8.

The repositories are built with the git CLI (skipped without it). Each one
has a live hostile `core.fsmonitor` (what `git status`, as run by the old
code, executes): the tests' own git commands override it on their command
line, and after every git_info call its marker file must not exist. The
tests of what counts as dirty need pygit2 (skipped without it); the others
expect None where pygit2 is missing."""

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from gpuscope import _metadata as md

try:
    import pygit2
except ImportError:
    pygit2 = None

GIT = shutil.which("git")
needs_git = pytest.mark.skipif(GIT is None, reason="needs the git CLI")
needs_pygit2 = pytest.mark.skipif(pygit2 is None, reason="needs pygit2 (pip install pygit2==1.21.0)")
# What git_info says of a clean and a changed tree: unknown without pygit2.
CLEAN, CHANGED = (False, True) if pygit2 is not None else (None, None)
R = md.REDACTED

HF = "hf_" + "aB3" * 12                       # 36 alphanumerics after hf_
OPENAI = "sk-proj-" + "Zx9_" * 8
GITHUB = "ghp_" + "a1B2" * 9
AWS = "AKIAIOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU"


# ---------------------------------------------------------------------------
# Repositories built with the git CLI
# ---------------------------------------------------------------------------

class Repo:
    def __init__(self, path, home, object_format=None):
        self.path = str(path)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        self.env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
                        GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
        self.marker = None
        os.makedirs(self.path, exist_ok=True)
        fmt = [f"--object-format={object_format}"] if object_format else []
        self.git("init", "-q", *fmt)
        self.git("symbolic-ref", "HEAD", "refs/heads/main")

    def plant_fsmonitor(self, where):
        """A hostile core.fsmonitor: any git status in this repo runs it."""
        self.marker = os.path.join(str(where), "fsmonitor-ran")
        script = os.path.join(str(where), "fsmonitor.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\ntouch '{self.marker}'\n")
        os.chmod(script, 0o755)
        self.git("config", "core.fsmonitor", script)

    def git(self, *args, cwd=None):
        # the tests' own git commands never run the planted fsmonitor
        out = subprocess.run([GIT, "-c", "core.fsmonitor=false", *args], cwd=cwd or self.path, env=self.env,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
        return out.stdout.strip()

    def p(self, *parts):
        return os.path.join(self.path, *parts)

    def write(self, rel, text):
        os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
        with open(self.p(rel), "w") as f:
            f.write(text)

    def commit(self, message="c"):
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self, cwd=None):
        return self.git("rev-parse", "HEAD", cwd=cwd)

    def info(self, where=None, **kw):
        result = md.git_info(where or self.path, **kw)
        assert self.marker is None or not os.path.exists(self.marker), "a command named by the repository ran"
        return result


def _populate(r):
    r.write("a.txt", "alpha\n")
    r.write("sub/dir/b.txt", "beta\n")
    r.write("sub/c.txt", "gamma\n")
    r.write("run.sh", "#!/bin/sh\necho hi\n")
    os.chmod(r.p("run.sh"), 0o755)
    os.symlink("a.txt", r.p("link"))
    return r.commit("first")


def _later(path, seconds=10):
    """Moves a file's mtime (stat data differs, content does not)."""
    st = os.lstat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000), follow_symlinks=False)


@pytest.fixture
def repo(tmp_path):
    if GIT is None:
        pytest.skip("needs the git CLI")
    r = Repo(tmp_path / "repo", tmp_path)
    r.first = _populate(r)
    r.plant_fsmonitor(tmp_path)
    return r


def _index_version(r):
    with open(r.p(".git", "index"), "rb") as f:
        head = f.read(8)
    assert head[:4] == b"DIRC"
    return int.from_bytes(head[4:8], "big")


def _wait_for_the_check_to_end(limit=10.0):
    """A check that ran past its budget goes on in the background; later
    tests need it gone (until then every check says "still running")."""
    deadline = time.monotonic() + limit
    while md._CHECK_RUNNING.locked():
        assert time.monotonic() < deadline, "the background check never ended"
        time.sleep(0.01)


# ---------------------------------------------------------------------------
# Nothing from the repository runs
# ---------------------------------------------------------------------------

@needs_git
def test_hostile_repository_config_runs_nothing(tmp_path):
    r = Repo(tmp_path / "repo", tmp_path)
    r.write(".gitattributes", "* filter=evil\n")
    expected = _populate(r)                      # committed before anything hostile exists
    marks = [str(tmp_path / "fsmonitor-ran"), str(tmp_path / "filter-ran")]
    script = tmp_path / "fsmonitor.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marks[0]}'\n")
    script.chmod(0o755)
    r.git("config", "core.fsmonitor", str(script))
    r.git("config", "filter.evil.clean", f"sh -c 'touch {marks[1]}; cat'")
    r.git("config", "filter.evil.smudge", f"sh -c 'touch {marks[1]}; cat'")
    r.git("config", "filter.evil.required", "true")
    hook = r.p(".git", "hooks", "post-checkout")
    with open(hook, "w") as f:
        f.write(f"#!/bin/sh\ntouch '{marks[0]}'\n")
    os.chmod(hook, 0o755)

    def ran():
        return [os.path.basename(m) for m in marks if os.path.exists(m)]

    info = r.info()
    assert ran() == []
    assert (info["commit"], info["dirty"]) == (expected, CLEAN)
    meta = md.run_metadata(cwd=r.path)
    assert ran() == []
    assert (meta["git_commit"], meta["git_dirty"]) == (expected, CLEAN)
    _later(r.p("a.txt"))                         # stat differs: hashed, the filter not run, still clean
    assert r.info()["dirty"] is CLEAN
    r.write("a.txt", "ALPHA\n")                  # same size, other content
    _later(r.p("a.txt"))
    info = r.info()
    assert (info["commit"], info["dirty"]) == (expected, CHANGED)
    meta = md.run_metadata(cwd=r.path)
    assert ran() == []
    assert (meta["git_commit"], meta["git_dirty"]) == (expected + ("-dirty" if CHANGED else ""), CHANGED)

    # The config is live: what the old code ran (git status) runs it.
    subprocess.run([GIT, "status", "--porcelain", "--untracked-files=no"], cwd=r.path, env=r.env,
                   capture_output=True, timeout=30)
    assert ran() != []


# ---------------------------------------------------------------------------
# Commit and dirty state
# ---------------------------------------------------------------------------

def test_commit_and_branch_from_a_subdirectory(repo):
    info = repo.info(repo.p("sub", "dir"))
    assert info["commit"] == repo.first and len(info["commit"]) == 40
    assert (info["branch"], info["object_format"], info["dirty"]) == ("main", "sha1", CLEAN)


def test_dirty_is_unknown_without_pygit2(repo, monkeypatch):
    monkeypatch.setitem(sys.modules, "pygit2", None)             # `import pygit2` raises ImportError
    repo.write("a.txt", "changed\n")
    info = repo.info()
    assert (info["commit"], info["branch"], info["dirty"]) == (repo.first, "main", None)
    assert "pygit2 is not installed" in info["reason"]
    meta = md.run_metadata(cwd=repo.path)
    assert (meta["git_commit"], meta["git_dirty"]) == (repo.first, None)   # no "-dirty": not known


@needs_pygit2
def test_worktree_changes(repo):
    assert repo.info()["dirty"] is False
    for rel in ("a.txt", "sub/dir/b.txt", "run.sh", "link"):
        _later(repo.p(*rel.split("/")))              # touched, not changed
    assert repo.info()["dirty"] is False

    repo.write("sub/dir/b.txt", "BETA\n")             # same size
    assert repo.info()["dirty"] is True
    repo.write("sub/dir/b.txt", "beta\n")             # back: stat differs, content equal
    assert repo.info()["dirty"] is False

    os.chmod(repo.p("run.sh"), 0o644)                 # executable bit
    assert repo.info()["dirty"] is True
    os.chmod(repo.p("run.sh"), 0o755)
    assert repo.info()["dirty"] is False

    os.remove(repo.p("link"))                          # symlink retargeted
    os.symlink("sub/c.txt", repo.p("link"))
    assert repo.info()["dirty"] is True
    os.remove(repo.p("link"))
    os.symlink("a.txt", repo.p("link"))
    assert repo.info()["dirty"] is False

    os.remove(repo.p("sub", "c.txt"))                  # deleted
    assert repo.info()["dirty"] is True
    os.mkdir(repo.p("sub", "c.txt"))                   # a directory where a file was
    assert repo.info()["dirty"] is True
    os.rmdir(repo.p("sub", "c.txt"))
    repo.write("sub/c.txt", "gamma\n")
    assert repo.info()["dirty"] is False

    os.rename(repo.p("sub", "dir"), repo.p("elsewhere"))   # a file below a symlink counts as deleted
    os.symlink(repo.p("elsewhere"), repo.p("sub", "dir"))
    assert repo.info()["dirty"] is True
    os.remove(repo.p("sub", "dir"))
    os.rename(repo.p("elsewhere"), repo.p("sub", "dir"))
    assert repo.info()["dirty"] is False

    repo.write("untracked.txt", "x\n")                 # untracked files never count
    assert repo.info()["dirty"] is False


@needs_pygit2
def test_staged_changes_count(repo):
    repo.write("a.txt", "staged\n")
    repo.git("add", "a.txt")
    info = repo.info()
    assert info["dirty"] is True and "staged" in info["reason"]   # worktree == index != HEAD
    repo.write("a.txt", "alpha\n")
    repo.git("add", "a.txt")                                      # staged back: cache-tree invalid, recomputed
    assert repo.info()["dirty"] is False

    repo.write("new.txt", "n\n")
    repo.git("add", "new.txt")
    assert repo.info()["dirty"] is True
    repo.git("rm", "-q", "--cached", "new.txt")
    assert repo.info()["dirty"] is False

    repo.git("rm", "-q", "--cached", "sub/c.txt")                 # staged deletion, file still there
    assert repo.info()["dirty"] is True
    repo.git("add", "sub/c.txt")
    assert repo.info()["dirty"] is False

    repo.git("add", "-N", "new.txt")                              # intent to add
    assert repo.info()["dirty"] is True
    repo.git("rm", "-q", "--cached", "new.txt")
    assert repo.info()["dirty"] is False


@needs_pygit2
def test_unmerged_paths_count(repo):
    repo.git("checkout", "-q", "-b", "other")
    repo.write("a.txt", "other\n")
    repo.commit("other")
    repo.git("checkout", "-q", "main")
    repo.write("a.txt", "main\n")
    head = repo.commit("main")
    out = subprocess.run([GIT, "-c", "core.fsmonitor=false", "merge", "-q", "other"], cwd=repo.path, env=repo.env,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0                                    # a conflict: a.txt unmerged
    info = repo.info()
    assert (info["commit"], info["dirty"]) == (head, True) and "unmerged" in info["reason"]
    repo.git("merge", "--abort")
    assert repo.info()["dirty"] is False


@needs_pygit2
def test_skip_worktree_and_assume_unchanged_entries_are_not_compared(repo):
    repo.git("update-index", "--skip-worktree", "a.txt")
    repo.git("update-index", "--assume-unchanged", "sub/c.txt")
    repo.write("a.txt", "changed but skipped\n")
    repo.write("sub/c.txt", "changed but assumed unchanged\n")
    assert repo.info()["dirty"] is False                          # as `git status` says
    repo.write("sub/dir/b.txt", "changed\n")
    assert repo.info()["dirty"] is True


@needs_pygit2
def test_submodule_at_another_commit(repo, tmp_path):
    inner = Repo(repo.p("mod"), tmp_path)          # a nested repository, recorded as a gitlink
    inner.write("x.txt", "x\n")
    recorded = inner.commit("inner")
    repo.git("add", "mod")
    repo.commit("gitlink")
    assert repo.info()["dirty"] is False
    inner.write("x.txt", "y\n")
    moved = inner.commit("moved")
    assert repo.info()["dirty"] is True              # `git status`: " M mod" (new commits)
    inner.git("checkout", "-q", recorded)
    assert repo.info()["dirty"] is False
    inner.git("checkout", "-q", moved)
    repo.git("add", "mod")                           # the new commit staged in the superproject
    assert repo.info()["dirty"] is True
    repo.commit("bump")
    assert repo.info()["dirty"] is False
    os.rename(repo.p("mod"), repo.p("mod.moved"))       # gone: `git status` says " D mod"
    assert repo.info()["dirty"] is True
    os.mkdir(repo.p("mod"))                              # an empty directory: not checked out, unchanged
    assert repo.info()["dirty"] is False
    os.rmdir(repo.p("mod"))
    os.rename(repo.p("mod.moved"), repo.p("mod"))
    inner.write("x.txt", "changed inside\n")             # inside a submodule: not looked at
    inner.write("untracked.txt", "u\n")
    assert repo.info()["dirty"] is False


def test_packed_refs_annotated_tags_and_detached_head(repo):
    repo.git("tag", "-a", "-m", "v1", "v1")
    repo.write("a.txt", "second\n")
    second = repo.commit("second")
    repo.git("pack-refs", "--all")
    assert not os.path.exists(repo.p(".git", "refs", "heads", "main"))
    with open(repo.p(".git", "packed-refs")) as f:
        assert any(line.startswith("^") for line in f)             # a peel line to skip
    info = repo.info()
    assert (info["commit"], info["branch"], info["dirty"]) == (second, "main", CLEAN)

    repo.git("checkout", "-q", "--detach", repo.first)
    info = repo.info()
    assert (info["commit"], info["branch"], info["dirty"]) == (repo.first, None, CLEAN)
    repo.git("checkout", "-q", "main")
    assert repo.info()["commit"] == second


def test_linked_worktree(repo):
    wt = os.path.join(os.path.dirname(repo.path), "wt")
    repo.git("worktree", "add", "-q", "-b", "feature", wt)
    repo.write("a.txt", "main moves on\n")
    main_head = repo.commit("main")
    with open(os.path.join(wt, "sub", "c.txt"), "w") as f:
        f.write("feature\n")
    repo.git("add", "-A", cwd=wt)
    repo.git("commit", "-q", "-m", "feature", cwd=wt)
    feature_head = repo.head(cwd=wt)

    info = repo.info(os.path.join(wt, "sub"))
    assert (info["commit"], info["branch"], info["dirty"]) == (feature_head, "feature", CLEAN)
    assert repo.info()["commit"] == main_head
    with open(os.path.join(wt, "a.txt"), "w") as f:
        f.write("dirty in the worktree\n")
    assert repo.info(wt)["dirty"] is CHANGED
    assert repo.info()["dirty"] is CLEAN                  # each worktree has its own index


@needs_pygit2
def test_index_version_4(repo):
    for i in range(20):
        repo.write(f"deep/dir{i % 3}/nested/file{i:02d}.txt", f"{i}\n")
    head = repo.commit("many")
    repo.git("update-index", "--index-version", "4")
    assert _index_version(repo) == 4
    info = repo.info()
    assert (info["commit"], info["dirty"]) == (head, False)
    for i in range(20):
        _later(repo.p("deep", f"dir{i % 3}", "nested", f"file{i:02d}.txt"))
    assert repo.info()["dirty"] is False                  # every path decoded right, every blob matches
    repo.write("deep/dir2/nested/file17.txt", "changed\n")
    assert repo.info()["dirty"] is True


def test_packed_objects_and_refs(repo):
    # Everything packed, nothing loose: the commit comes from packed-refs, the
    # dirty state from the packed objects.
    repo.git("commit", "-q", "--allow-empty", "-m", "second")
    head = repo.head()
    repo.git("repack", "-adq")
    repo.git("prune-packed")
    repo.git("pack-refs", "--all")
    assert not os.path.exists(repo.p(".git", "objects", head[:2], head[2:]))
    assert not os.path.exists(repo.p(".git", "refs", "heads", "main"))
    info = repo.info()
    assert (info["commit"], info["dirty"]) == (head, CLEAN), info["reason"]
    repo.write("a.txt", "staged\n")
    repo.git("add", "a.txt")
    assert repo.info()["dirty"] is CHANGED


def test_sha256_repository(tmp_path):
    if GIT is None:
        pytest.skip("needs the git CLI")
    try:
        r = Repo(tmp_path / "repo", tmp_path, object_format="sha256")
    except AssertionError:
        pytest.skip("this git cannot make sha256 repositories")
    head = _populate(r)
    r.plant_fsmonitor(tmp_path)
    info = r.info()
    assert (info["commit"], info["object_format"]) == (head, "sha256") and len(head) == 64
    if info["dirty"] is None:
        # pygit2's wheels build libgit2 without SHA-256 repositories: the
        # commit is still read, the dirty state is unknown and says why.
        assert pygit2 is None or "sha256" in info["reason"], info["reason"]
    else:
        assert info["dirty"] is False
        _later(r.p("a.txt"))
        assert r.info()["dirty"] is False
        r.write("a.txt", "changed\n")
        assert r.info()["dirty"] is True
        r.write("a.txt", "alpha\n")
    r.git("repack", "-adq")
    r.git("pack-refs", "--all")
    info = r.info()
    assert (info["commit"], info["object_format"]) == (head, "sha256"), info["reason"]


@needs_pygit2
def test_split_index_and_too_many_files_give_unknown(repo):
    assert repo.info(max_files=5)["dirty"] is False                # a.txt, b.txt, c.txt, run.sh, link
    info = repo.info(max_files=4)
    assert (info["commit"], info["dirty"]) == (repo.first, None)
    assert "more than 4 tracked files" in info["reason"]
    repo.git("update-index", "--split-index")                       # libgit2 does not read split indexes
    info = repo.info()
    assert (info["commit"], info["dirty"]) == (repo.first, None)


@needs_pygit2
def test_a_check_that_blocks_is_cut_at_the_time_budget(repo):
    # libgit2 reads sub/.gitattributes when it hashes sub/c.txt (touched): a
    # FIFO there blocks it, as it would block git. The job waits the budget,
    # no more; the check goes on in the background, and meanwhile later checks
    # say so at once instead of starting another.
    fifo = repo.p("sub", ".gitattributes")
    os.mkfifo(fifo)
    _later(repo.p("sub", "c.txt"))
    try:
        start = time.monotonic()
        info = repo.info(time_budget_s=0.5)
        assert 0.5 <= time.monotonic() - start < 3.0
        assert (info["commit"], info["dirty"]) == (repo.first, None)
        assert "over the time budget (0.5 s)" in info["reason"]
        info, took = _in_thread(lambda: repo.info())
        assert took < 1.0 and info["dirty"] is None and "still running" in info["reason"]
    finally:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)          # the blocked reader gets end of file
        os.close(fd)
        os.remove(fifo)
        _wait_for_the_check_to_end()
    # Not started again while the index is as it was (the tree would be
    # hashed again in the background); once git refreshed it, checked.
    info, took = _in_thread(lambda: repo.info())
    assert took < 1.0 and info["dirty"] is None and "ran past the time budget" in info["reason"]
    repo.git("update-index", "-q", "--refresh")
    assert repo.info()["dirty"] is False


@needs_pygit2
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give the repo away")
def test_a_repository_owned_by_another_user_gives_unknown(repo):
    # libgit2 refuses it (as git does) unless git's safe.directory lists it;
    # the commit is read all the same.
    for root, dirs, files in os.walk(repo.path):
        for name in dirs + files + ["."]:
            os.chown(os.path.join(root, name), 65534, 65534, follow_symlinks=False)
    info = repo.info()
    assert (info["commit"], info["dirty"]) == (repo.first, None)
    assert "not owned by current user" in info["reason"], info["reason"]


# ---------------------------------------------------------------------------
# Odd repositories: None, quickly, never an exception
# ---------------------------------------------------------------------------

def _in_thread(fn, limit=5.0):
    box = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    start = time.monotonic()
    t.start()
    t.join(limit)
    assert box, "git_info hung"
    return box[0], time.monotonic() - start


@pytest.mark.parametrize("name", ["HEAD", "index", "packed-refs", "refs/heads/main", "config",
                                  "info/exclude", "../.gitattributes"])
def test_fifo_in_git_dir_does_not_hang(repo, name):
    if name == "packed-refs":
        repo.git("pack-refs", "--all")
    path = os.path.normpath(repo.p(".git", *name.split("/")))
    if os.path.exists(path):
        os.remove(path)
    os.mkfifo(path)
    info, took = _in_thread(lambda: repo.info())
    assert took < 1.0                                    # not even the time budget: refused before
    if name in ("HEAD", "packed-refs", "refs/heads/main"):
        assert (info["commit"], info["dirty"]) == (None, None)
    else:
        assert (info["commit"], info["dirty"]) == (repo.first, None)
        assert pygit2 is None or "not a regular file" in info["reason"], info["reason"]
    assert not md._CHECK_RUNNING.locked()


def test_symlink_loops_and_huge_files_give_unknown(repo):
    os.remove(repo.p(".git", "index"))
    os.symlink("index", repo.p(".git", "index"))          # a loop
    info, took = _in_thread(lambda: repo.info())
    assert took < 1.0 and (info["commit"], info["dirty"]) == (repo.first, None)
    os.remove(repo.p(".git", "index"))
    repo.git("read-tree", "HEAD")                          # an index again
    with open(repo.p(".git", "config"), "ab") as f:        # 17 MiB of config, sparse
        f.truncate(17 << 20)
    info, took = _in_thread(lambda: repo.info())
    assert took < 1.0 and (info["commit"], info["dirty"]) == (repo.first, None)
    assert pygit2 is None or "over 16 MiB" in info["reason"], info["reason"]


def test_not_a_repository(tmp_path):
    d = tmp_path / "plain" / "dir"
    d.mkdir(parents=True)
    if GIT is not None and subprocess.run([GIT, "rev-parse", "--git-dir"], cwd=d, capture_output=True).returncode == 0:
        pytest.skip("the temporary directory is inside a git repository")
    assert md.git_info(str(d)) == {"commit": None, "dirty": None, "branch": None, "object_format": None,
                                   "reason": "not a git repository"}
    assert md.git_info(str(tmp_path / "missing"))["commit"] is None
    meta = md.run_metadata(cwd=str(d))
    assert (meta["git_commit"], meta["git_dirty"]) == (None, None)


def test_odd_git_files(repo, tmp_path):
    with open(repo.p(".git", "index"), "wb") as f:                 # corrupt index: commit, dirty unknown
        f.write(b"DIRC\x00\x00\x00\x02\x00\x00\x00\x05garbage")
    assert (repo.info()["commit"], repo.info()["dirty"]) == (repo.first, None)

    for head in (b"ref: ../../../../etc/passwd\n", b"ref: refs/heads/../../config\n", b"ref: refs/heads/.x\n",
                 b"not a sha\n", b"ref: refs/heads/missing\n", b"0" * (2 << 20)):
        with open(repo.p(".git", "HEAD"), "wb") as f:
            f.write(head)
        assert repo.info()["commit"] is None, head[:40]

    other = tmp_path / "gitfile"
    other.mkdir()
    (other / ".git").write_text("gitdir: /nonexistent/repo\n")
    assert md.git_info(str(other))["commit"] is None
    (other / ".git").write_text("something else\n")
    assert md.git_info(str(other))["commit"] is None

    unborn = Repo(tmp_path / "unborn", tmp_path)
    assert md.git_info(unborn.path)["commit"] is None


# ---------------------------------------------------------------------------
# Redaction
# ---------------------------------------------------------------------------

REDACTED_ARGV = [
    (["train.py", "--hf-token", HF, "--lr", "0.1"], ["train.py", "--hf-token", R, "--lr", "0.1"]),
    (["--hf_token=abc"], [f"--hf_token={R}"]),
    (["--token", "abc"], ["--token", R]),
    (["-token", "abc"], ["-token", R]),
    (["--api-key", "abc"], ["--api-key", R]),
    (["--wandb_key", "abc"], ["--wandb_key", R]),
    (["--access_key=abc"], [f"--access_key={R}"]),
    (["--aws.secret", "abc"], ["--aws.secret", R]),
    (["--password", "hunter2"], ["--password", R]),
    (["--db-passwd=hunter2"], [f"--db-passwd={R}"]),
    (["--pwd", "hunter2"], ["--pwd", R]),
    (["--pass", "hunter2"], ["--pass", R]),
    (["--credentials", "c.json"], ["--credentials", R]),
    (["--auth", "u:p"], ["--auth", R]),
    (["--cookie", "session=1"], ["--cookie", R]),
    (["--apikey", "abc"], ["--apikey", R]),
    (["--apiKey", "abc"], ["--apiKey", R]),
    (["--hfToken", "abc"], ["--hfToken", R]),
    (["--private-key", "k.pem"], ["--private-key", R]),
    (["wandb.api_key=abc", "trainer.hf_token=xyz", "+db.password=pw", "HF_TOKEN=abc"],
     [f"wandb.api_key={R}", f"trainer.hf_token={R}", f"+db.password={R}", f"HF_TOKEN={R}"]),
    (["--note", HF], ["--note", R]),
    (["--openai", OPENAI, GITHUB, AWS], ["--openai", R, R, R]),
    (["github_pat_11ABCDEFG0123456789_abcdefghijklmnop"], [R]),
    (["xoxb-123456789012-abcdefABCDEF"], [R]),
    (["--jwt-file", "x", JWT], ["--jwt-file", "x", R]),
    (["--header", "Authorization: Bearer abc.def-ghi_jkl"], ["--header", f"Authorization: Bearer {R}"]),
    (["--header=X-Api-Key: abc123"], [f"--header=X-Api-Key: {R}"]),
    (["--header", "Cookie: sid=abc; other=1"], ["--header", f"Cookie: {R}"]),
    (["--refresh-token", "abc", "--password-hash", "x"], ["--refresh-token", R, "--password-hash", R]),
    (["--data", "https://user:pw@host.example.com/x"], ["--data", f"https://user:{R}@host.example.com/x"]),
    (["--url=https://host/x?token=abc&page=2"], [f"--url=https://host/x?token={R}&page=2"]),
    (["s3://bucket/k?X-Amz-Credential=AB%2F1&X-Amz-Signature=ff00&x=1"],
     [f"s3://bucket/k?X-Amz-Credential={R}&X-Amz-Signature={R}&x=1"]),
    (["--overrides=optim.lr=0.1,wandb.api_key=abc"], [f"--overrides=optim.lr=0.1,wandb.api_key={R}"]),
    (["-c", "python train.py --hf-token abc --lr 1"], ["-c", f"python train.py --hf-token {R} --lr 1"]),
    (["--config", '{"api_key": "abc", "lr": 0.1}'], ["--config", f'{{"api_key": "{R}", "lr": 0.1}}']),
]

KEPT_ARGV = [
    ["--max-tokens", "512"], ["--tokenizer", "gpt2"], ["--num-tokens", "100"], ["--max_new_tokens=64"],
    ["--tokens-per-batch", "4096"], ["--pad-token-id", "0"], ["--eos_token_id=2"], ["--special-tokens", "x"],
    ["--lr", "3e-4"], ["--learning-rate=0.001"], ["--data", "/data/imagenet"], ["--output-dir", "/tmp/out"],
    ["--keys", "a,b"], ["--key-size", "2048"], ["--monkey", "x"], ["--sort-key", "name"], ["--passes", "3"],
    ["--bypass", "1"], ["--author", "me"], ["--hf-repo", "org/model"], ["-1"], ["model.hidden=1024"],
    ["--commit", "2689e753c9e88d0b8644a53f374eee2654eed144"], ["https://host/path?page=2"],
    ["git@github.com:org/repo.git"], ["--token"], ["--use-auth", "--lr", "0.1"], ["skip-token"],
    ["--text-key", "caption"], ["--seed=0", "--batch-size", "32"], ["--auth_type", "none"],
    ["--hf-token-path", "/run/secrets/hf"], ["--password-file=pw.txt"], ["--token-env", "HF_TOKEN"],
    ["--note", "key: value"], ["--eos-token", "</s>"],
]


@pytest.mark.parametrize("argv,expected", REDACTED_ARGV)
def test_redact_argv_redacts(argv, expected):
    assert md.redact_argv(argv) == expected


@pytest.mark.parametrize("argv", KEPT_ARGV)
def test_redact_argv_keeps(argv):
    # each case also carries a secret, redacted after what must be kept
    assert md.redact_argv(argv + ["--token", "abc"]) == argv + ["--token", R]


def test_redaction_takes_linear_time_on_hostile_text():
    # in a child process: a regex that backtracks holds the GIL, no thread could time it out
    code = (
        "import importlib.util, sys, time\n"
        "spec = importlib.util.spec_from_file_location('m', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "hostile = ['\"token\": \"' + 'a\\\\' * 50000, 'a' * 200000, 'x-y.z_' * 40000, 'a:' * 100000,\n"
        "           'a=' * 100000, 'https://a:' + 'b' * 200000, 'eyJ' + 'a' * 200000 + '.eyJ', '\"' * 200000]\n"
        "start = time.monotonic()\n"
        "assert m.redact_argv(hostile + ['--token', 'abc'])[-1] == m.REDACTED\n"
        "print(time.monotonic() - start)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code, md.__file__], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("redaction backtracks: 1.5 MB of hostile text took over 20 s")
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 5.0


def test_redact_mapping():
    d = {"api_key": "abc", "lr": 0.1, "use_auth": True, "token": None, "steps": [1, 2],
         "nested": {"password": "x", "url": "https://u:p@h/data", "deeper": {"HF_TOKEN": 5}},
         "argv": ["--token", "t", "--lr", "1"], "note": f"with {HF} inside", "max_tokens": 4096}
    assert md.redact_mapping(d) == {
        "api_key": R, "lr": 0.1, "use_auth": True, "token": None, "steps": [1, 2],
        "nested": {"password": R, "url": f"https://u:{R}@h/data", "deeper": {"HF_TOKEN": R}},
        "argv": ["--token", R, "--lr", "1"], "note": f"with {R} inside", "max_tokens": 4096}
    assert d["api_key"] == "abc"                                          # a copy


def test_environment_is_allowlisted_and_redacted(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.setenv("WORLD_SIZE", "16")
    monkeypatch.setenv("NCCL_SECRET_TOKEN", "abc")                   # allowlisted prefix, secret name
    monkeypatch.setenv("TORCH_HUB_TOKEN", "abc")
    monkeypatch.setenv("GPUSCOPE_CONTAINER_IMAGE", "docker://bot:pw@registry.example.com/img:1")
    monkeypatch.setenv("NCCL_NOTE", HF)                               # secret-looking value
    for name in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "MY_APP_SETTING"):
        monkeypatch.setenv(name, "should-not-appear")
    env = md.environment()
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1" and env["NCCL_DEBUG"] == "INFO" and env["WORLD_SIZE"] == "16"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and env["OMP_NUM_THREADS"] == "8"
    assert env["NCCL_SECRET_TOKEN"] == R and env["TORCH_HUB_TOKEN"] == R and env["NCCL_NOTE"] == R
    assert env["GPUSCOPE_CONTAINER_IMAGE"] == f"docker://bot:{R}@registry.example.com/img:1"
    for name in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "MY_APP_SETTING", "PATH", "HOME"):
        assert name not in env
    assert "should-not-appear" not in json.dumps(env) and HF not in json.dumps(env)
    assert md.environment({"RANK": "3", "PATH": "/bin"}) == {"RANK": "3"}


# ---------------------------------------------------------------------------
# run_metadata
# ---------------------------------------------------------------------------

def test_run_metadata_keeps_no_secret(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["train.py", "--hf-token", HF, "--lr", "0.1", "wandb.api_key=abc123",
                                      "--data=https://me:s3cr3t@data.example.com/set"])
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.setenv("HF_TOKEN", "hf-env-secret")
    monkeypatch.setenv("GPUSCOPE_CONTAINER_IMAGE", "https://bot:imgpw@registry.example.com/img:1")
    meta = md.run_metadata("https://u:datapw@example.com/imagenet", {"wandb_api_key": "k3y", "seed": 1},
                           cwd=str(tmp_path))
    assert meta["command"] == ["train.py", "--hf-token", R, "--lr", "0.1", f"wandb.api_key={R}",
                               f"--data=https://me:{R}@data.example.com/set"]
    assert meta["container_image"] == f"https://bot:{R}@registry.example.com/img:1"
    assert meta["dataset"] == f"https://u:{R}@example.com/imagenet"
    assert meta["extra"] == {"wandb_api_key": R, "seed": 1}
    assert meta["environment"]["NCCL_DEBUG"] == "WARN" and "HF_TOKEN" not in meta["environment"]
    text = json.dumps(meta)
    for secret in (HF, "abc123", "s3cr3t", "hf-env-secret", "imgpw", "datapw", "k3y"):
        assert secret not in text
    old_keys = {"created", "command", "cwd", "git_commit", "container_image", "dataset", "host", "user", "gpus",
                "driver_version", "cuda_driver_version", "libraries", "extra"}
    assert set(meta) == old_keys | {"git_dirty", "environment"}
    assert meta["cwd"] == str(tmp_path) and meta["libraries"]["python"]


def test_run_metadata_is_valid_utf8(monkeypatch, tmp_path):
    bad = os.fsdecode(b"imag\xe9net")
    assert bad == "imag\udce9net"
    monkeypatch.setattr(sys, "argv", ["train.py", "--data", os.fsdecode(b"/d/\xff\xfe")])
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", os.fsdecode(b"eth\xe90"))
    meta = md.run_metadata(dataset=bad, extra={"lone": "\ud800", bad: "key too"}, cwd=str(tmp_path))
    assert meta["dataset"] == "imag\\xe9net"
    assert meta["command"][2] == "/d/\\xff\\xfe"
    assert meta["environment"]["NCCL_SOCKET_IFNAME"] == "eth\\xe90"
    assert meta["extra"] == {"lone": "\\ud800", "imag\\xe9net": "key too"}
    json.dumps(meta, ensure_ascii=False).encode("utf-8")


def test_module_is_stdlib_only(tmp_path):
    """Loaded on its own (no gpuscope package at all) it imports and works:
    nothing from gpuscope._gpuscope at import time."""
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('standalone_metadata', {md.__file__!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "assert not any(name.startswith('gpuscope') for name in sys.modules), sorted(sys.modules)\n"
        "assert m.redact_argv(['--token', 'x']) == ['--token', m.REDACTED]\n"
        "json.dumps(m.run_metadata(cwd=sys.argv[1]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=30,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
