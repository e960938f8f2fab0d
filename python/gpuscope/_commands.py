"""``gpuscope doctor`` and ``gpuscope compare``: their options and what they
do. ``_cli.py`` puts them on the command line; ``gpuscope run --baseline``
(``_runner.py``) takes compare's options and its comparison from here, so
that they are defined once. Nothing here imports ``_cli`` or ``_runner``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Callable, List, Optional

from . import _gpuscope
from ._baseline import DEFAULT_MAX_REGRESSION_PCT
from ._files import UnreadableFileError, read_capped, write_atomically
from ._noise import DEFAULT_MIN_STEPS, DEFAULT_STATISTIC, STATISTICS
from ._text import printable

# A doctor report is a few KiB: anything much larger is not one.
MAX_DOCTOR_FILE_BYTES = 16 << 20

# Usage (after "gpuscope doctor"); help, in the list of commands (rewrapped)
# and atop the command's help (as is); what follows the options in it.
DOCTOR_USAGE = "[--json] [--save FILE] [--baseline FILE]"
DOCTOR_HELP = "Node sanity check: GPUs, drivers, PCIe links, clocks, NUMA placement,\nCPU limits, memory and swap."
DOCTOR_EPILOG = """\
exit status: 0 when nothing failed and nothing differs from the baseline; 1
on a FAIL or a difference; 2 on a usage error, an unreadable baseline or a
--save that could not be written. It is read-only: it never changes a
setting. Colour only on a terminal, and not with NO_COLOR set."""

COMPARE_USAGE = "[options] BASE NEW"
COMPARE_HELP = "Compare two runs saved with session.save(path); exit 1 on a regression\npast the bound."
COMPARE_EPILOG = """\
compare tests the change of one statistic of the runs' step times
(--statistic, default p50) against their noise: the change with a 95 %
bootstrap confidence interval, a regression only when the whole interval
lies past the bound (--max-regression PCT, default 5). Files saved without
step times (an earlier gpuscope) are compared by the earlier rule, with a
note: p95 step time grown or throughput fallen by more than PCT %, or GPU
idle grown by more than PCT points. Text from the files is printed escaped.

exit status: 0 without a regression; 1 with one, and nothing else; 2, with
one line saying why, when a file cannot be used (missing, not a regular
file, too large, not a run file, or holding values no session produces), a
run has fewer than --min-steps steps (default 30), or the comparison could
not be made."""


def add_doctor_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--save", metavar="FILE", help="save the report as a known-good baseline")
    ap.add_argument("--baseline", metavar="FILE", help="compare with a baseline saved by --save")


def doctor(args: argparse.Namespace) -> int:
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
        # The report as ToJson(report) writes it, with the differences added.
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


def add_compare_options(ap: Any) -> None:
    """--max-regression, --statistic and --min-steps, on ``gpuscope compare``
    and on ``gpuscope run`` (for --baseline): their one definition. ``ap``
    is a parser or an argument group. compare_options_error() checks what
    a type cannot."""
    ap.add_argument("--max-regression", metavar="PCT", type=float, default=DEFAULT_MAX_REGRESSION_PCT,
                    help="allowed slowdown, in %%: a regression is called only when the whole confidence "
                         "interval of the change lies past it (default %(default)g)")
    ap.add_argument("--statistic", choices=STATISTICS, default=DEFAULT_STATISTIC,
                    help="what is compared: median (p50), p95 or mean step time, or throughput "
                         "(default %(default)s: robust to the slow steps a shared machine adds)")
    ap.add_argument("--min-steps", metavar="N", type=int, default=DEFAULT_MIN_STEPS,
                    help="refuse (exit 2) runs with fewer steps than this (default %(default)d)")


def compare_options_error(args: argparse.Namespace) -> Optional[str]:
    """What is wrong with the values of add_compare_options()'s options, or
    None."""
    if not math.isfinite(args.max_regression) or args.max_regression < 0:
        return "--max-regression must be a number, 0 or more"
    if args.min_steps < 2:
        return ("--min-steps must be a whole number, 2 or more (a confidence interval needs at least 2 steps "
                "per run)")
    return None


def add_compare_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("base", metavar="BASE", help="the baseline run")
    ap.add_argument("new", metavar="NEW", help="the run to check")
    add_compare_options(ap)


def compare(args: argparse.Namespace) -> int:
    error = compare_options_error(args)
    if error:
        print(f"gpuscope compare: {error}", file=sys.stderr)
        return 2
    return compare_files(args.base, args.new, args.max_regression, args.statistic, args.min_steps)


def compare_files(base_path: str, new_path: str, max_regression: float, statistic: str, min_steps: int) -> int:
    """Compares two run files as ``gpuscope compare`` does, printing what it
    finds: 0 without a regression, 1 with one, 2 when the files cannot be
    used. The options are checked (compare_options_error()) before."""
    from ._baseline import BaselineError, compare_runs, load_run_file

    try:
        base, base_meta, base_times = load_run_file(base_path)
        new, new_meta, new_times = load_run_file(new_path)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    except (RecursionError, MemoryError, ValueError) as e:
        # A file deep or odd enough to get past the checks: still one line, exit 2.
        print(f"gpuscope compare: cannot use these run files ({type(e).__name__}: {printable(str(e))[:200]}); "
              "save the runs again", file=sys.stderr)
        return 2
    try:
        lines, regressions = compare_runs(base, new, base_meta, new_meta, max_regression,
                                          base_step_times=base_times, new_step_times=new_times,
                                          statistic=statistic, min_steps=min_steps)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    print(f"gpuscope compare: {printable(base_path)} (baseline) -> {printable(new_path)}")
    for line in lines:
        print(line)
    if regressions:
        print("REGRESSION:")
        for r in regressions:
            print(f"  {r}")
        return 1
    print(f"no regression past {max_regression:g}%")
    return 0


def guarded(name: str, command: Callable[..., int], *args: Any) -> int:
    """Runs doctor or compare so that exit statuses mean one thing: whatever
    the files hold, output never raises (a lone surrogate in saved metadata,
    a terminal that is not UTF-8), and a failure of gpuscope itself is 2,
    never 1 (a regression, or a node that failed a check)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError):
            pass
    try:
        return command(*args)
    except BrokenPipeError:  # `gpuscope doctor | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - exit codes must mean one thing
        print(f"gpuscope {name}: could not finish ({type(e).__name__}: {printable(str(e))[:200]}); "
              "exit 2. If the input files are gpuscope's own, this is a gpuscope bug: please report it",
              file=sys.stderr)
        return 2
