"""The stall watch's Python side: each stall said once, with where the
training thread is and, in a distributed job, where the other ranks are.

The C++ background worker finds a stall (a step, or a phase outside steps,
open past its limit: docs/definitions.md "Stalls") within a flush interval;
one daemon thread per process (``gpuscope-stalls``) asks every watched
session for it every ``_POLL`` seconds (``_gpuscope._current_stall``, a short
lock, no GIL held by the session). For a new stall it

1. takes the recording thread's Python stack from this thread
   (``sys._current_frames()``: no signal into the job, nothing the training
   thread has to do);
2. in a ``torch.distributed`` job, publishes where this rank is under
   ``<prefix>stall/<rank>`` in the job's own store (``set``, never a
   collective, never a CUDA call) and reads the other ranks' entries for at
   most ``_gather_seconds()`` (``check`` before every ``get``: a ``get`` of a
   missing key would block), so that the message names the rank that is
   somewhere else, and the ranks that did not answer, with their hosts;
3. logs it at the warning level (stderr unless a sink is set), then calls
   the session's ``on_stall`` with the ``gpuscope.Stall``.

When the stall ends, its key is deleted, so that the keys present are the
ranks stalled now. Once per process, as soon as its job is up, the same
thread also leaves its host under ``<prefix>host/<rank>``: a rank that stops
answering (its process stopped, its host gone) is then still named with its
host, even in a job that hangs before the ranks first exchanged records. The thread never keeps the process from exiting: it is a
daemon, stopped at interpreter exit, and waits on an event.
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _gpuscope

_POLL = 0.5            # seconds between looks at the sessions' stalls
_STACK_FRAMES = 12     # innermost frames of the training thread's stack
_MAX_NAMED = 8         # ranks named one by one in the message


def _ranks_text(ranks: List[int]) -> str:
    """[0, 1, 2, 4, 6, 7] -> "0-2, 4, 6, 7" (runs of three or more)."""
    out: List[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ranks[i]}-{ranks[j]}")
        else:
            out.extend(str(r) for r in ranks[i:j + 1])
        i = j + 1
    return ", ".join(out)


_duration = _gpuscope._format_duration


def python_stack(native_id: int) -> Optional[List[str]]:
    """The Python stack of the thread whose kernel id is ``native_id``
    (innermost ``_STACK_FRAMES`` frames, most recent call last), or None
    when no Python thread has that id."""
    ident = None
    for t in threading.enumerate():
        if t.native_id == native_id:
            ident = t.ident
            name = t.name
            break
    if ident is None:
        return None
    frame = sys._current_frames().get(ident)
    if frame is None:
        return None
    import traceback

    lines = [f"the training thread ({name}, thread id {native_id}), most recent call last:"]
    for entry in traceback.format_stack(frame)[-_STACK_FRAMES:]:
        lines.extend("  " + line for line in entry.rstrip("\n").split("\n"))
    return lines


def _gather_seconds(limit: float) -> float:
    """How long a stalled rank waits for the others' entries before it
    speaks: the other ranks find their own stalls within about a poll of
    each other when their limits agree, later when their histories differ."""
    return min(30.0, max(5.0, 0.5 * limit))


def _entry(stall: Any, rank: int, host: str) -> bytes:
    import json

    return json.dumps({"rank": rank, "host": host, "step": stall.step,
                       "phase_path": stall.phase_path, "seconds": stall.seconds,
                       "began": stall.began, "at": time.time()}).encode()


def _parse(blob: Any) -> Optional[Dict[str, Any]]:
    import json

    try:
        value = json.loads(bytes(blob).decode())
        if isinstance(value, dict) and isinstance(value.get("rank"), int):
            return value
    except (ValueError, UnicodeDecodeError, TypeError):
        pass
    return None


def _hosts(session: Any) -> Dict[int, str]:
    """Each rank's host as the last exchange of rank records heard it."""
    try:
        ranks = session.summary().ranks
        return {int(r.rank): str(r.host) for r in ranks} if ranks is not None else {}
    except Exception:  # noqa: BLE001 - a closed session: no hosts
        return {}


def _where(entry: Dict[str, Any]) -> str:
    path = entry.get("phase_path") or ""
    return f"`{path}`" if path else "no phase"


def _in_comm(entry: Dict[str, Any]) -> bool:
    return "comm" in str(entry.get("phase_path", "")).split("/")


def ranks_picture(entries: Dict[int, Dict[str, Any]], world_size: int, me: int,
                  hosts: Dict[int, str]) -> List[str]:
    """What the ranks' entries say, in lines: the ranks somewhere else than
    a collective (each with where and for how long), the ranks waiting in
    one, and the ranks that did not answer, with their hosts."""
    waiting = sorted(r for r, e in entries.items() if _in_comm(e))
    elsewhere = sorted(r for r, e in entries.items() if not _in_comm(e))
    missing = [r for r in range(world_size) if r not in entries]
    lines: List[str] = []
    if waiting and elsewhere:
        for r in elsewhere[:_MAX_NAMED]:
            e = entries[r]
            host = e.get("host") or hosts.get(r, "?")
            lines.append(f"rank {r}{' (this rank)' if r == me else ''} on {host} has been in "
                         f"{_where(e)} for {_duration(float(e.get('seconds', 0)))} "
                         f"(step {e.get('step')})")
        if len(elsewhere) > _MAX_NAMED:
            lines.append(f"... and {len(elsewhere) - _MAX_NAMED} more ranks outside the collective")
        them = "it" if len(elsewhere) == 1 else "them"
        lines.append(f"rank{'s' if len(waiting) > 1 else ''} {_ranks_text(waiting)} "
                     f"wait{'' if len(waiting) > 1 else 's'} in `comm` for {them}")
    elif entries:
        by_place: Dict[str, List[int]] = {}
        for r, e in sorted(entries.items()):
            by_place.setdefault(_where(e), []).append(r)
        for place, rs in sorted(by_place.items(), key=lambda kv: len(kv[1])):
            lines.append(f"rank{'s' if len(rs) > 1 else ''} {_ranks_text(rs)} "
                         f"{'are' if len(rs) > 1 else 'is'} stalled in {place}")
    for r in missing[:_MAX_NAMED]:
        lines.append(f"rank {r} on {hosts.get(r, 'an unknown host')} reported no stall: "
                     "unreachable (dead, or its host is), or still running"
                     + (": the one the others wait for" if waiting and not elsewhere else ""))
    if len(missing) > _MAX_NAMED:
        lines.append(f"... and {len(missing) - _MAX_NAMED} more ranks reported no stall")
    return lines


class _Watched:
    __slots__ = ("ref", "on_stall", "said", "published")

    def __init__(self, session: Any, on_stall: Optional[Callable[[Any], Any]]) -> None:
        self.ref = weakref.ref(session)
        self.on_stall = on_stall
        self.said: Optional[Tuple[int, float]] = None  # the stall last said
        self.published: Optional[Tuple[Any, str]] = None  # (store, key) of this rank's entry


def _host_key(job: Any, rank: int) -> str:
    return f"{job.prefix}host/{rank}"


def _stored_hosts(job: Any, ranks: List[int]) -> Dict[int, str]:
    """The hosts ``ranks`` left in the store (``check`` before ``get``: a
    ``get`` of a missing key would block)."""
    hosts: Dict[int, str] = {}
    for r in ranks:
        try:
            if job.store.check([_host_key(job, r)]):
                hosts[r] = bytes(job.store.get(_host_key(job, r))).decode(errors="replace")
        except Exception:  # noqa: BLE001 - a store gone: the host stays unknown
            pass
    return hosts


class _Watch:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: Dict[int, _Watched] = {}
        self.thread: Optional[threading.Thread] = None
        self.stop = threading.Event()
        self.host_job: Any = None  # the job (store) this process left its host in

    def add(self, session: Any, on_stall: Optional[Callable[[Any], Any]]) -> None:
        with self.lock:
            self.sessions[id(session)] = _Watched(session, on_stall)
            if self.thread is None and not self.stop.is_set():
                t = threading.Thread(target=self._run, name="gpuscope-stalls", daemon=True)
                t.start()
                self.thread = t

    def _publish_host(self) -> None:
        """Leaves this rank's host in its job's store, once per job (an
        elastic restart is a new one)."""
        from . import _ranks

        job = _ranks._job()
        if job is None or job.world_size < 2:
            return
        if self.host_job is not None and self.host_job.prefix == job.prefix:
            return
        try:
            job.store.set(_host_key(job, job.rank), job.host)
            self.host_job = job
        except Exception:  # noqa: BLE001 - tried again next poll
            pass

    def _run(self) -> None:
        while not self.stop.wait(_POLL):
            if "torch.distributed" in sys.modules:
                self._publish_host()
            with self.lock:
                watched = list(self.sessions.items())
            for key, w in watched:
                session = w.ref()
                if session is None:
                    with self.lock:
                        self.sessions.pop(key, None)
                    continue
                try:
                    self._look(session, w)
                except Exception as e:  # noqa: BLE001 - the watch never takes the job down
                    _gpuscope._log_once("stalls:error", f"the stall watch failed once: {e!r}")
                del session

    def _look(self, session: Any, w: _Watched) -> None:
        try:
            stall = _gpuscope._current_stall(session)
        except ValueError:  # closed
            stall = None
        if stall is None:
            if w.published is not None:
                store, key = w.published
                w.published = None
                try:
                    store.delete_key(key)
                except Exception:  # noqa: BLE001 - gone with the job: nothing to delete
                    pass
            return
        key = (stall.step, stall.began)
        if w.said == key:
            return
        w.said = key
        from . import _ranks

        job = _ranks._job() if "torch.distributed" in sys.modules else None
        if job is not None and job.world_size < 2:
            job = None
        where = f" on rank {job.rank} of {job.world_size} ({job.host})" if job is not None else ""
        lines = [f"stall{where}: " + _gpuscope._describe_stall(stall)]
        stack = python_stack(_gpuscope._recording_thread(session))
        if stack is not None:
            lines.extend(stack)
        if job is not None:
            lines.extend(self._ranks(session, stall, w, job))
        _gpuscope._log_warning("\n  ".join(lines))
        if w.on_stall is not None:
            try:
                w.on_stall(stall)
            except Exception as e:  # noqa: BLE001 - the job's own callback: said, not raised
                _gpuscope._log_warning(f"on_stall raised {type(e).__name__}: {e} (ignored)")

    def _ranks(self, session: Any, stall: Any, w: _Watched, job: Any) -> List[str]:
        base = f"{job.prefix}stall/"
        mine = f"{base}{job.rank}"
        try:
            job.store.set(mine, _entry(stall, job.rank, job.host))
        except Exception as e:  # noqa: BLE001 - a store gone: this rank's place only
            return [f"the other ranks could not be asked ({type(e).__name__}: {e})"]
        w.published = (job.store, mine)
        entries: Dict[int, Dict[str, Any]] = {}
        deadline = time.monotonic() + _gather_seconds(stall.limit)
        delay = 0.1
        while True:
            for r in range(job.world_size):
                if r in entries:
                    continue
                k = f"{base}{r}"
                try:
                    if job.store.check([k]):
                        e = _parse(job.store.get(k))
                        if e is not None:
                            entries[r] = e
                except Exception:  # noqa: BLE001 - asked again next round
                    pass
            left = deadline - time.monotonic()
            if len(entries) >= job.world_size or left <= 0 or self.stop.is_set():
                break
            time.sleep(min(delay, left))
            delay = min(2 * delay, 1.0)
        hosts = _hosts(session)
        # The last exchange names only the ranks it heard: the others'
        # hosts from the store (at most the ones the message names).
        unknown = [r for r in range(job.world_size) if r not in entries and r not in hosts]
        hosts.update(_stored_hosts(job, unknown[:_MAX_NAMED]))
        return ranks_picture(entries, job.world_size, job.rank, hosts)


_WATCH = _Watch()


def watch(session: Any) -> None:
    """Says the stalls of ``session`` (a recording gpuscope.Session) from
    now on; its ``on_stall`` option is called for each."""
    options = session._options
    after = options.get("stall_after")
    if not session.recording or (after is not None and after == float("inf")):
        return
    _WATCH.add(session, options.get("on_stall"))


def _stop_at_exit() -> None:
    _WATCH.stop.set()


atexit.register(_stop_at_exit)
