"""The gpuscope command line (also ``python -m gpuscope``).

    gpuscope doctor                 # the node sanity check: OK / WARN / FAIL and the reason
    gpuscope doctor --json          # the report as JSON
    gpuscope doctor --save FILE     # also save it as a known-good baseline
    gpuscope doctor --baseline FILE # compare the node's facts with a baseline

    gpuscope compare BASE NEW [--max-regression PCT]
                                    # two runs saved with session.save(path)

doctor exits 0 when nothing failed and nothing differs from the baseline; 1
on a FAIL or a difference; 2 on a usage error, an unreadable baseline or a
--save that could not be written. It is read-only: it never changes a
setting. compare exits 1 when the new run's p95 step time grew, or its
throughput fell, by more than PCT % (default 5), or its GPU idle grew by more
than PCT points; 2 when a file cannot be used. Colour only on a terminal, and
not with NO_COLOR set.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import List, Optional, Sequence

from . import _gpuscope


def doctor(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpuscope doctor", description="Node sanity check: GPUs, drivers, "
                                 "PCIe links, clocks, NUMA placement, CPU limits, memory and swap.")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--save", metavar="FILE", help="save the report as a known-good baseline")
    ap.add_argument("--baseline", metavar="FILE", help="compare with a baseline saved by --save")
    args = ap.parse_args(list(argv))

    baseline: Optional[str] = None
    if args.baseline:
        try:
            with open(args.baseline, encoding="utf-8") as f:
                baseline = f.read()
        except OSError as e:
            print(f"gpuscope doctor: cannot read baseline {args.baseline}: {e.strerror}", file=sys.stderr)
            return 2
        except UnicodeDecodeError:
            print(f"gpuscope doctor: {args.baseline}: not a gpuscope doctor report (not text; write one "
                  "with gpuscope doctor --save FILE)", file=sys.stderr)
            return 2
    report = _gpuscope._doctor_json()
    diffs: List[str] = []
    if baseline is not None:
        try:
            diffs = _gpuscope._doctor_diff(baseline, report)
        except (ValueError, _gpuscope.GpuscopeError) as e:
            print(f"gpuscope doctor: {args.baseline}: {e}", file=sys.stderr)
            return 2
    save_error = ""
    if args.save:
        try:
            with open(args.save, "w", encoding="utf-8") as f:
                f.write(report)
        except OSError as e:
            save_error = f"gpuscope doctor: cannot write {args.save}: {e.strerror}"

    if args.json:
        out = json.loads(report)
        if baseline is not None:
            out["baseline_differences"] = diffs
        print(json.dumps(out, indent=2))
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write(_gpuscope._doctor_format(report, color))
        if baseline is not None:
            if diffs:
                print(f"differences from the baseline {args.baseline}:")
                for d in diffs:
                    print(f"  {d}")
            else:
                print(f"no differences from the baseline {args.baseline}")
        if args.save and not save_error:
            print(f"saved as a baseline: {args.save}")
    if save_error:  # after the report, which a failed save must not hide
        print(save_error, file=sys.stderr)
        return 2
    return 1 if _gpuscope._doctor_has_failures(report) or diffs else 0


def compare(argv: Sequence[str]) -> int:
    from ._baseline import DEFAULT_MAX_REGRESSION_PCT, BaselineError, compare_runs, load_run

    ap = argparse.ArgumentParser(prog="gpuscope compare", description="Compare two runs saved with "
                                 "session.save(path); exit 1 on a regression past the bound.")
    ap.add_argument("base", help="the baseline run")
    ap.add_argument("new", help="the run to check")
    ap.add_argument("--max-regression", metavar="PCT", type=float, default=DEFAULT_MAX_REGRESSION_PCT,
                    help="allowed growth of p95 step time and fall of throughput, in %%, and growth of "
                         "GPU idle, in points (default %(default)g)")
    args = ap.parse_args(list(argv))
    if not math.isfinite(args.max_regression) or args.max_regression < 0:
        print("gpuscope compare: --max-regression must be a number, 0 or more", file=sys.stderr)
        return 2
    try:
        base, base_meta = load_run(args.base)
        new, new_meta = load_run(args.new)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    except (RecursionError, MemoryError, ValueError) as e:
        # A file deep or odd enough to get past the checks: still one line, exit 2.
        print(f"gpuscope compare: cannot use these run files ({type(e).__name__}: {e}); save the runs again",
              file=sys.stderr)
        return 2
    try:
        lines, regressions = compare_runs(base, new, base_meta, new_meta, args.max_regression)
    except BaselineError as e:
        print(f"gpuscope compare: {e}", file=sys.stderr)
        return 2
    print(f"gpuscope compare: {args.base} (baseline) -> {args.new}")
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
         "       gpuscope compare BASE NEW [--max-regression PCT]")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() if args else USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    commands = {"doctor": doctor, "compare": compare}
    if args[0] in commands:
        try:
            return commands[args[0]](args[1:])
        except BrokenPipeError:  # `gpuscope doctor | head`
            sys.stderr.close()
            return 0
    print(f"gpuscope: unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
