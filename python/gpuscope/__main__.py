"""The gpuscope command line: ``gpuscope doctor`` (also ``python -m gpuscope
doctor``), the node sanity check of the troubleshooting playbook.

    gpuscope doctor                 # a table: OK / WARN / FAIL and the reason
    gpuscope doctor --json          # the report as JSON
    gpuscope doctor --save FILE     # also save it as a known-good baseline
    gpuscope doctor --baseline FILE # compare the node's facts with a baseline

Exit status: 0 when nothing failed and nothing differs from the baseline;
1 on a FAIL or a difference; 2 on a usage error, an unreadable baseline or a
--save that could not be written. Colour only on a terminal, and not with
NO_COLOR set.
Read-only: it never changes a setting.
"""

from __future__ import annotations

import argparse
import json
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


USAGE = "usage: gpuscope doctor [--json] [--save FILE] [--baseline FILE]"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip() if args else USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "doctor":
        try:
            return doctor(args[1:])
        except BrokenPipeError:  # `gpuscope doctor | head`
            sys.stderr.close()
            return 0
    print(f"gpuscope: unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
