"""The HTML report's "Ranks" section: the straggler in one line and the
per-rank plot, from rank records made in one process (no distributed job:
each rank is a session of its own, given its place with _set_rank)."""

import re

import pytest

pytest.importorskip("matplotlib")

import gpuscope as gs  # noqa: E402
from conftest import MS  # noqa: E402
from gpuscope import _html  # noqa: E402


def rank_session(rank, world=4, host=None, forward_ms=10, steps=12):
    """A session that ran `steps` steps of forward and backward, placed as
    `rank` of `world` on `host`."""
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, rank_interval=None)
    for _ in range(steps):
        with s.step(samples=8):
            with s.phase("forward"):
                clock.advance(forward_ms * MS)
            with s.phase("backward"):
                clock.advance(20 * MS)
    gs._gpuscope._set_rank(s, rank, rank, world, f"node-{rank}" if host is None else host)
    return s


def record(s):
    return gs._gpuscope._rank_record(s.summary())


def record_of(rank, **kwargs):
    """The rank record of a new `rank_session(rank, **kwargs)`."""
    s = rank_session(rank, **kwargs)
    try:
        return record(s)
    finally:
        s.close()


def job(world=4, slow=2, present=None, hosts=None):
    """Rank 0's session with the records of the ranks in `present` (all of
    them by default); rank `slow`'s forward takes 5x longer."""
    hosts = hosts or {}
    sessions = [rank_session(r, world, hosts.get(r), forward_ms=50 if r == slow else 10)
                for r in range(world)]
    present = range(world) if present is None else present
    assert gs._gpuscope._set_rank_records(sessions[0], [record(sessions[r]) for r in present]) == 0
    for other in sessions[1:]:
        other.close()
    return sessions[0]


def section(text):
    """The Ranks section: from its heading to the next one."""
    match = re.search(r"<h2>Ranks</h2>(.*?)<h2>", text, re.S)
    assert match, "no Ranks section"
    return match.group(1)


def figure(text):
    return re.search(r'<figure id="plot-per-rank">.*?</figure>', text, re.S).group(0)


def test_the_per_rank_plot_names_the_straggler(tmp_path):
    s = job()
    ranks = s.summary().ranks
    assert [r.rank for r in ranks.ranks] == [0, 1, 2, 3] and ranks.missing == []
    assert (ranks.stragglers[0].rank, ranks.stragglers[0].phase) == (2, "forward")
    text = open(s.save_html(tmp_path / "r.html")).read()
    part = section(text)
    fig = figure(part)
    assert "<svg" in fig and "<figcaption>" in fig
    line = re.search(r'<p id="straggler">(.*?)</p>', part, re.S).group(1)
    assert "rank 2 on node-2" in line and "forward" in line and "x5 " in line
    assert "in the one exchange so far" in line and "host time" in line
    # The plot's text (matplotlib writes each text as a comment beside its paths).
    assert "<!-- straggler: forward x5 -->" in fig
    assert "<!-- forward -->" in fig and "<!-- backward -->" in fig and "<!-- step time p50 -->" in fig
    assert "<!-- missing -->" not in fig
    caption = re.search(r"<figcaption>(.*?)</figcaption>", fig, re.S).group(1)
    assert "host time" in caption and "Exchange 1: 4 of 4 ranks compared, 0 missing" in caption
    # The section sits between the plots and the phase table; the page keeps
    # its other plots.
    assert text.index('id="plot-telemetry"') < text.index("<h2>Ranks</h2>") < text.index("<h2>Phases</h2>")
    assert text.count("<svg") == 3  # step time, phases, per rank (no GPU: no idle, no telemetry)
    s.close()


def test_summary_ranks_is_a_list_of_the_ranks():
    # The contract: summary.ranks is "a list, one entry per rank" (None alone),
    # and keeps the exchange's other attributes beside it.
    s = job(present=[0, 1, 2])
    ranks = s.summary().ranks
    assert len(ranks) == 3 and bool(ranks)
    assert [r.rank for r in ranks] == [0, 1, 2] == [r.rank for r in ranks.ranks]
    assert ranks[0].rank == 0 and ranks[-1].rank == 2 and [r.rank for r in ranks[1:]] == [1, 2]
    assert ranks[1].host == ranks.ranks[1].host and ranks[2].steps == ranks.ranks[2].steps
    with pytest.raises(IndexError):
        ranks[3]
    assert ranks.missing == [3] and ranks.exchanges == 1
    assert list(reversed(list(ranks)))[0].rank == 2
    s.close()


def test_a_missing_rank_is_a_labelled_gap():
    s = job(present=[0, 1, 2])
    summary = s.summary()
    assert summary.ranks.missing == [3]
    text = _html.render_html(summary, s.step_columns())
    fig = figure(section(text))
    assert "<svg" in fig and "<!-- missing -->" in fig
    assert "3 of 4 ranks compared, 1 missing (3)" in fig
    s.close()


def test_fewer_than_two_ranks_say_so_instead_of_a_plot():
    s = job(present=[0])
    text = _html.render_html(s.summary(), s.step_columns())
    part = section(text)
    assert "<svg" not in part
    assert "Fewer than 2 ranks to compare" in part and "1 of 4 ranks compared, 3 missing (1, 2, 3)" in part
    assert "No straggler among the 1 ranks compared." in part
    s.close()


def test_a_summary_without_ranks_has_no_ranks_section(tmp_path):
    s = rank_session(0)
    s2 = gs.Session(clock=gs.testing.ManualClock(), rank_interval=None)
    with s2.step():
        pass
    for session in (s, s2):  # a rank without records, and a single process
        summary = session.summary()
        assert summary.ranks is None
        text = _html.render_html(summary, session.step_columns())
        assert "<h2>Ranks</h2>" not in text and "plot-per-rank" not in text
        assert "Straggler" not in text
        # Nothing added: the telemetry figure is followed by the phase table as before.
        assert re.search(r'<figure id="plot-telemetry">.*?</figure>\n\n<h2>Phases</h2>', text, re.S)
        session.close()


def test_host_names_from_other_ranks_are_escaped(tmp_path):
    hostile = "<b>x</b>"
    s = job(hosts={2: hostile})
    top = s.summary().ranks.stragglers[0]
    assert (top.rank, top.host) == (2, hostile)
    text = open(s.save_html(tmp_path / "r.html")).read()
    assert hostile not in text
    assert "rank 2 on &lt;b&gt;x&lt;/b&gt;" in section(text)
    s.close()


def test_hostile_phase_names_are_escaped_in_the_plot():
    """A phase name from another rank reaches the plot's legend and the
    straggler's annotation: escaped there too, mathtext included."""
    clock = gs.testing.ManualClock()
    sessions = []
    for rank in range(3):
        s = gs.Session(clock=clock, rank_interval=None)
        for _ in range(6):
            with s.step():
                with s.phase("<i>$x$</i>"):
                    clock.advance((40 if rank == 1 else 10) * MS)
                with s.phase("backward"):
                    clock.advance(20 * MS)
        gs._gpuscope._set_rank(s, rank, rank, 3, f"node-{rank}")
        sessions.append(s)
    records = [record(s) for s in sessions]
    assert gs._gpuscope._set_rank_records(sessions[0], records) == 0
    summary = sessions[0].summary()
    assert summary.ranks.stragglers[0].phase == "<i>$x$</i>"
    text = _html.render_html(summary, sessions[0].step_columns())
    assert "<i>$x$</i>" not in text
    assert "in &lt;i&gt;$x$&lt;/i&gt;" in section(text)
    for s in sessions:
        s.close()


def test_chronic_and_transient_stragglers():
    """The line says whether the straggler is slow in most recent exchanges
    (chronic) or in fewer (transient), as the straggler finding does."""
    s = job()  # exchange 1: rank 2 slow
    slow = [record(s)] + [record_of(r, forward_ms=50 if r == 2 else 10) for r in (1, 2, 3)]
    even = [record(s)] + [record_of(r) for r in (1, 2, 3)]
    for _ in range(2):
        gs._gpuscope._set_rank_records(s, slow)
    ranks = s.summary().ranks
    assert (ranks.straggler_exchanges, ranks.recent_exchanges) == (3, 3)
    assert "chronic: slow in 3 of the last 3 exchanges" in _html._straggler_text(s.summary())
    for _ in range(5):
        gs._gpuscope._set_rank_records(s, even)
    assert _html._straggler_text(s.summary()) == "No straggler among the 4 ranks compared."
    gs._gpuscope._set_rank_records(s, slow)
    summary = s.summary()
    ranks = summary.ranks
    assert ranks.stragglers[0].rank == 2 and 2 * ranks.straggler_exchanges <= ranks.recent_exchanges
    line = _html._straggler_text(summary)
    assert (f"transient: slow in {ranks.straggler_exchanges} of the last {ranks.recent_exchanges} "
            "exchanges") in line
    text = _html.render_html(summary, s.step_columns())
    assert f"Exchange {ranks.exchanges}: 4 of 4 ranks compared" in figure(section(text))
    s.close()


def test_a_large_world_draws_only_the_slowest_ranks():
    world = _html.MAX_RANK_BARS * 5  # 320 ranks
    slow_forward = rank_session(0, world=world, forward_ms=50)
    slow_step = rank_session(0, world=world, forward_ms=12)
    normal = rank_session(0, world=world)
    records = []
    for rank in range(world):
        if rank % 40 == 39:  # 8 ranks missing
            continue
        s = slow_forward if rank == 123 else slow_step if rank % 10 == 0 else normal
        gs._gpuscope._set_rank(s, rank, rank, world, f"node-{rank // 8}")
        records.append(record(s))
    gs._gpuscope._set_rank(normal, 0, 0, world, "node-0")
    assert gs._gpuscope._set_rank_records(normal, records) == 0
    summary = normal.summary()
    assert len(summary.ranks.ranks) == world - 8 and len(summary.ranks.missing) == 8
    assert summary.ranks.stragglers[0].rank == 123
    text = _html.render_html(summary, normal.step_columns())
    fig = figure(section(text))
    assert "<svg" in fig and "<!-- missing -->" not in fig
    assert f"312 of {world} ranks compared, 8 missing" in fig
    assert f"only the {_html.RANK_BARS_SHOWN} slowest ranks by step time p50 are drawn" in fig
    # The 32 slowest by step time p50: the straggler (70 ms), then 31 of the
    # 32 ranks of 32 ms (every tenth; the lower rank numbers first).
    ticks = re.findall(r"<!-- (\d+) -->", fig)
    assert "123" in ticks and "0" in ticks and "300" in ticks
    assert "310" not in ticks and "1" not in ticks and "38" not in ticks
    assert "<!-- straggler: forward x5 -->" in fig
    for s in (slow_forward, slow_step, normal):
        s.close()
