"""``gpuscope run``: an unmodified PyTorch script, instrumented from outside.

    gpuscope run [--out DIR] [--no-report] [--no-html] script.py [args...]
    gpuscope run [options] -m package.module [args...]
    python -m gpuscope run ...                 (the same)
    torchrun --nproc_per_node=N -m gpuscope run [options] train.py [args...]

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
the metrics (under a job on PORT + local rank). At exit (normal, an
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

import importlib
import os
import runpy
import sys
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

USAGE = ("usage: gpuscope run [--out DIR] [--no-report] [--no-html] [--status SECONDS] "
         "[--prometheus PORT] [--warmup STEPS] [--flops-per-step FLOPS [--peak-flops FLOPS] [--peak-precision P]] [--baseline FILE [--max-regression PCT] [--statistic STAT] [--min-steps N]] "
         "(script.py | -m module) "
         "[args...]")


PRECISIONS = ("bf16", "fp16", "tf32", "fp32", "fp8")


class _Options:
    def __init__(self) -> None:
        self.out: Optional[str] = None
        self.report = True
        self.html = True
        self.status = 10.0  # seconds between status lines; 0: none
        self.prometheus: Optional[int] = None
        self.baseline: Optional[str] = None
        self.max_regression: Optional[str] = None
        self.compare_options: List[str] = []  # --statistic, --min-steps: checked by compare
        self.session_options: Dict[str, Any] = {}  # --warmup, --flops-per-step, --peak-flops, --peak-precision
        self.module: Optional[str] = None
        self.script: Optional[str] = None
        self.args: List[str] = []


def _parse(argv: Sequence[str]) -> Tuple[Optional[_Options], Optional[str]]:
    """The runner's options, then the script (or -m module) and its args:
    everything after the script belongs to it."""
    o = _Options()
    i = 0
    argv = list(argv)
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            return None, None
        name, eq, inline = a.partition("=")
        if name in ("--out", "--status", "--prometheus", "--baseline", "--max-regression", "--statistic",
                    "--min-steps", "--warmup", "--flops-per-step", "--peak-flops", "--peak-precision"):
            if not eq and i + 1 >= len(argv):
                return None, f"gpuscope run: {name} needs a value"
            value = inline if eq else argv[i + 1]
            i += 1 if eq else 2
            if name == "--out":
                o.out = value
            elif name in ("--flops-per-step", "--peak-flops"):
                try:
                    flops = float(value)
                except ValueError:
                    flops = -1.0
                if not (0 <= flops < float("inf")):
                    return None, f"gpuscope run: {name} takes a number of FLOPs (0 or more, e.g. 3.2e15), not {value!r}"
                o.session_options[name[2:].replace("-", "_")] = flops
            elif name == "--warmup":
                if not value.isdigit():
                    return None, f"gpuscope run: --warmup takes a whole number of steps (0 or more), not {value!r}"
                o.session_options["warmup"] = int(value)
            elif name == "--peak-precision":
                if value not in PRECISIONS:
                    return None, f"gpuscope run: --peak-precision takes one of {', '.join(PRECISIONS)}, not {value!r}"
                o.session_options["peak_precision"] = value
            elif name == "--baseline":
                o.baseline = value
            elif name == "--max-regression":
                o.max_regression = value
            elif name in ("--statistic", "--min-steps"):
                # Checked now, not when the script has run for hours.
                from gpuscope._noise import STATISTICS

                if name == "--statistic" and value not in STATISTICS:
                    return None, f"gpuscope run: --statistic takes one of {', '.join(STATISTICS)}, not {value!r}"
                if name == "--min-steps" and not (value.isdigit() and int(value) >= 2):
                    return None, f"gpuscope run: --min-steps takes a whole number, 2 or more, not {value!r}"
                o.compare_options += [name, value]
            else:
                try:
                    number = float(value) if name == "--status" else int(value)
                except ValueError:
                    return None, f"gpuscope run: {name} takes a number, not {value!r}"
                if number < 0 or (name == "--prometheus" and number > 65535):
                    return None, f"gpuscope run: {name} {value} is out of range"
                if name == "--status":
                    o.status = float(number)
                else:
                    o.prometheus = int(number)
        elif a == "--no-report":
            o.report = False
            i += 1
        elif a == "--no-html":
            o.html = False
            i += 1
        elif a == "-m" and i + 1 < len(argv):
            o.module, o.args = argv[i + 1], argv[i + 2:]
            return o, None
        elif a.startswith("-"):
            return None, f"gpuscope run: unknown option {a!r}"
        else:
            o.script, o.args = a, argv[i + 1:]
            return o, None
    return None, "gpuscope run: no script given"


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


def run(argv: Sequence[str]) -> int:
    o, error = _parse(argv)
    if o is None:
        print(error or __doc__.strip(), file=sys.stderr if error else sys.stdout)
        return 2 if error else 0
    import gpuscope as gs
    from gpuscope._auto import AutoInstrument

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
    extras = (status, server, unguard)
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
        _finish(auto, session, o, extras)
        _print_script_traceback(e)
        return 1
    regression = _finish(auto, session, o, extras)
    # The script's own failure comes first; then a regression against the
    # baseline (1) or a baseline that could not be used (2), as `gpuscope
    # compare` says them.
    return code if code != 0 else regression


def _finish(auto: object, session: object, o: _Options, extras: Tuple[object, object, object]) -> int:
    """Ends the instrumentation, syncs the ranks of a job (at most 5 s),
    writes the outputs, and compares with the baseline. Returns the
    comparison's exit status (0 without a baseline)."""
    status, server, unguard = extras
    if status is not None:
        status.stop()  # type: ignore[attr-defined]
    if unguard is not None:
        unguard()  # type: ignore[operator]
    if auto is not None:
        auto.finish()  # type: ignore[attr-defined]
        auto.uninstall()  # type: ignore[attr-defined]
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
    from gpuscope.__main__ import compare
    from gpuscope._dist import rank_path

    new = rank_path(os.path.join(_out_dir(o), "run.json"))
    argv = ([o.baseline, new] + (["--max-regression", o.max_regression] if o.max_regression else [])
            + o.compare_options)
    try:
        return compare(argv)
    except SystemExit as e:  # argparse: a bad --max-regression
        return e.code if isinstance(e.code, int) else 2
