"""The exchange of rank records between the ranks of a torch.distributed job.

Every ``rank_interval`` seconds each rank's session reduces its window to a
fixed-size record (the C++ ``RankRecord``: step time, the largest phases'
host and device time, GPU idle, throughput, clocks), and the ranks share
their records through the key-value store that ``torch.distributed``
already rendezvoused with (its default store, under keys of its own). The
records are compared in C++ (``CompareRanks()``) and kept in the session:
``summary().ranks``, and the ``straggler`` finding on every rank.

What it never does: a collective on any process group (the user's or one of
its own), anything on a CUDA stream, or a wait on the training thread. The
periodic exchange runs on one daemon thread per process; ``sync_ranks()``
runs one on a thread of its own and waits for it at most its timeout.

How one exchange goes, on every rank, under a name the ranks agree on
without talking (the periodic ones: the number of ``rank_interval`` periods
since the epoch, on clocks NTP keeps within milliseconds; ``sync_ranks()``:
how many times this session called it):

1. set ``<prefix>/<name>/<rank>`` to its record (zlib-compressed), then
   ``add(<prefix>/<name>/n, 1)`` (a periodic exchange whose period has
   passed by then is skipped);
2. poll ``add(.../n, 0)`` until it reaches the world size or the timeout
   passes (5 ms, doubling to 200 ms);
3. all there (and ``check`` of every key says so): one ``multi_get``; else
   ``check`` each key and get those that exist (never a ``get`` of a key
   that may not: that would block for the store's own timeout, holding the
   store client's lock). The ranks not heard from are ``missing``;
4. delete the keys it wrote (rank 0: and the counters) more than 10
   minutes ago, far longer than any timeout, so a rank late to an exchange
   never finds its keys gone.

``<prefix>`` holds torchelastic's restart count and how many default stores
this process has seen (a new one: an elastic restart or a
``destroy_process_group()``/``init_process_group()``), so keys of an earlier
job are never read as this one's.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
import weakref
import zlib
from typing import Any, List, NamedTuple, Optional

from . import _gpuscope

_POLL_FIRST, _POLL_MAX = 0.005, 0.2
# At interpreter exit: how long the exchange threads are waited for (one
# store call in flight; the exchanges themselves stop polling at once).
_EXIT_WAIT = 5.0

# Set at interpreter exit (before CPython ends daemon threads): no exchange
# starts, and one in flight stops waiting for the other ranks. A daemon thread
# still inside a store call when CPython finalizes is ended from inside
# torch's pybind11 binding, whose GIL guard cannot be unwound through: the
# process would abort with "terminate called without an active exception".
_closing = threading.Event()


class ExchangeResult(NamedTuple):
    """What ``Session.sync_ranks()`` returns: the ranks heard from, those not
    heard from within the timeout, and the seconds it took. ``ok`` when every
    rank answered."""

    heard: List[int]
    missing: List[int]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.missing


def _say_once(key: str, message: str) -> None:
    _gpuscope._log_once(f"ranks:{key}", message)


def _short(e: BaseException) -> str:
    """An exception in a line of at most 200 characters (a store error can
    carry the whole request)."""
    text = f"{type(e).__name__}: {e}".replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


def _dist() -> Any:
    """torch.distributed when the program imported it and initialized the
    default group, else None. Never imports torch."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return dist
    except Exception:  # a torch in a state we cannot read
        pass
    return None


class _Job(NamedTuple):
    store: Any
    rank: int
    world_size: int
    local_rank: int
    host: str
    prefix: str


# The default store last seen, and how many different ones this process has
# seen: a new one (an elastic restart, destroy_process_group() and a new
# init_process_group()) starts a new key space, so no key of the last group
# is read as this one's. Under _JOBS_LOCK.
_JOBS_LOCK = threading.Lock()
_last_store: Any = None  # a weak reference (or a function returning the store)
_generation = -1


def _job() -> Optional[_Job]:
    global _last_store, _generation
    dist = _dist()
    if dist is None:
        return None
    try:
        store = dist.distributed_c10d._get_default_store()
        rank, world = int(dist.get_rank()), int(dist.get_world_size())
    except Exception as e:  # private API moved, or the group is going away
        _say_once("store", f"cannot reach torch.distributed's store ({_short(e)}); "
                           "ranks are not compared")
        return None
    with _JOBS_LOCK:
        if _last_store is None or _last_store() is not store:
            _generation += 1
            try:
                _last_store = weakref.ref(store)
            except TypeError:  # not weakly referenceable: hold it
                _last_store = lambda s=store: s  # noqa: E731
        generation = _generation
    try:
        local = int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        local = 0
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    import socket

    return _Job(store, rank, world, max(local, 0), socket.gethostname(),
                f"gpuscope/v1/{restart}/{generation}/")


# Keys are deleted only this long after their exchange (and only the ones a
# rank wrote itself, the counters by rank 0): far longer than any timeout
# and clock skew, so that a rank that comes late to an exchange never asks
# for a key that is gone (a get of a missing key would block for the
# store's own timeout, holding the store's client lock).
_KEY_LIFETIME = 600.0


class _State:
    """One session's side of the exchange."""

    def __init__(self, seq: int, interval: float, timeout: float) -> None:
        self.seq = seq                # this session's number among the process's exchanging ones
        self.interval = interval
        self.timeout = timeout
        self.syncs = 0                # sync_ranks() calls so far
        self.last_round = -1          # the last periodic round done
        self.lock = threading.Lock()  # guards what follows (a periodic and a forced exchange may overlap)
        self.written: List[Any] = []  # (monotonic time, store, key) this rank wrote
        self.syncs_running = 0        # sync_ranks() exchanges in flight
        self.last_sync_applied = -math.inf  # when the last applied sync exchange started


def _forget_old_keys(state: _State, now: float) -> None:
    """Deletes the keys this rank wrote more than _KEY_LIFETIME ago."""
    with state.lock:
        old = [w for w in state.written if now - w[0] > _KEY_LIFETIME]
        state.written = [w for w in state.written if now - w[0] <= _KEY_LIFETIME]
    for _, store, key in old:
        try:
            store.delete_key(key)
        except Exception:  # a store without delete_key, or gone: the key stays
            pass


def _exchange(session: Any, state: _State, name: str, kind: str, timeout: float,
              job: Optional[_Job] = None, round_: Optional[int] = None) -> Optional[ExchangeResult]:
    """One exchange named ``name`` in ``job`` (default: torch.distributed's);
    None when there is no job to exchange in, or (a periodic exchange of
    period ``round_``) when the period has passed before this rank could
    take part."""
    job = job if job is not None else _job()
    if job is None or job.world_size < 2:
        return None
    started = time.monotonic()
    deadline = started + timeout
    _gpuscope._set_rank(session, job.rank, job.local_rank, job.world_size, job.host[:63])
    record = zlib.compress(_gpuscope._rank_record(session.summary()))
    if round_ is not None and math.floor(time.time() / state.interval) != round_:
        return None  # too late for this period: the others have moved on
    store = job.store
    base = f"{job.prefix}{state.seq}/{name}/"
    mine, counter = f"{base}{job.rank}", f"{base}n"
    with state.lock:  # noted first, so that a failure below still cleans it up
        state.written.append((started, store, mine))
        if job.rank == 0:
            state.written.append((started, store, counter))
    store.set(mine, record)
    count = store.add(counter, 1)
    delay = _POLL_FIRST
    while count < job.world_size:
        left = deadline - time.monotonic()
        if left <= 0 or _closing.is_set():
            break
        time.sleep(min(delay, left))
        delay = min(2 * delay, _POLL_MAX)
        count = store.add(counter, 0)
    # Never a read of a key that may not exist: check first (one call for
    # all of them when the counter says every rank is there).
    keys = [f"{base}{r}" for r in range(job.world_size)]
    if count >= job.world_size and store.check(keys):
        values = list(store.multi_get(keys))
        heard = list(range(job.world_size))
    else:
        values, heard = [], []
        for r, key in enumerate(keys):
            if store.check([key]):
                values.append(store.get(key))
                heard.append(r)
    records = []
    for blob in values:
        try:
            records.append(zlib.decompress(bytes(blob)))
        except zlib.error:
            records.append(b"")  # counted as refused below
    # A sync_ranks() result is what the user asked for: a periodic exchange
    # does not replace it when it started before it or ran alongside it.
    with state.lock:
        apply = kind == "sync" or (state.syncs_running == 0 and started > state.last_sync_applied)
        if kind == "sync":
            state.last_sync_applied = max(state.last_sync_applied, started)
    if apply:
        refused = _gpuscope._set_rank_records(session, records)
        if refused:
            _say_once("refused", f"{refused} rank records could not be read (another gpuscope "
                                 "version on some ranks?); those ranks count as missing")
    _forget_old_keys(state, time.monotonic())
    missing = sorted(set(range(job.world_size)) - set(heard))
    return ExchangeResult(heard, missing, time.monotonic() - started)


class _Exchanger:
    """The process's periodic exchange: one daemon thread serving every live
    session that takes part, each at its own interval."""

    def __init__(self) -> None:
        self._sessions: "weakref.WeakKeyDictionary[Any, _State]" = weakref.WeakKeyDictionary()
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._next_seq = 0
        self._pid = os.getpid()

    def add(self, session: Any, interval: float, timeout: float) -> _State:
        with self._cv:
            if self._pid != os.getpid():  # a forked child: the parent's thread is not here
                self.__init__()  # type: ignore[misc]
            state = _State(self._next_seq, interval, timeout)
            self._next_seq += 1
            self._sessions[session] = state
            if self._thread is None:  # kept only once started, so a failed start is retried
                thread = threading.Thread(target=self._run, name="gpuscope-ranks", daemon=True)
                thread.start()
                self._thread = thread
            self._cv.notify()
            return state

    def remove(self, session: Any) -> None:
        with self._cv:
            self._sessions.pop(session, None)
            self._cv.notify()

    def state(self, session: Any) -> Optional[_State]:
        with self._cv:
            return self._sessions.get(session)

    def _run(self) -> None:
        while not _closing.is_set():
            try:
                self._pass()
            except Exception as e:  # never let the thread die: the next pass tries again
                _say_once(f"thread:{type(e).__name__}", f"the rank exchange thread hit {_short(e)}")
                _closing.wait(1.0)

    def stop(self) -> Optional[threading.Thread]:
        """Wakes the thread to see ``_closing``; returns it (None: none)."""
        with self._cv:
            self._cv.notify_all()
            return self._thread if self._pid == os.getpid() else None

    def _pass(self) -> None:
        """Sleeps until a session's exchange is due, then runs the due ones."""
        with self._cv:
            now = time.time()
            periodic = [(s, st) for s, st in self._sessions.items() if math.isfinite(st.interval)]
            due = [(s, st) for s, st in periodic if math.floor(now / st.interval) > st.last_round]
            if not due:
                wake = min(((math.floor(now / st.interval) + 1) * st.interval for _, st in periodic),
                           default=now + 3600.0)
                self._cv.wait(timeout=min(3600.0, max(0.001, wake - now)))
                return
        for session, st in due:
            if _closing.is_set():
                return
            round_ = math.floor(time.time() / st.interval)
            first = st.last_round < 0
            st.last_round = round_
            # The first period is skipped: the window has barely begun, and
            # the ranks meet at the next boundary whenever they started.
            if first or not session.recording or _dist() is None:
                continue
            try:
                _exchange(session, st, f"p{round_}", "periodic", st.timeout, round_=round_)
            except Exception as e:  # a store going away at the end of a job, ...
                _say_once(f"failed:{type(e).__name__}",
                          f"an exchange of rank records failed ({_short(e)}); the next one "
                          "will try again")


_EXCHANGER = _Exchanger()
_SYNC_THREADS: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()  # sync_ranks() workers


@atexit.register
def _stop_at_exit() -> None:
    """Stops the exchanges and waits (at most _EXIT_WAIT s in all) for the
    threads still inside one, while CPython still lets them finish."""
    _closing.set()
    threads = [t for t in [_EXCHANGER.stop(), *list(_SYNC_THREADS)]
               if t is not None and t is not threading.current_thread()]
    end = time.monotonic() + _EXIT_WAIT
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))


def attach(session: Any, interval: Optional[float], timeout: Optional[float]) -> bool:
    """Makes ``session`` take part in the periodic exchange (every
    ``interval`` seconds; None: never, only ``sync_ranks()``). False, said
    once, when it cannot (no thread to be had)."""
    if timeout is None:
        timeout = default_timeout(interval)
    try:
        _EXCHANGER.add(session, math.inf if interval is None else interval, timeout)
        return True
    except Exception as e:  # RuntimeError: can't start new thread, or at interpreter shutdown
        _EXCHANGER.remove(session)
        _say_once("attach", f"cannot start the rank exchange ({_short(e)}); ranks are not "
                            "compared in this process")
        return False


def attached(session: Any) -> bool:
    return _EXCHANGER.state(session) is not None


def detach(session: Any) -> None:
    _EXCHANGER.remove(session)


def default_timeout(interval: Optional[float]) -> float:
    """A third of the interval, at most 10 s: a missing rank costs the
    exchange thread that long, and the next exchange starts in time."""
    return 10.0 if interval is None else min(10.0, interval / 3)


def sync(session: Any, timeout: float) -> Optional[ExchangeResult]:
    """``Session.sync_ranks()``: one exchange now, waited for at most
    ``timeout`` seconds (plus the time to make this rank's summary)."""
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise ValueError(f"timeout_s={timeout!r}: use a number of seconds above 0")
    state = _EXCHANGER.state(session)
    if state is None or _dist() is None:
        return None
    with state.lock:
        state.syncs += 1
        state.syncs_running += 1
        name = f"s{state.syncs}"
    out: List[Any] = []

    def run() -> None:
        # Not held up by a periodic exchange in flight: each has its own keys.
        try:
            out.append(_exchange(session, state, name, "sync", timeout))
        except Exception as e:
            out.append(e)
        finally:
            with state.lock:
                state.syncs_running -= 1

    started = time.monotonic()
    worker = threading.Thread(target=run, name="gpuscope-sync-ranks", daemon=True)
    worker.start()
    _SYNC_THREADS.add(worker)
    # The exchange bounds its own wait; the margin covers this rank's summary
    # and a store call in flight. A store that hangs past it is left behind.
    worker.join(timeout + 2.0)
    if not out:
        _say_once("sync-hung", "sync_ranks(): the store did not answer within the timeout; "
                               "going on without the other ranks")
        job = _job()
        world = job.world_size if job is not None else 0
        return ExchangeResult([], list(range(world)), time.monotonic() - started)
    if isinstance(out[0], Exception):
        e = out[0]
        _say_once(f"sync-failed:{type(e).__name__}",
                  f"sync_ranks() failed ({_short(e)}); going on without the other ranks")
        job = _job()
        world = job.world_size if job is not None else 0
        return ExchangeResult([], list(range(world)), time.monotonic() - started)
    return out[0]
