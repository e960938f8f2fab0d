"""``gpuscope run``: an unmodified PyTorch script, instrumented from outside.

    gpuscope run [--out DIR] [--no-report] [--no-html] script.py [args...]
    gpuscope run [options] -m package.module [args...]
    python -m gpuscope run ...                 (the same)
    torchrun --nproc_per_node=N -m gpuscope run [options] train.py [args...]

The options go before the script; everything after it (or after ``-m
module``) is the script's, untouched, even an argument that looks like an
option of ours. add_arguments() defines them for ``_cli.py``'s parser, and
``gpuscope run --help`` lists them.

The script runs as ``python script.py`` would run it: ``sys.argv`` is
``[script.py, args...]``, it runs as ``__main__`` with its directory first
on ``sys.path``, and its exit status, stdout and exceptions are its own. An
exception's traceback is printed as Python prints it, without the runner's
frames, and the status is 1. Steps and phases come from torch's hooks
(``_auto.py``; docs/zero-code.md); ``gs.phase()`` scopes in the script
record into the same session.

While it runs, a status line goes to stderr every ``--status`` seconds
(default 10; 0: none; rank 0 only under a job): step, p95 step time,
samples/s and tokens/s when steps carry counts, MFU with
``--flops-per-step`` (this rank's model FLOPs per optimizer step;
``--peak-flops``, ``--peak-precision`` as ``Session()`` takes them;
docs/mfu.md), GPU idle and its largest cause, the top finding. ``--warmup N``
leaves the first N steps (DataLoader workers starting, compilation, cuDNN
autotuning) out of the window and the run's numbers, reported apart, as
``Session(warmup=N)`` does. ``--prometheus PORT`` serves
the metrics (under a job on PORT + local rank); ``--push-prometheus URL``
pushes them to a Pushgateway every 15 s and at exit (docs/fleet.md);
``--run-id ID`` names the job in their ``run_id`` label; ``--log-to
TRACKER`` (``tensorboard:DIR``, ``wandb``, ``mlflow``) logs the numbers and
findings to an experiment tracker every ``--log-every`` steps and at exit
(docs/integrations.md). At exit (normal, an
exception, ``sys.exit()`` or Ctrl-C), under a job the ranks exchange their
records (at most 5 s), the report goes to stderr, ``--out DIR`` (default ``gpuscope-<date>-<time>``, or under
torchrun ``gpuscope-<run id>``) gets ``run.json``, ``report.html`` (with
matplotlib) and ``trace.json``, one set per rank under a job
(``run.rank3.json``), and with ``--baseline FILE`` the run is compared with
it as ``gpuscope compare FILE run.json --max-regression PCT`` would (with
``--statistic`` and ``--min-steps`` passed on): a
script that succeeded then exits 1 on a regression, 2 when the baseline
cannot be used.
"""

from __future__ import annotations

import argparse
import importlib
import os
import runpy
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

from ._commands import add_compare_options, compare_files, compare_options_error, guarded
from ._session import SESSION_OPTIONS

# The Session options `gpuscope run` takes as flags (--warmup, --flops-per-step,
# ...): those whose row in the table has a flag.
SESSION_FLAGS = tuple(o for o in SESSION_OPTIONS if o["flag"])


def _flag_name(option: Dict[str, Any]) -> str:
    return "--" + option["name"].replace("_", "-")

# The subcommand's usage (after "gpuscope run"), help and epilog (_cli.py).
USAGE = "[options] (script.py | -m module) [args...]"
HELP = "Run an unmodified PyTorch script (or -m module), instrumented from outside."
EPILOG = """\
Everything after the script (or -m module) is the script's, even what looks
like an option here: `gpuscope run train.py --out x` gives --out x to
train.py. gpuscope's options go before the script.

The script runs as `python script.py` would run it: sys.argv is
[script.py, args...], it runs as __main__ with its directory first on
sys.path (with -m, the current directory), and its stdout, exit status and
exceptions are its own (a traceback as Python prints it, without the
runner's frames). Steps and phases come from torch's hooks; gs.phase()
scopes in the script record into the same session. Under torchrun:
torchrun --nproc_per_node=N -m gpuscope run [options] train.py [args...]

At exit (normal, an exception, sys.exit() or Ctrl-C) the report goes to
stderr, and --out DIR gets run.json, trace.json and report.html (with
matplotlib), one set per rank under a job (run.rank3.json).

exit status: the script's own; when it succeeded and --baseline was given,
the comparison's: 1 on a regression, 2 when the baseline cannot be used.
A usage error exits 2 before the script starts."""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """run's options, then the script (or -m module) and its arguments:
    everything from the script on is the script's (argparse.REMAINDER),
    whatever it looks like. The values are checked by _options()."""
    ap.add_argument("--out", metavar="DIR",
                    help="where the files go (default gpuscope-<date>-<time>; under torchrun gpuscope-<run id>, "
                         "one directory for every rank)")
    ap.add_argument("--no-report", dest="report", action="store_false", help="no report on stderr at exit")
    ap.add_argument("--no-html", dest="html", action="store_false", help="no report.html")
    ap.add_argument("--status", metavar="SECONDS",
                    help="a status line on stderr every SECONDS (default 10; 0: none); under a job, rank 0 only")
    ap.add_argument("--prometheus", metavar="PORT",
                    help="serve the metrics at http://127.0.0.1:PORT/metrics (under a job, PORT + local rank)")
    ap.add_argument("--push-prometheus", metavar="URL",
                    help="push the metrics to the Pushgateway at URL every 15 s and at exit")
    ap.add_argument("--log-to", metavar="TRACKER", action="append", default=[],
                    help="log the numbers and findings to tensorboard:DIR, wandb (the run the script starts) "
                         "or mlflow (the script's run); repeatable; under a job, rank 0 only")
    ap.add_argument("--log-every", metavar="STEPS", default="100",
                    help="log to the trackers every STEPS steps (default 100) and at exit")
    for option in SESSION_FLAGS:
        values, help_text = option["values"], option["flag_help"]
        if values:
            help_text += f": {', '.join(values)} (default {option['default']})"
        ap.add_argument(_flag_name(option), dest=option["name"], metavar=option["flag"], help=help_text)
    group = ap.add_argument_group("comparison with a baseline, as gpuscope compare FILE run.json does")
    group.add_argument("--baseline", metavar="FILE", help="compare the run with FILE at exit")
    add_compare_options(group)  # gpuscope compare's own; checked before the script starts
    ap.add_argument("-m", dest="module", action="store_true",
                    help="run a module, as python -m does: the first argument after the options is its name")
    ap.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args...]",
                    help="the script (or -m module) and its arguments, passed to it untouched")


class _Options:
    """What the runner needs to know, from _options()."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.out: Optional[str] = args.out
        self.report: bool = args.report
        self.html: bool = args.html
        self.status = 10.0  # seconds between status lines; 0: none
        self.prometheus: Optional[int] = None
        self.push: Optional[str] = args.push_prometheus
        self.log_to: List[str] = list(args.log_to)
        self.log_every = 100
        self.baseline: Optional[str] = args.baseline
        self.max_regression: float = args.max_regression
        self.statistic: str = args.statistic
        self.min_steps: int = args.min_steps
        self.session_options: Dict[str, Any] = {}  # --warmup, --flops-per-step, --peak-flops, --peak-precision
        self.module: Optional[str] = None
        self.script: Optional[str] = None
        self.args: List[str] = []


def _options(args: argparse.Namespace) -> Tuple[Optional[_Options], Optional[str]]:
    """The parsed options checked (before the script runs, not after hours
    of training), or what is wrong with them."""
    o = _Options(args)
    for option in SESSION_FLAGS:
        value = getattr(args, option["name"])
        if value is None:
            continue
        parsed, error = _flag_value(option, value)
        if error:
            return None, error
        o.session_options[option["name"]] = parsed
    for name, value in (("--status", args.status), ("--prometheus", args.prometheus)):
        if value is None:
            continue
        try:
            number = float(value) if name == "--status" else int(value)
        except ValueError:
            return None, f"{name} takes a number, not {value!r}"
        if number < 0 or (name == "--prometheus" and number > 65535):
            return None, f"{name} {value} is out of range"
        if name == "--status":
            o.status = float(number)
        else:
            o.prometheus = int(number)
    error = _check_trackers(o, args.log_every)
    if error:
        return None, error
    if o.push is not None:
        from ._fleet import check_gateway

        error = check_gateway(o.push)
        if error:
            return None, f"--push-prometheus: {error}"
    error = compare_options_error(args)
    if error:
        return None, error
    target = list(args.target)
    if target[:1] == ["--"]:  # the end of gpuscope's options, as in any command
        target = target[1:]
    if not target:
        return None, "-m needs a module name" if args.module else "no script given"
    if args.module:
        o.module = target[0]
    else:
        o.script = target[0]
    o.args = target[1:]
    return o, None


def _flag_value(option: Dict[str, Any], value: str) -> Tuple[Any, Optional[str]]:
    """A Session option's flag as Session() takes it, checked against the
    table's values or range; or what is wrong with it."""
    flag = _flag_name(option)
    if option["values"]:
        if value not in option["values"]:
            return None, f"{flag} takes one of {', '.join(option['values'])}, not {value!r}"
        return value, None
    if option["range"] is None:  # a str (run_id): Session() checks it
        if len(value.encode("utf-8", "surrogateescape")) > 256 or not value:
            return None, f"{flag} takes a non-empty id of at most 256 bytes, not {value!r}"
        return value, None
    lo, hi = option["range"]
    if isinstance(option["default"], int):
        if not (value.isascii() and value.isdigit() and lo <= int(value) <= hi):
            return None, f"{flag} takes a whole number of {option['unit']} ({lo} to {hi}), not {value!r}"
        return int(value), None
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    # None by default and a range from 0: a number above 0 (stall_after);
    # else from lo, as the FLOPs take it.
    above = option["default"] is None and lo == 0
    if not ((number > lo if above else number >= lo) and number <= hi and number < float("inf")):
        example = "" if above else ", e.g. 3.2e15"
        return None, (f"{flag} takes a number of {option['unit']} "
                      f"({'above' if above else 'from'} {lo:g}{example}), not {value!r}")
    return number, None


def _out_dir(o: _Options) -> str:
    if o.out:
        return o.out
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id and run_id != "none":  # every rank of a job: one directory
        return f"gpuscope-{run_id}"
    return time.strftime("gpuscope-%Y%m%d-%H%M%S")


def _write_outputs(session: object, o: _Options) -> None:
    """The report on stderr and the files; never raises (the script's own
    outcome must reach the caller)."""
    import gpuscope as gs

    s: gs.Session = session  # type: ignore[assignment]
    try:
        if o.report:
            print(s.report(), file=sys.stderr)
        out = _out_dir(o)
        os.makedirs(out, exist_ok=True)
        written = [s.save(os.path.join(out, "run.json")), s.save_trace(os.path.join(out, "trace.json"))]
        if o.html:
            try:
                written.append(s.save_html(os.path.join(out, "report.html")))
            except ImportError:
                print("gpuscope run: no report.html (pip install matplotlib)", file=sys.stderr)
        print(f"gpuscope run: wrote {', '.join(written)}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the script's outcome comes first
        print(f"gpuscope run: could not write the outputs ({type(e).__name__}: {str(e)[:200]})",
              file=sys.stderr)


def _print_script_traceback(e: BaseException) -> None:
    """The traceback as ``python script.py`` prints it: the runner's frames
    (this module, runpy) left out."""
    ours = (os.path.abspath(__file__), os.path.abspath(runpy.__file__))
    tb = e.__traceback__
    while tb is not None and (os.path.abspath(tb.tb_frame.f_code.co_filename) in ours
                              or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")):
        tb = tb.tb_next
    traceback.print_exception(type(e), e, tb, file=sys.stderr)


def _rate(per_second: float, unit: str) -> str:
    """1234.5 -> "1.23k samples/s"."""
    for scale, prefix in ((1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.2f}{prefix} {unit}/s"
    return f"{per_second:.1f} {unit}/s"


def status_line(session: object) -> Optional[str]:
    """One line on where the run stands: steps, p95 step time, throughput
    and MFU (when known), GPU idle and its largest cause, the top finding.
    None before the first step."""
    import gpuscope as gs

    s: gs.Session = session  # type: ignore[assignment]
    sm = s.summary()
    if sm.steps == 0:
        return None
    line = f"gpuscope: step {sm.total_steps} | p95 {sm.step_time.p95 * 1e3:.1f} ms"
    rates = [_rate(v, unit) for v, unit in ((sm.samples_per_second, "samples"),
                                             (sm.tokens_per_second, "tokens")) if v is not None]
    if rates:
        line += " | " + ", ".join(rates)
    eff = sm.efficiency
    if eff is not None and eff.mfu is not None:
        line += f" | MFU {eff.mfu * 100:.1f}%"
    if sm.gpu_idle_pct is not None:
        line += f" | GPU idle {sm.gpu_idle_pct:.0f}%"
        if sm.idle_by_cause:
            cause = max(sm.idle_by_cause.items(), key=lambda kv: kv[1])[0]
            line += f" ({gs._gpuscope.escape_for_terminal(cause.encode())})"
    top = next((f for f in gs.diagnose_summary(sm) if f.severity != "info"), None)
    if top is not None:
        line += f" | top: {top.id} {top.share * 100:.0f}%"
    return line


class _StatusLine:
    """Prints status_line() to stderr every `interval` seconds from a daemon
    thread (rank 0 only under a job), until stopped."""

    def __init__(self, session: object, interval: float) -> None:
        import threading

        self._session = session
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuscope-status", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                line = status_line(self._session)
                if line is not None:
                    print(line, file=sys.stderr, flush=True)
            except Exception:  # noqa: BLE001 - a status line must never disturb the run
                pass

    def stop(self) -> None:
        """Stops the thread and waits for a line in progress (at most 2 s), so
        that none is printed into the report that follows."""
        self._stop.set()
        self._thread.join(timeout=2.0)


def run(args: argparse.Namespace) -> int:
    """``gpuscope run``, its options parsed by _cli.py's parser."""
    o, error = _options(args)
    if o is None:
        print(f"gpuscope run: {error}", file=sys.stderr)
        return 2
    import gpuscope as gs
    from gpuscope import _memory
    from gpuscope._auto import AutoInstrument

    # One directory for the whole run, named now: the outputs at the end and
    # an out-of-memory error's allocator snapshot on the way go there.
    o.out = _out_dir(o)
    _memory.snapshot_dir = o.out

    # The runner owns the process: its session may take an older CUPTI
    # (cupti=True), and hands it to torch.profiler if the script starts one.
    # It is the default session, so that gs.phase() in the script records
    # into it.
    if o.session_options.get("flops_per_step"):
        try:  # so that the session can read the GPU's name for the peak table
            importlib.import_module("torch")
        except ImportError:
            pass
    with gs._default_lock:
        if gs._default is None:
            gs._default = gs.Session(cupti=True, **o.session_options)
        session = gs._default
    auto: Optional[AutoInstrument] = None
    unguard = None
    try:
        import torch  # noqa: F401 - the hooks are torch's

        from gpuscope._auto import guard_profiler

        auto = AutoInstrument(session)
        auto.install()
        unguard = guard_profiler(session)
    except Exception as e:  # noqa: BLE001 - no torch: run the script, say so
        auto = None
        print(f"gpuscope run: no automatic instrumentation ({type(e).__name__}: {str(e)[:160]}); "
              "gs.step()/gs.phase() in the script still record", file=sys.stderr)

    from gpuscope._dist import identity

    ident = identity()
    status = _StatusLine(session, o.status) if o.status > 0 and (ident is None or ident.rank == 0) \
        else None
    server = None
    if o.prometheus is not None:
        port = o.prometheus + (ident.local_rank if ident is not None and o.prometheus else 0)
        try:
            server = session.serve_prometheus(port)
            print(f"gpuscope run: metrics at http://127.0.0.1:{server.port}/metrics", file=sys.stderr)
        except OSError as e:
            print(f"gpuscope run: no metrics server on port {port} ({e})", file=sys.stderr)
    if o.push is not None:
        session.push_prometheus(o.push)  # pushed at exit by its own atexit hook, after the script's
        print(f"gpuscope run: pushing metrics to {o.push} every 15 s", file=sys.stderr)
    trackers = None
    if o.log_to and (ident is None or ident.rank == 0):
        try:
            trackers = session.log_to(o.log_to, every=o.log_every)
            print(f"gpuscope run: logging to {', '.join(o.log_to)} every {o.log_every} steps", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - the script runs without it
            print(f"gpuscope run: not logging to {', '.join(o.log_to)} ({type(e).__name__}: {e})",
                  file=sys.stderr)
    extras = (status, server, unguard, trackers)
    if o.module is not None:
        sys.argv = [o.module, *o.args]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [o.script, *o.args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    code = 0
    try:
        if o.module is not None:
            runpy.run_module(o.module, run_name="__main__", alter_sys=True)
        else:
            # By its absolute path, as `python script.py` names __main__'s
            # file in tracebacks.
            runpy.run_path(os.path.abspath(o.script), run_name="__main__")
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:  # sys.exit("message"): printed, status 1, as Python does
            print(e.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        _finish(auto, session, o, extras)
        raise  # Python's own handling: its traceback, status 130 / SIGINT
    except BaseException as e:  # noqa: BLE001 - the script's exception, reported as Python would
        # A CUDA out-of-memory error that no scope saw end (it left the
        # step between the hooks' phases): recorded with what is open now.
        session._record_oom(e)
        _finish(auto, session, o, extras)
        _print_script_traceback(e)
        return 1
    regression = _finish(auto, session, o, extras)
    # The script's own failure comes first; then a regression against the
    # baseline (1) or a baseline that could not be used (2), as `gpuscope
    # compare` says them.
    return code if code != 0 else regression


def _check_trackers(o: _Options, every: str) -> Optional[str]:
    """--log-to and --log-every, checked before the script starts: the
    spelling, and that the tracker's package is installed."""
    import importlib.util

    from .trackers._sinks import SPECS

    if not every.isdigit() or not 0 < int(every) <= 10**9:
        return f"--log-every {every} is not a number of steps >= 1"
    o.log_every = int(every)
    needs = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
    for spec in o.log_to:
        kind, _, arg = spec.partition(":")
        if kind not in needs or (kind == "tensorboard") != bool(arg):
            return f"--log-to {spec}: not a tracker (one of {SPECS})"
        if importlib.util.find_spec(needs[kind]) is None:
            return f"--log-to {spec}: {needs[kind]} is not installed (pip install {needs[kind]})"
    return None


def _finish(auto: object, session: object, o: _Options, extras: Tuple[object, object, object, object]) -> int:
    """Ends the instrumentation, syncs the ranks of a job (at most 5 s),
    writes the outputs, and compares with the baseline. Returns the
    comparison's exit status (0 without a baseline)."""
    status, server, unguard, trackers = extras
    if status is not None:
        status.stop()  # type: ignore[attr-defined]
    if unguard is not None:
        unguard()  # type: ignore[operator]
    if auto is not None:
        auto.finish()  # type: ignore[attr-defined]
        auto.uninstall()  # type: ignore[attr-defined]
    if trackers is not None:  # before the trackers' own exit hooks end their runs
        trackers.close()  # type: ignore[attr-defined]
    sys.stdout.flush()
    try:
        session.sync_ranks(timeout_s=5.0)  # type: ignore[attr-defined]  # None outside a job
    except Exception:  # noqa: BLE001
        pass
    _write_outputs(session, o)
    if server is not None:
        server.close()  # type: ignore[attr-defined]
    if o.baseline is None:
        return 0
    from gpuscope._dist import rank_path

    new = rank_path(os.path.join(_out_dir(o), "run.json"))
    return guarded("compare", compare_files, o.baseline, new, o.max_regression, o.statistic, o.min_steps)
