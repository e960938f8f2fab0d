"""The gpuscope command line (also ``python -m gpuscope``).

    gpuscope doctor                 # the node sanity check: OK / WARN / FAIL and the reason
    gpuscope doctor --json          # the report as JSON
    gpuscope doctor --save FILE     # also save it as a known-good baseline
    gpuscope doctor --baseline FILE # compare the node's facts with a baseline

    gpuscope compare BASE NEW [--max-regression PCT] [--statistic p50|p95|mean|throughput]
                     [--min-steps N]
                                    # two runs saved with session.save(path)

    gpuscope run [--out DIR] [--no-report] [--no-html] train.py [args...]
    gpuscope run [options] -m package.module [args...]
                                    # an unmodified PyTorch script, instrumented
                                    # from outside (docs/zero-code.md)

doctor exits 0 when nothing failed and nothing differs from the baseline; 1
on a FAIL or a difference; 2 on a usage error, an unreadable baseline or a
--save that could not be written. It is read-only: it never changes a
setting. compare tests the change of one statistic of the runs' step times
(--statistic, default p50) against their noise: the change with a 95 %
bootstrap confidence interval, a regression only when the whole interval
lies past the bound (--max-regression PCT, default 5). It exits 0 without a
regression; 1 with one; 2, with one line saying why, when a file cannot be
used (missing, not a regular file, too large, not a run file, or holding
values no session produces), a run has fewer than --min-steps steps
(default 30), or the comparison could not be made. Files saved without step
times (an earlier gpuscope) are compared by the earlier rule, with a note:
p95 step time grown or throughput fallen by more than PCT %, or GPU idle
grown by more than PCT points. Exit 1 means a regression and nothing else.
Text from the files is printed escaped. Colour only on a terminal, and not
with NO_COLOR set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import List, Optional, Sequence

from . import _gpuscope
from ._files import UnreadableFileError, read_capped, write_atomically
from ._text import printable

# A doctor report is a few KiB: anything much larger is not one.
MAX_DOCTOR_FILE_BYTES = 16 << 20


def doctor(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpuscope doctor", description="Node sanity check: GPUs, drivers, "
                                 "PCIe links, clocks, NUMA placement, CPU limits, memory and swap.")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--save", metavar="FILE", help="save the report as a known-good baseline")
    ap.add_argument("--baseline", metavar="FILE", help="compare with a baseline saved by --save")
    args = ap.parse_args(list(argv))

    baseline: Optional[str] = None
    shown = printable(args.baseline) if args.baseline else ""
    if args.baseline:
        try:
            baseline = read_capped(args.baseline, MAX_DOCTOR_FILE_BYTES, "doctor report").decode("utf-8")
        except UnreadableFileError as e:
            print(f"gpuscope doctor: cannot use the baseline: {printable(str(e))}", file=sys.stderr)
            return 2
        except UnicodeDecodeError:
            print(f"gpuscope doctor: {shown}: not a gpuscope doctor report (not UTF-8 text; write one "
                  "with gpuscope doctor --save FILE)", file=sys.stderr)
            return 2
    report = _gpuscope.run_doctor()
    diffs: List[str] = []
    if baseline is not None:
        try:
            diffs = _gpuscope.DoctorReport.from_json(baseline).baseline_diff(report)
        except (ValueError, _gpuscope.GpuscopeError) as e:
            print(f"gpuscope doctor: {shown}: {printable(str(e))}", file=sys.stderr)
            return 2
    save_error = ""
    if args.save:
        try:
            write_atomically(args.save, report.to_json())
        except OSError as e:
            save_error = f"gpuscope doctor: {printable(str(e))}"

    if args.json:
        # The report as DoctorToJson writes it, with the differences added.
        out = json.loads(report.to_json())
        if baseline is not None:
            out["baseline_differences"] = diffs
        print(json.dumps(out, indent=2))
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write(report.format(color))
        if baseline is not None:
            if diffs:
                print(f"differences from the baseline {shown}:")
                for d in diffs:
                    print(f"  {printable(d)}")
            else:
                print(f"no differences from the baseline {shown}")
        if args.save and not save_error:
            print(f"saved as a baseline: {printable(args.save)}")
    if save_error:  # after the report, which a failed save must not hide
        print(save_error, file=sys.stderr)
        return 2
    return 1 if report.has_failures() or diffs else 0


def compare(argv: Sequence[str]) -> int:
    from ._baseline import (DEFAULT_MAX_REGRESSION_PCT, DEFAULT_MIN_STEPS, DEFAULT_STATISTIC, STATISTICS,
                            BaselineError, compare_runs, load_run_file)

    ap = argparse.ArgumentParser(prog="gpuscope compare", description="Compare two runs saved with "
                                 "session.save(path); exit 1 on a regression past the bound.")
    ap.add_argument("base", help="the baseline run")
    ap.add_argument("new", help="the run to check")
    ap.add_argument("--max-regression", metavar="PCT", type=float, default=DEFAULT_MAX_REGRESSION_PCT,
                    help="allowed slowdown, in %%: a regression is called only when the whole confidence "
                         "interval of the change lies past it (default %(default)g)")
    ap.add_argument("--statistic", choices=STATISTICS, default=DEFAULT_STATISTIC,
                    help="what is compared: median (p50), p95 or mean step time, or throughput "
                         "(default %(default)s: robust to the slow steps a shared machine adds)")
    ap.add_argument("--min-steps", metavar="N", type=int, default=DEFAULT_MIN_STEPS,
                    help="refuse (exit 2) runs with fewer steps than this (default %(default)d)")
    args = ap.parse_args(list(argv))
    if not math.isfinite(args.max_regression) or args.max_regression < 0:
        print("gpuscope compare: --max-regression must be a number, 0 or more", file=sys.stderr)
        return 2
    if args.min_steps < 2:
        print("gpuscope compare: --min-steps must be a whole number, 2 or more (a confidence interval "
              "needs at least 2 steps per run)", file=sys.stderr)
        return 2
    try:
        base, base_meta, base_times = load_run_file(args.base)
        new, new_meta, new_times = load_run_file(args.new)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    except (RecursionError, MemoryError, ValueError) as e:
        # A file deep or odd enough to get past the checks: still one line, exit 2.
        print(f"gpuscope compare: cannot use these run files ({type(e).__name__}: {printable(str(e))[:200]}); "
              "save the runs again", file=sys.stderr)
        return 2
    try:
        lines, regressions = compare_runs(base, new, base_meta, new_meta, args.max_regression,
                                          base_step_times=base_times, new_step_times=new_times,
                                          statistic=args.statistic, min_steps=args.min_steps)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    print(f"gpuscope compare: {printable(args.base)} (baseline) -> {printable(args.new)}")
    for line in lines:
        print(line)
    if regressions:
        print("REGRESSION:")
        for r in regressions:
            print(f"  {r}")
        return 1
    print(f"no regression past {args.max_regression:g}%")
    return 0


USAGE = ("usage: gpuscope doctor [--json] [--save FILE] [--baseline FILE]\n"
         "       gpuscope compare BASE NEW [--max-regression PCT] [--statistic STAT] [--min-steps N]\n"
         "       gpuscope run [--out DIR] [--no-report] [--no-html] (script.py | -m module) [args...]")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() if args else USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "run":
        # The script's exit status, output and exceptions are its own: none
        # of the handling below applies.
        from ._runner import run

        return run(args[1:])
    commands = {"doctor": doctor, "compare": compare}
    if args[0] in commands:
        # Whatever the files hold, output never raises (a lone surrogate in
        # saved metadata, a terminal that is not UTF-8).
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
            except (AttributeError, ValueError):
                pass
        try:
            return commands[args[0]](args[1:])
        except BrokenPipeError:  # `gpuscope doctor | head`
            sys.stderr.close()
            return 0
        except KeyboardInterrupt:
            return 130
        except SystemExit:
            raise  # argparse: usage errors exit 2 with their own message
        except BaseException as e:  # noqa: BLE001 - exit codes must mean one thing
            # Exit 1 means "regression" (compare) or "the node failed a check"
            # (doctor): a failure of gpuscope itself must not read as either.
            print(f"gpuscope {args[0]}: could not finish ({type(e).__name__}: {printable(str(e))[:200]}); "
                  "exit 2. If the input files are gpuscope's own, this is a gpuscope bug: please report it",
                  file=sys.stderr)
            return 2
    print(f"gpuscope: unknown command {printable(args[0])!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
