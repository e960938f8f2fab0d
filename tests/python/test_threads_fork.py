"""summary() from another thread while recording; fork() and DataLoader
workers."""

import os
import subprocess
import sys
import threading
import time

import pytest

import gpuscope as gs


def test_summary_from_another_thread_while_recording():
    s = gs.Session(window=128, queue_capacity=1 << 18)
    stop = threading.Event()
    seen, problems = [], []

    def reader():
        last = 0
        while not stop.is_set():
            sm = s.summary()
            if sm.total_steps < last or sm.steps > 128:
                problems.append((last, sm.total_steps, sm.steps))
            last = sm.total_steps
            seen.append(last)

    t = threading.Thread(target=reader)
    t.start()
    for _ in s.steps(range(20000), samples=4):
        with s.phase("forward"):
            pass
    stop.set()
    t.join()
    assert not problems
    assert len(seen) > 0
    final = s.summary()
    assert final.total_steps == 20000
    assert all(v == 0 for v in final.misuse.values())


def test_forked_child_records_nothing_and_parent_is_unaffected():
    s = gs.Session()
    with s.step():
        pass
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            with s.step():
                with s.phase("forward"):
                    pass
            with s.phase("brand-new-name"):  # new names do not raise in a child
                pass
            if s.summary().total_steps != 0:
                code = 2
            child = gs.Session()  # a session made in the child works
            for _ in child.steps(range(5)):
                pass
            if child.summary().total_steps != 5:
                code = 3
        except BaseException:
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    with s.step():
        pass
    assert s.summary().total_steps == 2


@pytest.fixture
def torch():
    """PyTorch, for the tests that need it: they skip without it (missing, or
    installed but failing to import); the others in this file do not need it
    and run regardless."""
    try:
        import torch
    except ImportError as e:
        pytest.skip(f"needs PyTorch ({e})")
    return torch


class SlowDataset:
    """Each item takes a while, and is itself instrumented: that code runs in
    forked DataLoader workers. A map-style dataset (``__len__`` and
    ``__getitem__`` are all DataLoader asks for), defined without importing
    torch so that this module imports where torch is missing."""

    def __init__(self, n, delay_s):
        self.n, self.delay_s = n, delay_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import torch

        with gs.phase("decode"):  # the default session, inherited through fork
            time.sleep(self.delay_s)
        return torch.full((4,), float(i)), torch.tensor(i % 2)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_with_forked_workers(torch, num_workers):
    default = gs.default_session()  # exists before the workers fork

    def decode_calls():
        p = default.summary().phases.get("decode")
        return p.outside_steps_count if p else 0

    before = decode_calls()
    loader = torch.utils.data.DataLoader(SlowDataset(64, 0.002), batch_size=8,
                                         num_workers=num_workers)
    s = gs.Session()
    model = torch.nn.Linear(4, 2)
    for x, y in s.steps(loader, samples=lambda b: len(b[0])):
        with s.phase("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        with s.phase("backward"):
            loss.backward()
    sm = s.summary()
    assert sm.total_steps == 8
    assert sm.throughput is not None and sm.throughput > 0
    assert sm.phases["data"].share > 0.2  # 8 x 2 ms of loading per step
    assert all(v == 0 for v in sm.misuse.values())
    assert "decode" not in sm.phases  # recorded on the default session, not on s
    # In this process each item's decode is recorded on the default session;
    # in forked workers nothing is, and the parent's session is untouched.
    assert decode_calls() - before == (64 if num_workers == 0 else 0)
    assert all(v == 0 for v in default.summary().misuse.values())


_EXIT_DURING_CALLS = r"""
import sys, threading, time
import gpuscope as gs

s = gs.Session()
for _ in range(3000):
    with s.step():
        with s.phase("forward"):
            pass

def loop(call):
    while True:
        call()

calls = [s.summary, s.summary, s._step_columns, s._step_series_json, s.trace_json, s.flush,
         gs._gpuscope.run_doctor]
for call in calls:
    threading.Thread(target=loop, args=(call,), daemon=True).start()
time.sleep(0.1)
print("main done", flush=True)
"""


def test_the_program_exits_cleanly_while_daemon_threads_are_inside_gpuscope(tmp_path):
    # A monitor or a metrics server calls summary() from a daemon thread; the
    # program ends while one is in C++ with the GIL released. CPython ends
    # such a thread with pthread_exit() when it takes the GIL back; through
    # a noexcept destructor that was std::terminate: "terminate called without
    # an active exception" and SIGABRT at the end of a run that had succeeded
    # (it did so 20 times in 20 before the fix).
    script = tmp_path / "exit_during_calls.py"
    script.write_text(_EXIT_DURING_CALLS)
    for _ in range(5):
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "main done" in r.stdout
        assert "terminate called" not in r.stderr


_EXIT_DURING_EXCHANGE = r"""
import atexit, sys, threading, time, types

def last():  # registered first, so it runs after gpuscope's exit handlers
    alive = [t.name for t in threading.enumerate() if t.name.startswith("gpuscope-") and t.is_alive()]
    print("alive at exit:", alive, flush=True)

atexit.register(last)

class Store:  # torch's store API; rank 1 never comes
    def __init__(self):
        self.kv, self.lock = {}, threading.Lock()
    def set(self, k, v):
        self.kv[k] = v
    def add(self, k, n):
        time.sleep(0.02)
        with self.lock:
            self.kv[k] = int(self.kv.get(k, 0)) + n
            return self.kv[k]
    def check(self, keys):
        return all(k in self.kv for k in keys)
    def get(self, k):
        return self.kv[k]
    def multi_get(self, keys):
        return [self.kv[k] for k in keys]
    def delete_key(self, k):
        self.kv.pop(k, None)

store = Store()
sys.modules["torch.distributed"] = types.SimpleNamespace(
    is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda: 0,
    get_world_size=lambda: 2,
    distributed_c10d=types.SimpleNamespace(_get_default_store=lambda: store))
import gpuscope as gs

s = gs.Session(rank_interval=0.2, rank_timeout_s=60)
end = time.monotonic() + 20
while not store.kv and time.monotonic() < end:  # until an exchange is waiting for rank 1
    with s.step():
        time.sleep(0.001)
print("exchange in flight:", bool(store.kv), flush=True)
"""


def test_the_program_exits_promptly_while_a_rank_exchange_waits(tmp_path):
    # The periodic exchange runs on a daemon thread, and a torch store call
    # releases the GIL in a pybind11 guard that CPython's end of daemon
    # threads cannot unwind (SIGABRT at exit, as above). At exit the exchange
    # stops waiting for the other ranks and its thread is waited for, so no
    # thread of gpuscope's is left when CPython finalizes; and the exit does
    # not wait for the rank timeout (60 s here).
    script = tmp_path / "exit_during_exchange.py"
    script.write_text(_EXIT_DURING_EXCHANGE)
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    assert "exchange in flight: True" in r.stdout, r.stdout
    assert "alive at exit: []" in r.stdout, r.stdout
    assert wall < 20, wall
