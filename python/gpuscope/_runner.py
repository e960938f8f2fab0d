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

At exit (normal, an exception, ``sys.exit()`` or Ctrl-C) the report goes to
stderr and ``--out DIR`` (default ``gpuscope-<date>-<time>``, or under
torchrun ``gpuscope-<run id>``) gets ``run.json``, ``report.html`` (with
matplotlib) and ``trace.json``, one set per rank under a job
(``run.rank3.json``).
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback
from typing import List, Optional, Sequence, Tuple

USAGE = "usage: gpuscope run [--out DIR] [--no-report] [--no-html] (script.py | -m module) [args...]"


class _Options:
    def __init__(self) -> None:
        self.out: Optional[str] = None
        self.report = True
        self.html = True
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
        if a == "--out" and i + 1 < len(argv):
            o.out = argv[i + 1]
            i += 2
        elif a.startswith("--out="):
            o.out = a.split("=", 1)[1]
            i += 1
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


def run(argv: Sequence[str]) -> int:
    o, error = _parse(argv)
    if o is None:
        print(error or __doc__.strip(), file=sys.stderr if error else sys.stdout)
        return 2 if error else 0
    import gpuscope as gs
    from gpuscope._auto import AutoInstrument

    session = gs.default_session()
    auto: Optional[AutoInstrument] = None
    try:
        import torch  # noqa: F401 - the hooks are torch's

        auto = AutoInstrument(session)
        auto.install()
    except Exception as e:  # noqa: BLE001 - no torch: run the script, say so
        auto = None
        print(f"gpuscope run: no automatic instrumentation ({type(e).__name__}: {str(e)[:160]}); "
              "gs.step()/gs.phase() in the script still record", file=sys.stderr)

    if o.module is not None:
        sys.argv = [o.module, *o.args]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [o.script, *o.args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(o.script)))
    status = 0
    try:
        if o.module is not None:
            runpy.run_module(o.module, run_name="__main__", alter_sys=True)
        else:
            # By its absolute path, as `python script.py` names __main__'s
            # file in tracebacks.
            runpy.run_path(os.path.abspath(o.script), run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:  # sys.exit("message"): printed, status 1, as Python does
            print(code, file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        _finish(auto, session, o)
        raise  # Python's own handling: its traceback, status 130 / SIGINT
    except BaseException as e:  # noqa: BLE001 - the script's exception, reported as Python would
        _finish(auto, session, o)
        _print_script_traceback(e)
        return 1
    _finish(auto, session, o)
    return status


def _finish(auto: object, session: object, o: _Options) -> None:
    if auto is not None:
        auto.finish()  # type: ignore[attr-defined]
        auto.uninstall()  # type: ignore[attr-defined]
    sys.stdout.flush()
    _write_outputs(session, o)
