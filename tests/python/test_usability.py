"""Small things a user meets first: len() of s.steps(loader) for tqdm, the
no-GPU reason said once, dir(gpuscope) showing the API only, help() on
Session documenting every argument, and save() of a run without steps
warning before compare refuses it."""

import inspect
import operator
import os
import pydoc
import subprocess
import sys
import warnings

import pytest

import gpuscope as gs
from conftest import MS


class Loader:
    """A DataLoader's shape: iterable, with a length."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n))


class IterableLoader:
    """A DataLoader over an IterableDataset without a length: __len__ exists
    and raises TypeError."""

    def __len__(self):
        raise TypeError("IterableDataset has no len()")

    def __iter__(self):
        return iter(range(3))


def test_len_of_steps_is_the_loaders(session):
    it = session.steps(Loader(7))
    assert len(it) == 7
    assert operator.length_hint(it) == 7  # what tqdm and list() ask
    assert list(it) == list(range(7))
    assert len(it) == 7  # the loader's length, not what is left
    assert session.summary().steps == 7
    assert len(session.steps([1, 2, 3], samples=1)) == 3
    assert len(gs.steps(Loader(4))) == 4  # the default session's too


def test_steps_over_an_iterable_without_length_has_none(session):
    it = session.steps(x for x in range(3))
    assert not hasattr(it, "__len__")
    with pytest.raises(TypeError):
        len(it)
    assert list(it) == [0, 1, 2]
    # A length that raises is the loader's answer, passed on unchanged.
    with pytest.raises(TypeError, match="IterableDataset has no len"):
        len(session.steps(IterableLoader()))
    assert list(session.steps(IterableLoader())) == [0, 1, 2]


def test_tqdm_shows_a_total(session):
    tqdm = pytest.importorskip("tqdm")
    bar = tqdm.tqdm(session.steps(Loader(5)), disable=True)
    assert bar.total == 5
    assert list(bar) == list(range(5))


def _report_without_a_gpu():
    """A step and a report in a fresh process where no CUDA driver can load,
    everything logged: stdout + stderr."""
    env = dict(os.environ, GPUSCOPE_LOG="info", GPUSCOPE_LIBCUDA="no-libcuda.so")
    env.pop("GPUSCOPE_SIMULATE", None)
    code = ("import gpuscope as gs\n"
            "s = gs.Session()\n"
            "with s.step():\n"
            "    pass\n"
            "print(s.report())\n"
            "s2 = gs.Session()\n"
            "print(gs.Session().report())\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout, p.stderr


def test_the_no_gpu_reason_is_said_once():
    out, err = _report_without_a_gpu()
    # Each report says why there is no GPU timing once (two reports: twice);
    # the log says it once for the process, however many sessions.
    assert out.count("no-libcuda.so") == 2, out
    assert err.count("no-libcuda.so") == 1, err
    assert "host timing only" in out


def test_dir_shows_the_public_api_only():
    names = dir(gs)
    for private in ("os", "threading", "atexit", "importlib", "Any", "Callable", "Optional",
                    "TypeVar", "Union", "Iterable", "Iterator", "Dict", "List", "T", "Count"):
        assert private not in names, private
    for public in gs.__all__:
        assert public in names, public
    assert "testing" in names
    assert [n for n in names if n not in gs.__all__] == ["testing"]


def test_help_on_session_documents_every_argument():
    params = inspect.signature(gs.Session).parameters
    expected = ["window", "enabled", "max_phases", "queue_capacity", "flush_interval_ms", "clock",
                "stream", "simulated_device", "cupti", "telemetry_interval_ms", "trace_steps",
                "warmup", "stall_after", "on_stall", "rank_interval", "rank_timeout_s", "flops_per_step", "flops_per_sample",
                "peak_flops", "peak_precision", "device_name", "run_id"]
    assert list(params) == expected
    text = pydoc.render_doc(gs.Session, renderer=pydoc.plaintext)
    for name in expected:
        assert f"``{name}``:" in gs.Session.__doc__, name
        assert name in text, name
    # Every argument the C type takes is one of those, with the same
    # default: passing each default explicitly changes nothing.
    for name, p in params.items():
        if name.startswith("rank_"):
            continue  # Python's own
        gs._gpuscope._Session(**({} if name == "window" else {name: p.default})).close()
    default = gs.Session(**{n: p.default for n, p in params.items()})
    assert default.window == 512 and default.recording and default.source == gs.Session().source
    default.close()


def test_save_without_steps_warns_and_compare_refuses_it(tmp_path, clock):
    s = gs.Session(clock=clock)
    with pytest.warns(UserWarning, match=r"no completed steps .*gpuscope compare. will refuse"):
        path = s.save(tmp_path / "empty.json")
    assert os.path.exists(path)  # written all the same
    p = subprocess.run([sys.executable, "-m", "gpuscope", "compare", path, path],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no completed steps" in p.stderr

    warm = gs.Session(clock=clock, warmup=3)
    with warm.step():
        clock.advance(MS)
    with pytest.warns(UserWarning, match=r"every completed step so far \(1\) was a warm-up step"):
        warm.save(tmp_path / "warm.json")

    with s.step():
        clock.advance(MS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a run with steps saves silently
        s.save(tmp_path / "one.json")
