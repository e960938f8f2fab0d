"""gpuscope's numbers in real experiment trackers, read back with the
trackers' own readers (tests/python/_trackers_read.py), offline:
TensorBoard's event files, a W&B offline run's records, an MLflow file
store. For ``Session.log_to()`` in a plain loop, the Hugging Face Trainer's
``report_to`` and Lightning's loggers: the values at the steps the loop (or
the framework) logged at, the findings, the artifacts; and a tracker that
raises or hangs never stops the training."""

import os
import threading
import time

import pytest

import gpuscope as gs
from gpuscope.trackers import Sink, scalars

import _trackers_read as read

REQUIRE = os.environ.get("GPUSCOPE_REQUIRE_TRACKERS") == "1"  # make test-python: never skipped


def need(module):
    if REQUIRE:
        return __import__(module)
    return pytest.importorskip(module)


@pytest.fixture
def wandb_offline(tmp_path, monkeypatch):
    wandb = need("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "cache"))
    yield wandb
    if wandb.run is not None:
        wandb.run.finish()
    wandb.teardown()  # W&B reads its settings (WANDB_DIR) once per process otherwise


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    mlflow = need("mlflow")
    uri = "file:" + str(tmp_path / "mlruns")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 asks for it
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    mlflow.set_tracking_uri(uri)
    import mlflow.tracking.fluent as fluent

    start_run = fluent.start_run  # log_to("mlflow") without a run follows it
    yield uri
    while mlflow.active_run() is not None:
        mlflow.end_run()
    fluent.start_run = mlflow.start_run = start_run
    mlflow.set_experiment(experiment_id="0")  # the next store's default, not this test's


def input_bound_loop(s, gpu, steps, log=None, at=(), step_s=0.004):
    """Steps that wait on ``data`` most of the time (the input-bound
    finding), calling ``log.log(i)`` after step ``i`` for ``i`` in ``at``."""
    for i in range(1, steps + 1):
        with s.step(samples=8):
            with s.phase("data"):
                time.sleep(step_s)
            with s.phase("forward"):
                gpu.launch(1_000_000)
                time.sleep(gpu.synchronize() / 1e9)
        if i in at:
            log.log(i)


def sim_session(gpu):
    return gs.Session(simulated_device=gpu, stream=0, window=64)


# What is logged: the exposition's families.

def test_the_scalars_are_the_summarys_numbers_under_the_prometheus_names(gpu):
    s = sim_session(gpu)
    input_bound_loop(s, gpu, 20)
    sm = s.summary()
    values = scalars(sm)
    assert values["gpuscope/step_time_seconds/p95"] == pytest.approx(sm.step_time.p95, rel=1e-12)
    assert values["gpuscope/step_time_seconds/p50"] == pytest.approx(sm.step_time.p50, rel=1e-12)
    assert values["gpuscope/phase_share_ratio/data"] == pytest.approx(sm.phases["data"].share, rel=1e-12)
    assert values["gpuscope/gpu_idle_ratio"] == pytest.approx(sm.gpu_idle_pct / 100, rel=1e-12)
    assert values["gpuscope/gpu_idle_by_cause_ratio/data"] > 0.5
    assert values["gpuscope/finding_share_ratio/input-bound"] > 0.5
    assert values["gpuscope/steps_total"] == 20
    assert not any(k.startswith(("gpuscope/self_", "gpuscope/info", "gpuscope/misuse")) for k in values)
    assert scalars(sim_session(gpu).summary()) == {}  # nothing before the first step


def test_the_names_are_ones_every_tracker_takes_whatever_the_phase_is_called(gpu):
    import re

    s = sim_session(gpu)
    for _ in range(3):
        with s.step():
            with s.phase("fwd (amp)/<1>: ..."):
                time.sleep(0.001)
    values = scalars(s.summary())
    assert "gpuscope/phase_share_ratio/fwd _amp___1__ ..." in values, sorted(values)
    mlflow_name = re.compile(r"^[/\w.\- :]*$")  # MLflow's check (TensorBoard's is looser)
    assert all(mlflow_name.match(k) and "//" not in k and "/../" not in k for k in values), sorted(values)


# Session.log_to(), a plain loop.

def test_tensorboard_gets_the_scalars_at_the_steps_logged_and_the_final_ones(gpu, tmp_path):
    need("tensorboard")
    s = sim_session(gpu)
    log = s.log_to(f"tensorboard:{tmp_path / 'tb'}", every=0)
    input_bound_loop(s, gpu, 30, log, at=(10, 20))
    final = s.summary()
    log.close()
    assert log.errors == {} and log.sends == 3
    got = read.tensorboard_scalars(str(tmp_path / "tb"))
    p95 = got["gpuscope/step_time_seconds/p95"]
    assert [step for step, _ in p95] == [10, 20, 30]
    assert p95[-1][1] == pytest.approx(final.step_time.p95, rel=1e-6)  # float32 in the event file
    texts = read.tensorboard_texts(str(tmp_path / "tb"), "gpuscope/findings")
    assert texts and texts[0][0] == 10 and "| input-bound | high |" in texts[0][1], texts


def test_every_n_steps_logs_as_the_loop_passes_each_multiple(gpu, tmp_path):
    need("tensorboard")
    from gpuscope.trackers import TrackerLog, sink_for

    s = sim_session(gpu)
    log = TrackerLog(s, sink_for(f"tensorboard:{tmp_path / 'tb'}"), every=25, poll_s=0.05)
    input_bound_loop(s, gpu, 100, step_s=0.02)  # 25 steps: 0.5 s, ten polls
    log.close()
    steps = [st for st, _ in read.tensorboard_scalars(str(tmp_path / "tb"))["gpuscope/step_time_seconds/p95"]]
    assert steps[-1] == 100 and steps == sorted(set(steps))
    firsts = [min(st for st in steps if st >= m) for m in (25, 50, 75)]
    assert all(m <= st < m + 25 for m, st in zip((25, 50, 75), firsts)), steps


def test_log_without_a_step_logs_at_the_loops_count_warmup_included(gpu, tmp_path):
    need("tensorboard")
    s = gs.Session(simulated_device=gpu, stream=0, window=64, warmup=3)
    log = s.log_to(f"tensorboard:{tmp_path / 'tb'}", every=0)
    input_bound_loop(s, gpu, 12)
    log.log()
    log.log(step="not a step")  # left out, never raised
    time.sleep(0.5)
    input_bound_loop(s, gpu, 3)
    log.close()
    got = read.tensorboard_scalars(str(tmp_path / "tb"))["gpuscope/steps_total"]
    assert [st for st, _ in got] == [12, 15]  # the loop's count; steps_total leaves warm-up out
    assert [v for _, v in got] == [9, 12]


def test_a_wandb_run_gets_its_values_a_findings_table_an_alert_and_the_files(gpu, tmp_path, wandb_offline):
    s = sim_session(gpu)
    run = wandb_offline.init(project="gpuscope-test")
    log = s.log_to(run, every=0, alerts=True)
    for i in range(1, 31):
        input_bound_loop(s, gpu, 1)
        run.log({"loss": 1.0 / i}, step=i)
        if i in (10, 20):
            log.log(i)
            time.sleep(0.5)  # in the run's row before its next commit (two in one row: the last wins)
    log.close()
    run.finish()
    assert log.errors == {}
    rows = [r for r in read.wandb_history(str(tmp_path)) if "gpuscope/step_time_seconds/p95" in r]
    assert [r["gpuscope/step"] for r in rows] == [10, 20, 30]
    assert all(r["gpuscope/step_time_seconds/p95"] > 0.004 for r in rows)
    # commit=False: gpuscope's values join the script's rows, never rows of their own.
    assert max(r["_step"] for r in read.wandb_history(str(tmp_path))) == 30
    alerts = read.wandb_of_kind(str(tmp_path), "alert")
    assert [a.title for a in alerts] == ["gpuscope: input-bound (step 10)"]
    kinds = {a.type: a for a in read.wandb_of_kind(str(tmp_path), "artifact")}
    assert "run_table" in kinds  # the findings table
    files = {c.path for c in kinds["gpuscope"].manifest.contents}
    assert {"trace.json", "run.json"} <= files


def test_an_mlflow_run_gets_metrics_at_the_steps_findings_and_the_files(gpu, mlflow_store):
    mlflow = need("mlflow")
    s = sim_session(gpu)
    with mlflow.start_run() as run:
        log = s.log_to("mlflow", every=0)  # the active run, looked up on this thread
        input_bound_loop(s, gpu, 30, log, at=(10, 20))
        log.close()
    assert log.errors == {}
    history = read.mlflow_history(mlflow_store, run.info.run_id, "gpuscope/step_time_seconds/p95")
    assert [step for step, _ in history] == [10, 20, 30]
    assert history[-1][1] == pytest.approx(s.summary().step_time.p95, rel=1e-12)
    findings = read.mlflow_artifacts(mlflow_store, run.info.run_id, "gpuscope/findings")
    assert findings[0] == "gpuscope/findings/step-000000010.md", findings  # later ones: a change each
    text = mlflow.MlflowClient(mlflow_store).download_artifacts(run.info.run_id, findings[0])
    assert "| input-bound |" in open(text).read()
    assert {"gpuscope/run.json", "gpuscope/trace.json"} <= set(
        read.mlflow_artifacts(mlflow_store, run.info.run_id, "gpuscope"))


def test_mlflow_without_an_active_run_follows_the_run_the_script_starts(gpu, mlflow_store):
    mlflow = need("mlflow")
    s = sim_session(gpu)
    log = s.log_to("mlflow", every=0)  # as `gpuscope run --log-to mlflow` does, before the script
    input_bound_loop(s, gpu, 5)
    log.log(5)  # no run yet: nothing to log to
    mlflow.set_experiment("the-scripts-own")  # the script's own choices stand
    with mlflow.start_run() as run:
        input_bound_loop(s, gpu, 7)
        log.log(12)
        log.close()
    assert log.errors == {}
    assert read.mlflow_history(mlflow_store, run.info.run_id, "gpuscope/steps_total") == [(12, 12.0)]
    assert mlflow.get_experiment(run.info.experiment_id).name == "the-scripts-own"


# A tracker that fails never reaches the loop.

class Raising(Sink):
    name = "raising"

    def __init__(self):
        self.calls = 0

    def scalars(self, step, values):
        self.calls += 1
        raise ConnectionError("tracker down")


class Hanging(Sink):
    name = "hanging"

    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Event()

    def scalars(self, step, values):
        self.entered.set()
        self.release.wait(60)


def test_a_tracker_that_raises_is_said_once_switched_off_and_the_loop_goes_on(gpu, tmp_path, capfd):
    need("tensorboard")
    s = sim_session(gpu)
    bad = Raising()
    log = s.log_to([bad, f"tensorboard:{tmp_path / 'tb'}"], every=0)
    input_bound_loop(s, gpu, 30, log, at=(10, 20))
    log.close()
    assert bad.calls == 1
    assert "ConnectionError: tracker down" in log.errors["raising"]
    err = capfd.readouterr().err
    assert err.count("logging to raising failed") == 1, err
    # The other tracker still got every log.
    assert [st for st, _ in read.tensorboard_scalars(str(tmp_path / "tb"))["gpuscope/steps_total"]] == [10, 20, 30]


def test_a_tracker_that_hangs_never_holds_the_loop_its_exit_or_the_others(gpu, tmp_path, capfd):
    need("tensorboard")
    s = sim_session(gpu)
    hang = Hanging()
    log = s.log_to([hang, f"tensorboard:{tmp_path / 'tb'}"], every=0, timeout_s=0.5)
    input_bound_loop(s, gpu, 5, log, at=(5,))
    assert hang.entered.wait(10)
    t0 = time.monotonic()
    input_bound_loop(s, gpu, 100, log, at=tuple(range(1, 101)))  # more than the queue holds
    loop_s = time.monotonic() - t0
    time.sleep(0.3)
    t0 = time.monotonic()
    log.close()
    close_s = time.monotonic() - t0
    hang.release.set()
    assert loop_s < 100 * 0.004 + 1.0, loop_s  # the steps' own time, plus margin: nothing waited on it
    assert close_s < 0.5 + 0.3, close_s  # one timeout for the whole exit
    assert "has not returned" in log.errors["hanging"]
    assert capfd.readouterr().err.count("logging to hanging failed") == 1
    # The other tracker went on, to the final log.
    steps = [st for st, _ in read.tensorboard_scalars(str(tmp_path / "tb"))["gpuscope/steps_total"]]
    assert steps[0] == 5 and steps[-1] == 105 and len(steps) >= 3, steps


def test_log_to_refuses_what_it_cannot_log_to(gpu):
    s = sim_session(gpu)
    with pytest.raises(ValueError, match="tensorboard:DIR, wandb or mlflow"):
        s.log_to("tensorboard")
    with pytest.raises(TypeError, match="SummaryWriter, a wandb run"):
        s.log_to(object())
    with pytest.raises(ValueError, match="every must be a number of steps"):
        s.log_to(Raising(), every=-1)
    with pytest.raises(ValueError, match="at least one tracker"):
        s.log_to([])


# The Hugging Face Trainer: through the report_to integrations.

def logged_steps(history, key):
    return sorted({h["step"] for h in history if key in h})


def test_huggingface_report_to_tensorboard_has_gpuscope_at_the_trainers_logging_steps(tmp_path):
    need("tensorboard")
    need("transformers")
    from _frameworks import huggingface_train
    from gpuscope.integrations.huggingface import GpuscopeCallback

    cb = GpuscopeCallback(report=False)
    trainer = huggingface_train(tmp_path, cb, report_to=["tensorboard"], max_steps=6, accumulate=1,
                                logging_steps=2)
    (run_dir,) = [str(p) for p in (tmp_path / "runs").iterdir()]
    got = read.tensorboard_scalars(run_dir)
    loss_steps = [st for st, _ in got["train/loss"]]
    assert loss_steps == [2, 4, 6]
    assert [st for st, _ in got["gpuscope/step_time_seconds/p95"]] == loss_steps
    assert "gpuscope/phase_share_ratio/forward" in got
    assert not any(k.startswith("train/gpuscope") for k in got)  # not logged twice
    assert read.tensorboard_texts(run_dir, "gpuscope/findings")
    assert trainer.state.global_step == 6


def test_huggingface_report_to_wandb_and_mlflow(tmp_path, wandb_offline, mlflow_store):
    need("transformers")
    from _frameworks import huggingface_train
    from gpuscope.integrations.huggingface import GpuscopeCallback

    cb = GpuscopeCallback(report=False)
    trainer = huggingface_train(tmp_path, cb, report_to=["wandb", "mlflow"], max_steps=6, accumulate=1,
                                logging_steps=2)
    assert trainer.state.global_step == 6
    wandb_offline.run.finish()
    # W&B: rows that carry the Trainer's own x-axis, train/global_step.
    history = read.wandb_history(str(tmp_path))
    steps = sorted({r["train/global_step"] for r in history if "gpuscope/step_time_seconds/p95" in r})
    loss = sorted({r["train/global_step"] for r in history if "train/loss" in r})
    assert steps == loss == [2, 4, 6], history
    assert not any(k.startswith("train/gpuscope") for r in history for k in r)
    # MLflow: at the same steps as the Trainer's own loss.
    from mlflow.tracking import MlflowClient

    (run,) = MlflowClient(mlflow_store).search_runs([e.experiment_id for e in
                                                     MlflowClient(mlflow_store).search_experiments()])
    assert [st for st, _ in read.mlflow_history(mlflow_store, run.info.run_id, "gpuscope/steps_total")] == \
        [st for st, _ in read.mlflow_history(mlflow_store, run.info.run_id, "loss")] == [2, 4, 6]
    assert "gpuscope/trace.json" in read.mlflow_artifacts(mlflow_store, run.info.run_id, "gpuscope")


# Lightning: through trainer.loggers, at the logger's own steps.

@pytest.mark.parametrize("kind", ["tensorboard", "csv", "wandb", "mlflow"])
def test_lightning_loggers_have_gpuscope_where_the_modules_own_values_are(tmp_path, kind, request):
    need("lightning")
    from lightning.pytorch import loggers as pl_loggers

    from _frameworks import lightning_fit
    from gpuscope.integrations.lightning import GpuscopeCallback

    if kind == "tensorboard":
        need("tensorboard")
        logger = pl_loggers.TensorBoardLogger(str(tmp_path), name="tb")
    elif kind == "csv":
        logger = pl_loggers.CSVLogger(str(tmp_path), name="csv")
    elif kind == "wandb":
        request.getfixturevalue("wandb_offline")
        logger = pl_loggers.WandbLogger(project="gpuscope-test", save_dir=str(tmp_path), offline=True)
    else:
        uri = request.getfixturevalue("mlflow_store")
        logger = pl_loggers.MLFlowLogger(experiment_name="gpuscope-test", tracking_uri=uri)
    cb = GpuscopeCallback(report=False)
    lightning_fit(tmp_path, cb, loggers=[logger], max_steps=8, accumulate=1, log_every_n_steps=2)
    if kind == "tensorboard":
        got = read.tensorboard_scalars(logger.log_dir)
        own = [st for st, _ in got["train_loss"]]
        ours = [st for st, _ in got["gpuscope/step_time_seconds/p95"]]
    elif kind == "csv":
        import csv

        with open(os.path.join(logger.log_dir, "metrics.csv")) as f:
            rows = list(csv.DictReader(f))
        own = [int(r["step"]) for r in rows if r.get("train_loss")]
        ours = sorted({int(r["step"]) for r in rows if r.get("gpuscope/step_time_seconds/p95")})
    elif kind == "wandb":
        logger.experiment.finish()
        history = read.wandb_history(str(tmp_path))
        own = [r["trainer/global_step"] for r in history if "train_loss" in r]
        ours = sorted({r["trainer/global_step"] for r in history if "gpuscope/step_time_seconds/p95" in r})
        assert any(k.startswith("gpuscope/findings/") for r in history for k in r)  # the table
    else:
        own = [st for st, _ in read.mlflow_history(logger._tracking_uri, logger.run_id, "train_loss")]
        ours = [st for st, _ in read.mlflow_history(logger._tracking_uri, logger.run_id,
                                                      "gpuscope/step_time_seconds/p95")]
    assert own == [1, 3, 5, 7], own
    # Every step Lightning logged the module's values at, plus the last one.
    assert ours[:len(own)] == own and ours[len(own):] in ([], [8]), (own, ours)


# gpuscope run --log-to: an unmodified script.

HERE = os.path.dirname(os.path.abspath(__file__))
TRACKED = os.path.join(HERE, "runner_scripts", "tracked_loop.py")


def run_tracked(tmp_path, *flags, script_args=(), env=None):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "gpuscope", "run", "--out", str(tmp_path / "out"), "--no-html", "--no-report",
           *flags, TRACKED, *script_args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {}),
                                                                              "OMP_NUM_THREADS": "1"})
    return r


def saved_steps(tmp_path):
    import json

    return json.loads((tmp_path / "out" / "run.json").read_text())["summary"]["total_steps"]


def test_gpuscope_run_logs_an_unmodified_script_to_tensorboard(tmp_path):
    need("tensorboard")
    r = run_tracked(tmp_path, "--log-to", f"tensorboard:{tmp_path / 'tb'}", "--log-every", "10")
    assert r.returncode == 0, r.stderr
    assert f"gpuscope run: logging to tensorboard:{tmp_path / 'tb'} every 10 steps" in r.stderr
    steps = [st for st, _ in read.tensorboard_scalars(str(tmp_path / "tb"))["gpuscope/step_time_seconds/p95"]]
    assert steps[-1] == saved_steps(tmp_path) == 30 and steps == sorted(set(steps)), steps


def test_gpuscope_run_logs_to_the_wandb_run_the_script_starts(tmp_path, wandb_offline):
    r = run_tracked(tmp_path, "--log-to", "wandb", "--log-every", "10", script_args=["--wandb"])
    assert r.returncode == 0, r.stderr
    rows = [row for row in read.wandb_history(str(tmp_path)) if "gpuscope/step_time_seconds/p95" in row]
    assert rows and rows[-1]["gpuscope/step"] == saved_steps(tmp_path), rows
    assert "loss" in read.wandb_history(str(tmp_path))[0]


def test_gpuscope_run_logs_to_the_mlflow_run_the_script_starts(tmp_path, mlflow_store):
    from mlflow.tracking import MlflowClient

    r = run_tracked(tmp_path, "--log-to", "mlflow", "--log-every", "10", script_args=["--mlflow"])
    assert r.returncode == 0, r.stderr
    client = MlflowClient(mlflow_store)
    (run,) = client.search_runs(["0"])  # one run: the script resumed the one gpuscope made
    assert run.data.metrics.get("loss") is not None
    history = read.mlflow_history(mlflow_store, run.info.run_id, "gpuscope/steps_total")
    assert history[-1] == (30, 30.0), history
    assert run.info.status == "FINISHED"


def test_gpuscope_run_refuses_a_tracker_it_cannot_log_to(tmp_path):
    r = run_tracked(tmp_path, "--log-to", "comet")
    assert r.returncode == 2 and "--log-to comet: not a tracker (one of tensorboard:DIR, wandb or mlflow)" in r.stderr
    r = run_tracked(tmp_path, "--log-to", "wandb", "--log-every", "0")
    assert r.returncode == 2 and "--log-every 0 is not a number of steps >= 1" in r.stderr
