"""step() and phase() as context managers and decorators; errors."""

import threading

import pytest

import gpuscope as gs
from conftest import MS


def test_phase_scopes_are_cached_per_name(session):
    assert session.phase("forward") is session.phase("forward")
    assert session.phase("forward") is not session.phase("backward")
    assert session.phase("forward").name == "forward"


def test_same_phase_nested_in_itself_counts_once(session, clock):
    with session.step():
        with session.phase("block"):
            clock.advance(MS)
            with session.phase("block"):
                clock.advance(2 * MS)
    p = session.summary().phases["block"]
    assert p.count == 2
    assert p.p50 == pytest.approx(0.003)


def test_exception_inside_with_closes_the_scope_and_propagates_unchanged(session, clock):
    err = RuntimeError("CUDA out of memory")
    with pytest.raises(RuntimeError) as caught:
        with session.step():
            with session.phase("forward"):
                clock.advance(5 * MS)
                raise err
    assert caught.value is err
    s = session.summary()
    assert s.steps == 1
    assert s.phases["forward"].p50 == pytest.approx(0.005)
    assert all(v == 0 for v in s.misuse.values())


def test_phase_as_a_decorator(session, clock):
    @session.phase("optimizer")
    def optimizer_step(lr, *, momentum=0.9):
        """Docstring kept."""
        clock.advance(3 * MS)
        return lr * momentum

    assert optimizer_step.__name__ == "optimizer_step"
    assert optimizer_step.__doc__ == "Docstring kept."
    with session.step():
        assert optimizer_step(1.0, momentum=0.5) == 0.5
        assert optimizer_step(2.0) == pytest.approx(1.8)
    p = session.summary().phases["optimizer"]
    assert p.count == 2
    assert p.p50 == pytest.approx(0.006)


def test_decorated_methods_bind_self(session, clock):
    class Model:
        scale = 3

        @session.phase("forward")
        def forward(self, x):
            clock.advance(MS)
            return self.scale * x

    with session.step():
        assert Model().forward(2) == 6
    assert session.summary().phases["forward"].count == 1


def test_decorator_propagates_exceptions_and_closes_the_scope(session, clock):
    @session.phase("forward")
    def boom():
        clock.advance(MS)
        raise ValueError("bad batch")

    with session.step():
        with pytest.raises(ValueError, match="bad batch"):
            boom()
    assert session.summary().phases["forward"].count == 1
    assert all(v == 0 for v in session.summary().misuse.values())


def test_step_as_a_decorator(session, clock):
    @session.step(samples=32)
    def train_step():
        with session.phase("forward"):
            clock.advance(10 * MS)

    for _ in range(4):
        train_step()
    s = session.summary()
    assert s.steps == 4
    assert s.throughput == pytest.approx(3200.0)


def test_coroutine_and_generator_functions_are_refused(session):
    async def evaluate():
        return 7

    def batches():
        yield 1

    for fn in (evaluate, batches):
        with pytest.raises(TypeError, match="await/yield"):
            session.phase("eval")(fn)
        with pytest.raises(TypeError, match="await/yield"):
            session.step()(fn)


def test_recursion_deeper_than_the_scope_limit_is_silent(clock):
    for enabled in (True, False):
        s = gs.Session(clock=clock, enabled=enabled)

        @s.phase("rec")
        def rec(n):
            clock.advance(MS)
            return 0 if n == 0 else 1 + rec(n - 1)

        with s.step():
            assert rec(40) == 40
        sm = s.summary()
        if enabled:
            assert sm.phases["rec"].count == 31  # the step plus 31 phases fill the 32 levels
            assert sm.misuse["too_deep"] == 10
        else:
            assert sm.total_steps == 0


def test_bad_phase_names_raise_value_error(session):
    for bad in ["", "x" * 65, "other", "launch", "tab\there"]:
        with pytest.raises(ValueError):
            session.phase(bad)
    with pytest.raises(TypeError):
        session.phase(3)


def test_too_many_phase_names_raise_gpuscope_error(clock):
    s = gs.Session(max_phases=12, clock=clock)
    for name in ("a", "b", "c"):
        s.phase(name)
    with pytest.raises(gs.GpuscopeError, match="max_phases"):
        s.phase("d")


def test_bad_options_raise_value_error_saying_what_to_do():
    for kwargs in [dict(window=0), dict(window=-1), dict(max_phases=3), dict(queue_capacity=1),
                   dict(flush_interval_ms=0)]:
        with pytest.raises(ValueError, match="out of range"):
            gs.Session(**kwargs)
    with pytest.raises(TypeError):
        gs.Session(window="big")
    with pytest.raises(TypeError):
        gs.Session(clock=object())
    with pytest.raises(TypeError):
        gs.Session(512, 1)  # only window is positional


def test_step_inside_a_step_raises(session):
    with session.step():
        with pytest.raises(gs.GpuscopeError, match="do not nest"):
            with session.step():
                pass
    assert session.summary().steps == 1


def test_ending_the_wrong_scope_raises(session):
    with session.step():
        a = session.phase("a").__enter__()
        session.phase("b").__enter__()
        with pytest.raises(gs.GpuscopeError, match="reverse order"):
            a.__exit__(None, None, None)
        with pytest.raises(gs.GpuscopeError, match="already ended"):
            session.phase("b").__exit__(None, None, None)
    with pytest.raises(gs.GpuscopeError, match="without being entered"):
        session.phase("c").__exit__(None, None, None)


def test_recording_from_a_second_thread_raises_there(session):
    with session.step():
        pass  # this thread records
    errors = []

    def other():
        try:
            with session.phase("forward"):
                pass
        except gs.GpuscopeError as e:
            errors.append(str(e))

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "own Session" in errors[0]


def test_step_scope_exited_without_entering_raises(session):
    st = session.step()
    with pytest.raises(gs.GpuscopeError, match="without being entered"):
        st.__exit__(None, None, None)
    with st:
        pass
    with pytest.raises(gs.GpuscopeError, match="without being entered"):
        st.__exit__(None, None, None)  # exited twice
    assert session.summary().total_steps == 1


def test_unbound_enter_and_exit_check_their_argument(session):
    phase_type = type(session.phase("x"))
    step_type = type(session.step())
    for t in (phase_type, step_type):
        with pytest.raises(TypeError):
            t.__enter__(session)
        with pytest.raises(TypeError):
            t.__exit__(object(), None, None, None)
    with pytest.raises(TypeError):
        phase_type.__enter__.__get__(session.step(), step_type)


def test_step_counts_are_validated(session):
    with pytest.raises(ValueError):
        session.step(samples=-3)
    with pytest.raises(TypeError):
        session.step(samples="x")
    with pytest.raises(TypeError):
        session.step(batch=3)


def test_closed_session_scopes_do_nothing(session, clock):
    session.close()
    assert not session.recording
    with session.step():
        with session.phase("forward"):
            clock.advance(MS)
    assert session.summary().total_steps == 0


def test_session_as_a_context_manager_closes(clock):
    with gs.Session(clock=clock) as s:
        with s.step():
            clock.advance(MS)
    assert not s.recording
    assert s.summary().total_steps == 1


def test_enter_and_exit_behave_like_methods(session):
    scope = session.phase("x")
    with session.step():
        assert scope.__enter__() is scope
        assert scope.__exit__(None, None, None) is False
        assert type(scope).__enter__(scope) is scope  # unbound, through the type
        assert type(scope).__exit__(scope, None, None, None) is False
        with pytest.raises(TypeError):
            scope.__enter__(1)
    assert session.summary().phases["x"].count == 2


def test_exit_with_an_exception_in_flight_never_raises_its_own(session):
    with session.step():
        a = session.phase("a").__enter__()
        session.phase("b").__enter__()
        err = KeyError("user's")
        # Out of order, but the user's exception must propagate, not ours.
        assert a.__exit__(KeyError, err, None) is False
    assert session.summary().misuse["out_of_order_end"] == 1


def test_a_default_session_keeps_up_with_a_tight_loop_of_scopes():
    # The fastest a Python thread records (about ten million records a
    # second here): the default queue, with the worker coming back sooner as
    # it fills, drops nothing (16384 records, the old default, dropped most).
    s = gs.Session()
    phase = s.phase("a")
    for _ in range(150_000):
        with s.step():
            with phase:
                pass
    summary = s.summary()
    s.close()
    assert summary.misuse["dropped_records"] == 0
    assert summary.total_steps == 150_000
