"""summary() from another thread while recording; fork() and DataLoader
workers."""

import os
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
