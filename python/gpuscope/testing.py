"""Helpers for testing code instrumented with gpuscope.

``ManualClock`` makes step times exact::

    clock = gpuscope.testing.ManualClock()
    s = gpuscope.Session(clock=clock)
    with s.step():
        clock.advance(30_000_000)   # this step lasts exactly 30 ms
"""

from ._gpuscope import ManualClock

__all__ = ["ManualClock"]
