"""``gpuscope prometheus rules|dashboard``: the fleet's rule file and Grafana
dashboard on stdout. The thresholds' flags come from ``Thresholds``' fields."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from typing import List

from . import Baseline, Thresholds, dashboard, rules

USAGE = "{rules [--THRESHOLD VALUE ...] [--baseline RUN.json[=RUNS]] | dashboard [--title T]}"
HELP = ("Print Prometheus alerting and recording rules, or a Grafana dashboard, over the\n"
        "gpuscope_* series of instrumented jobs (docs/fleet.md).")
EPILOG = """\
rules: the rule file python/gpuscope/prometheus/alerts.yml ships, with the
thresholds the flags give (durations as Prometheus writes them: 90s, 10m,
3h). --baseline RUN.json adds a recording rule of that saved run's p95 step
time and an alert for the jobs whose run_id matches RUNS (a regex; default
all) when theirs is more than --baseline-ratio times it. Load the output with
Prometheus' rule_files; check it with `promtool check rules`.

dashboard: the Grafana dashboard's JSON model (fleet, one job, one rank),
for Dashboards > New > Import; its fleet panels read the recording rules.

exit status: 0 printed; 2 a flag or a baseline file is not usable (one line says why).
"""


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="what", metavar="{rules,dashboard}", required=True)
    r = sub.add_parser("rules", help="the rule file", description="The Prometheus rule file.",
                       prog="gpuscope prometheus rules")
    defaults = Thresholds()
    for f in fields(Thresholds):
        value = getattr(defaults, f.name)
        r.add_argument(_flag(f.name), dest=f.name, type=type(value), default=value,
                       metavar="DURATION" if isinstance(value, str) else "X",
                       help=f"(default {value})")
    r.add_argument("--baseline", action="append", default=[], metavar="RUN.json[=RUNS]",
                   help="a saved run to alert against, for the run_ids matching RUNS (repeatable)")
    d = sub.add_parser("dashboard", help="the Grafana dashboard", description="The Grafana dashboard.",
                       prog="gpuscope prometheus dashboard")
    d.add_argument("--title", default="gpuscope")
    d.add_argument("--datasource-uid", default=None, metavar="UID",
                   help="a Prometheus data source's uid (default: a variable to pick one)")


def run(args: argparse.Namespace) -> int:
    if args.what == "dashboard":
        json.dump(dashboard(args.title, args.datasource_uid), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    try:
        t = Thresholds(**{f.name: getattr(args, f.name) for f in fields(Thresholds)})
        baselines: List[Baseline] = []
        for spec in args.baseline:
            path, _, runs = spec.partition("=")
            baselines.append(Baseline.from_file(path, runs or ".+"))
        text = rules(t, baselines)
    except ValueError as e:  # BaselineError is one
        message = str(e)
        for f in fields(Thresholds):  # the flag's name, not the field's
            if message.startswith(f.name + ":"):
                message = _flag(f.name) + message[len(f.name):]
        print(f"gpuscope prometheus rules: {message}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
