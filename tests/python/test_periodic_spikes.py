"""Work every N steps inside the training step, from Python: a real loop that
checkpoints every 5 steps gets a summary naming the phase and its period and
a `periodic-spike` finding with the checkpointing fix; the spikes are plain
attributes that survive JSON and pickling."""

import pickle
import time

import pytest

import gpuscope as gs
from conftest import MS


def test_a_checkpoint_every_five_steps_is_found_in_a_real_loop():
    # 5 ms steps, a 50 ms save every 5th: steps 9, 14, ..., 39 of the
    # 32-step window (7 saves). Real sleeps: only the phase and the period
    # are asserted, and a share far below what the sleeps make it.
    s = gs.Session(window=32)
    for i in range(40):
        with s.step():
            with s.phase("forward"):
                time.sleep(0.005)
            if i % 5 == 4:
                with s.phase("checkpoint"):
                    time.sleep(0.05)
    sm = s.summary()
    assert sm.periodic_spikes, s.report()
    spike = sm.periodic_spikes[0]
    assert (spike.phase, spike.period_steps) == ("checkpoint", 5), s.report()
    assert spike.occurrences >= 6 and spike.share > 0.2
    finding = next((f for f in s.diagnose() if f.id == "periodic-spike"), None)
    assert finding is not None, [f.id for f in s.diagnose()]
    assert finding.title.startswith('Every 5 steps, phase "checkpoint" adds ')
    assert "async_save" in finding.recommendation
    assert finding.evidence["period_steps"] == 5
    assert "spikes      every 5 steps, phase checkpoint adds" in s.report()
    s.close()


def test_spikes_are_attributes_that_survive_json_and_pickle(clock):
    s = gs.Session(window=64, clock=clock)
    for i in range(50):
        with s.step():
            with s.phase("forward"):
                clock.advance(50 * MS)
            if i % 10 == 9:  # 1 s of evaluation every 10 steps
                with s.phase("eval"):
                    clock.advance(1000 * MS)
    sm = s.summary()
    [spike] = sm.periodic_spikes
    assert isinstance(spike, gs.PeriodicSpike)
    assert (spike.phase, spike.period_steps, spike.occurrences, spike.last_step) == ("eval", 10, 5, 49)
    assert spike.excess == pytest.approx(1.0) and spike.share == pytest.approx(5 / 7.5)
    # In the metrics, as docs/prometheus.md documents them.
    from test_prometheus import SPIKE_FAMILIES, check_documented, parse_exposition

    metrics = s.prometheus()
    assert SPIKE_FAMILIES <= check_documented(metrics)
    samples = parse_exposition(metrics)
    eval_phase = (("phase", "eval"),)
    assert samples[("gpuscope_periodic_spike_share_ratio", eval_phase)] == pytest.approx(spike.share)
    assert samples[("gpuscope_periodic_spike_period_steps", eval_phase)] == 10
    assert sm.to_dict()["periodic_spikes"][0]["period_steps"] == 10
    assert gs.Summary.from_json(sm.to_json()).periodic_spikes == [spike]
    assert pickle.loads(pickle.dumps(spike)) == spike
    s.close()


def test_the_html_report_lists_the_spikes(clock):
    from gpuscope import _html

    pytest.importorskip("matplotlib")
    s = gs.Session(window=64, clock=clock)
    for i in range(50):
        with s.step():
            with s.phase("forward"):
                clock.advance(50 * MS)
            if i % 10 == 9:
                with s.phase("eval"):
                    clock.advance(1000 * MS)
    text = _html.render_html(s.summary(), s.step_columns())
    assert '<h2>Periodic spikes</h2>' in text
    table = text[text.index('<table id="periodic-spikes">'):]
    table = table[:table.index("</table>")]
    # eval, every 10 steps, 5 in the window, the last at step 49, 1 s each,
    # 5 s of the window's 7.5 s.
    assert '<td class="name">eval</td><td>10</td><td>5</td><td>49</td>' in table
    assert "<td>66.7%</td>" in table
    quiet = gs.Session(window=64, clock=clock)
    for _ in range(20):
        with quiet.step():
            clock.advance(50 * MS)
    assert "Periodic spikes" not in _html.render_html(quiet.summary(), quiet.step_columns())
    s.close()
    quiet.close()
