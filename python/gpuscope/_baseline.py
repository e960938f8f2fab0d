"""Saved runs and their comparison: ``Session.save(path)`` and ``gpuscope
compare BASE NEW [--max-regression PCT]``.

A run file is JSON::

    {"schema": "gpuscope.run", "schema_version": 1,
     "metadata": {...},            # where and how the run was made
     "summary": {...},             # Summary.to_json(), schema in docs/json-schema.md
     "findings": [...],            # the diagnosis, for reading (compare recomputes it)
     "step_times": [...]}          # the window's step times, s, in step order

When both runs hold step times, the comparison tests one statistic (p50 by
default, p95, mean or throughput) against the runs' own noise: the change
and its bootstrap confidence interval (``_noise.py``), a regression only
when the whole interval lies past the bound. A run file without step times
(written before they were saved) is compared by the earlier rule: p95 step
time (may not grow by more than PCT %), throughput (may not fall by more
than PCT %; samples/s, else tokens/s, else steps/s) and GPU idle % (may not
grow by more than PCT percentage points), with a note. See
docs/baselines.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import _gpuscope
from ._noise import DEFAULT_MIN_STEPS, DEFAULT_STATISTIC, STATISTICS, StepTimeChange, compare_step_times
from ._files import UnreadableFileError, read_capped, write_atomically
from ._metadata import run_metadata
from ._summary import Summary, diagnose_summary
from ._text import printable

RUN_SCHEMA = "gpuscope.run"
RUN_SCHEMA_VERSION = 1
DEFAULT_MAX_REGRESSION_PCT = 5.0
# A run file is a summary (a few hundred KiB with every phase) and metadata:
# anything larger is not one, and is refused before it is read.
MAX_RUN_FILE_BYTES = 64 << 20
RUN_FILE_MODE = 0o600  # a new run file: its metadata names hosts, users and paths
# The most phase names a session holds: Options::max_phases is at most
# kMaxPhases (include/gpuscope/options.h; the extension does not expose it,
# and tests/python/test_compare.py checks this against Session(max_phases=)).
# The nine built-in names are in every session's table, used or not, so a
# summary lists at most MAX_PHASE_NAMES - 9 other names, the built-in ones it
# used and "other". A run file listing more was not written by gpuscope, and
# is refused before its summary is read.
MAX_PHASE_NAMES = 4096
BUILTIN_PHASES = ("data", "h2d", "forward", "backward", "optimizer", "comm", "sync", "eval", "checkpoint")
# The longest integer a run file holds: Python's default limit on converting
# one (sys.int_info.default_max_str_digits, 4300 digits; a summary's have at
# most 19), whatever the interpreter is set to: lifted, converting a 60 MB
# number would take hours (quadratic in the digits before Python 3.12).
MAX_INT_DIGITS = 4300


class BaselineError(ValueError):
    """A run file that cannot be used, with what to do about it."""


class RunFile(NamedTuple):
    """A run file read by ``load_run_file()``: ``step_times`` is None in a
    file written before step times were saved."""

    summary: Summary
    metadata: Dict[str, Any]
    step_times: Optional[List[float]]


def _step_times_json(step_times: Sequence[float]) -> Optional[str]:
    """The step times as a one-line JSON array (float repr, as json.dumps
    writes a float), or None when one is not a time a session measures
    (then the file is written without them: compare falls back to the
    earlier rule rather than the job failing to save)."""
    out = []
    for t in step_times:
        t = float(t)
        if not (math.isfinite(t) and t >= 0):
            return None
        out.append(repr(t))
    return "[" + ", ".join(out) + "]"


def save_run(path: "os.PathLike[str] | str", summary: Summary, dataset: Optional[str] = None,
             extra: Optional[Dict[str, Any]] = None, mode: Optional[int] = None, *,
             step_times: Optional[Sequence[float]] = None) -> str:
    """Writes a run file atomically (a reader never sees half of one). The
    metadata may name hosts, users and paths: a new file is readable by its
    owner only (0600) unless ``mode`` says otherwise; a file of ours being
    replaced keeps its mode, one of another user's does not. ``step_times``
    (seconds, in step order: the window's, ``Session.save()`` gives them)
    let ``gpuscope compare`` tell a change from noise."""
    # The envelope and the metadata are Python's (json.dumps); the summary and
    # findings are appended as the C++ core writes them, so they are never
    # turned into Python data and back. The document means what json.dumps
    # wrote for all of it before (same keys, order and indentation); only
    # non-ASCII text in the summary and findings is now raw UTF-8 where
    # json.dumps wrote \u escapes.
    head = json.dumps({
        "schema": RUN_SCHEMA,
        "schema_version": RUN_SCHEMA_VERSION,
        "metadata": run_metadata(dataset, extra),
    }, indent=2)
    text = _gpuscope._run_file_json(head, summary, diagnose_summary(summary))
    times = None if step_times is None else _step_times_json(step_times)
    if times is not None:
        # Last, on one line: the document ends "\n}\n" (RunFileJson).
        text = text[:text.rindex("\n}")] + ',\n  "step_times": ' + times + "\n}\n"
    return write_atomically(path, text, mode=mode, new_file_mode=RUN_FILE_MODE)


def load_run(path: str) -> Tuple[Summary, Dict[str, Any]]:
    """The summary and metadata of a run file (``load_run_file()`` without
    the step times)."""
    run = load_run_file(path)
    return run.summary, run.metadata


def _check_step_times(shown: str, value: Any, summary: Summary) -> List[float]:
    def bad(what: str) -> BaselineError:
        return BaselineError(f"{shown}: {what}, which no gpuscope run file holds (edited or corrupt?); "
                             "save the run again, or delete the step_times field to compare by p95 alone")

    if not isinstance(value, list):
        raise bad(f"step_times is {printable(type(value).__name__)}, not a list of seconds")
    if len(value) > summary.window:
        raise bad(f"step_times holds {len(value)} steps, more than the window ({summary.window})")
    for i, t in enumerate(value):
        # bool is an int in Python: `true` is not a time.
        if type(t) not in (int, float) or not t >= 0:
            raise bad(f"step_times[{i}] is {printable(json.dumps(t)[:40])}, not a step time in "
                      "seconds (0 or more)")
    return [float(t) for t in value]


def _check_phase_count(shown: str, phases: Any) -> None:
    """BaselineError when a summary's ``phases`` lists more than a session
    holds (see MAX_PHASE_NAMES); anything else is left to the summary's
    reader."""
    if not isinstance(phases, list):
        return
    not_named = frozenset(BUILTIN_PHASES) | {"other"}
    named = sum(1 for p in phases
                if not (isinstance(p, dict) and isinstance(p.get("name"), str) and p["name"] in not_named))
    most_named = MAX_PHASE_NAMES - len(BUILTIN_PHASES)
    if named > most_named or len(phases) > MAX_PHASE_NAMES + 1:
        raise BaselineError(
            f"{shown}: its summary lists {len(phases)} phases, {named} of them not built-in, more than a session "
            f"holds ({MAX_PHASE_NAMES} phase names at most, the highest max_phases, the {len(BUILTIN_PHASES)} "
            f"built-in ones among them: {most_named} others, and \"other\"); it is not a run file gpuscope wrote "
            "(edited or corrupt?): save the run again")


def load_run_file(path: str) -> RunFile:
    """The summary, metadata and step times of a run file; BaselineError
    saying what is wrong with it otherwise. Only a regular file of at most
    MAX_RUN_FILE_BYTES is read (a device, a FIFO or a huge file is refused
    before reading), and every field of its summary is checked against the
    range a session can produce (as ``Summary.from_json`` does); more phases
    than a session holds (MAX_PHASE_NAMES) are refused before that. The file
    is parsed once (a second time only to name an integer too long for
    Python)."""
    shown = printable(path)
    try:
        data = read_capped(path, MAX_RUN_FILE_BYTES, "run file")
    except UnreadableFileError as e:
        raise BaselineError(printable(str(e))) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BaselineError(f"{shown}: not a gpuscope run file (not UTF-8 text); write one with "
                            "session.save(path)") from None
    if not text.strip():
        raise BaselineError(f"{shown}: empty file; write a run with session.save(path)")
    def not_finite(token: str) -> float:
        # Python reads NaN, Infinity and 1e400; gpuscope never writes them.
        raise BaselineError(f"{shown}: holds the number {printable(token)[:24]}, which no gpuscope run file "
                            "holds (edited or corrupt?); save the run again")

    def finite(token: str) -> float:
        value = float(token)
        return value if math.isfinite(value) else not_finite(token)

    def whole(token: str) -> int:
        # Python's own ValueError would name no file and suggest
        # sys.set_int_max_str_digits().
        digits = len(token) - token.startswith("-")
        if digits <= MAX_INT_DIGITS:
            try:
                return int(token)
            except ValueError:  # the interpreter's limit is set lower
                pass
        at = text.find(token)  # a run of this many digits: the token itself
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        key = re.search(r'"((?:[^"\\]|\\.){1,64})"\s*:\s*$', text[max(0, at - 200):at])
        where = f"field {printable(key.group(1))!r} " if key else ""
        raise BaselineError(f"{shown}: {where}holds an integer of {digits} digits (line {line}, column {column}), "
                            f"which no gpuscope run file holds (its integers have at most {MAX_INT_DIGITS}); "
                            "the file is corrupt or not a gpuscope run file: save the run again")

    def parse(**hooks: Any) -> Any:
        try:
            return json.loads(text, parse_constant=not_finite, parse_float=finite, **hooks)
        except json.JSONDecodeError as e:
            raise BaselineError(f"{shown}: corrupt or truncated JSON ({e.msg} at line {e.lineno}, column "
                                f"{e.colno}); save the run again") from None
        except RecursionError:
            raise BaselineError(f"{shown}: JSON nested too deeply to be a gpuscope run file") from None

    # Under Python's limit (the default), int() refuses a longer integer
    # itself, faster than a hook on every integer; the file is then parsed
    # again with the hook, which names it.
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()  # 0: none (lifted, or before the limit)
    too_long = False
    try:
        doc = parse() if 0 < limit <= MAX_INT_DIGITS else parse(parse_int=whole)
    except BaselineError:
        raise
    except ValueError:
        too_long = True
    if too_long:
        doc = parse(parse_int=whole)
    if not isinstance(doc, dict) or doc.get("schema") != RUN_SCHEMA:
        hint = ""
        if isinstance(doc, dict) and doc.get("schema") == "gpuscope.doctor":
            hint = " (it is a gpuscope doctor report: use gpuscope doctor --baseline)"
        elif isinstance(doc, dict) and "step_time" in doc:
            hint = " (it is a bare summary: save runs with session.save(path))"
        raise BaselineError(f"{shown}: not a gpuscope run file{hint}")
    version = doc.get("schema_version")
    # bool is an int in Python: `true` is not a version.
    if type(version) is not int or version < 1 or version > RUN_SCHEMA_VERSION:
        raise BaselineError(f"{shown}: run file schema_version {printable(repr(version))[:40]} is not one this "
                            f"gpuscope ({_gpuscope.__version__}) reads (1..{RUN_SCHEMA_VERSION}); compare with "
                            "the gpuscope that wrote it, or save the run again")
    if not isinstance(doc.get("summary"), dict):
        raise BaselineError(f"{shown}: run file has no summary object")
    _check_phase_count(shown, doc["summary"].get("phases"))
    try:
        # Read from this one parse (the checks above need Python's: it names
        # the NaN, Infinity or 1e400 it met, and tells 1.0 from 1).
        summary = Summary._from_dict(doc["summary"])
    except (ValueError, _gpuscope.GpuscopeError) as e:
        raise BaselineError(f"{shown}: its summary cannot be used: {printable(str(e))}") from None
    meta = doc.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise BaselineError(f"{shown}: run file metadata must be an object")
    times = _check_step_times(shown, doc["step_times"], summary) if "step_times" in doc else None
    return RunFile(summary, meta if isinstance(meta, dict) else {}, times)


def _throughput(s: Summary) -> Tuple[Optional[float], str]:
    if s.throughput is not None:
        return s.throughput, "samples/s"
    if s.tokens_per_second is not None:
        return s.tokens_per_second, "tokens/s"
    if s.steps > 0 and s.step_time.mean > 0:
        return 1.0 / s.step_time.mean, "steps/s"
    return None, ""


def _peak_memory_gib(s: Summary) -> Optional[float]:
    """The fullest GPU's peak allocation in GiB, or None without memory."""
    if s.memory is None:
        return None
    peaks = [g.peak_allocated_bytes for g in s.memory.gpus if g.peak_allocated_bytes is not None]
    return max(peaks) / 2**30 if peaks else None


def _pct_change(base: float, new: float) -> float:
    return 100.0 * (new - base) / base if base else 0.0


def _unusable(what: str, n: int, min_steps: int) -> BaselineError:
    return BaselineError(f"the {what} has {n} steps, fewer than --min-steps {min_steps}: too few to tell a "
                         "change from noise; run it longer (a window of at least that many steps) or lower "
                         "--min-steps")


def compare_runs(base: Summary, new: Summary, base_meta: Dict[str, Any], new_meta: Dict[str, Any],
                 max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT, *,
                 base_step_times: Optional[Sequence[float]] = None,
                 new_step_times: Optional[Sequence[float]] = None, statistic: str = DEFAULT_STATISTIC,
                 min_steps: int = DEFAULT_MIN_STEPS) -> Tuple[List[str], List[str]]:
    """(lines to print, regressions): the differences between two runs, and
    the checks that went past the bound. With both runs' step times
    (``load_run_file()``), ``statistic`` (p50, p95, mean, throughput) is
    tested against their noise (``step_time_change()``); without them, the
    earlier rule applies (module docstring). BaselineError when a run has
    fewer than ``min_steps`` steps."""
    lines, regressions, _ = _compare(base, new, base_meta, new_meta, max_regression_pct, base_step_times,
                                     new_step_times, statistic, min_steps)
    return lines, regressions


def step_time_change(base: Summary, new: Summary, base_step_times: Sequence[float],
                     new_step_times: Sequence[float], statistic: str = DEFAULT_STATISTIC,
                     max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT) -> StepTimeChange:
    """The test ``gpuscope compare`` makes: ``statistic`` of the two runs'
    step times, its relative change with a 95 % bootstrap interval, and the
    verdict. Throughput is in the unit both summaries share (samples/s,
    else tokens/s, else steps/s). BaselineError when the statistic is 0."""
    (bt, unit), (nt, new_unit) = _throughput(base), _throughput(new)
    scales = (1.0, 1.0)
    if bt is not None and nt is not None and unit == new_unit and unit != "steps/s":
        # Samples (tokens) per step: throughput * mean step time, a constant of each run.
        scales = (bt * base.window_time / base.steps, nt * new.window_time / new.steps)
    else:
        unit = "steps/s"
    try:
        return compare_step_times(base_step_times, new_step_times, statistic, max_regression_pct,
                                  base_scale=scales[0], new_scale=scales[1], unit=unit)
    except ValueError as e:
        raise BaselineError(f"cannot compare the step times: {e}") from None


def _compare(base: Summary, new: Summary, base_meta: Dict[str, Any], new_meta: Dict[str, Any],
             max_regression_pct: float, base_times: Optional[Sequence[float]],
             new_times: Optional[Sequence[float]], statistic: str,
             min_steps: int) -> Tuple[List[str], List[str], Optional[StepTimeChange]]:
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}, not {statistic!r}")
    if type(min_steps) is not int or min_steps < 2:
        raise ValueError("min_steps must be a whole number, 2 or more")
    lines: List[str] = []
    regressions: List[str] = []
    if base.steps == 0 or new.steps == 0:
        which, empty = ("baseline", base) if base.steps == 0 else ("new run", new)
        warm = (f" (its {empty.warmup.steps} steps were all warm-up: save after more steps, or with a "
                "smaller warmup=)") if empty.warmup.steps > 0 else ""
        raise BaselineError(f"the {which} has no completed steps: nothing to compare{warm}")
    change: Optional[StepTimeChange] = None
    if base_times is not None and new_times is not None:
        counts = (len(base_times), len(new_times))
    else:
        counts = (base.steps, new.steps)
    for what, n in zip(("baseline", "new run"), counts):
        if n < min_steps:
            raise _unusable(what, n, min_steps)
    if base_times is not None and new_times is not None:
        change = step_time_change(base, new, base_times, new_times, statistic, max_regression_pct)
    tested = change is not None
    bound = max_regression_pct
    lines.append(f"{'':32}{'baseline':>12}{'new':>12}{'change':>10}")

    def row(name: str, b: Optional[float], n: Optional[float], fmt: str, change: str) -> None:
        bs = "-" if b is None else fmt.format(b)
        ns = "-" if n is None else fmt.format(n)
        lines.append(f"  {name:30}{bs:>12}{ns:>12}{change:>10}")

    # Without step times (a file from an earlier gpuscope), the earlier rule
    # gates p95, throughput and GPU idle; with them, the test against noise
    # decides and these rows are shown.
    old_rule: List[str] = []
    for q in ("p50", "p95", "p99"):
        b, n = getattr(base.step_time, q) * 1e3, getattr(new.step_time, q) * 1e3
        row(f"step time {q} (ms)", b, n, "{:.2f}", f"{_pct_change(b, n):+.1f}%")
    if new.step_time.p95 > base.step_time.p95 * (1 + bound / 100):
        old_rule.append(f"p95 step time grew {_pct_change(base.step_time.p95, new.step_time.p95):+.1f}% "
                        f"(bound {bound:g}%)")
    (bt, unit), (nt, new_unit) = _throughput(base), _throughput(new)
    if bt is not None and nt is not None and unit == new_unit:
        row(f"throughput ({unit})", bt, nt, "{:.1f}", f"{_pct_change(bt, nt):+.1f}%")
        if nt < bt * (1 - bound / 100):
            old_rule.append(f"throughput fell {_pct_change(bt, nt):+.1f}% (bound {bound:g}%)")
    elif bt is not None and nt is not None:
        lines.append(f"  throughput: not comparable ({unit} against {new_unit})")
    bi, ni = base.gpu_idle_pct, new.gpu_idle_pct
    row("GPU idle (%)", bi, ni, "{:.1f}", "-" if bi is None or ni is None else f"{ni - bi:+.1f} pt")
    if bi is not None and ni is not None and ni > bi + bound:
        idle = f"GPU idle grew {ni - bi:+.1f} points (bound {bound:g} points)"
        if tested:
            lines.append(f"  note: {idle}: shown, not gated (the step-time test decides)")
        else:
            old_rule.append(idle)
    if (bi is None) != (ni is None):
        lines.append(f"  GPU idle: measured in one run only (sources {base.source} and {new.source})")
    # Peak GPU memory: compared and shown, never gated (a larger batch or
    # model is a reason to use more, not a regression).
    bm, nm = _peak_memory_gib(base), _peak_memory_gib(new)
    if bm is not None or nm is not None:
        row("peak GPU memory (GiB)", bm, nm, "{:.2f}",
            "-" if bm is None or nm is None or bm == 0 else f"{_pct_change(bm, nm):+.1f}%")
    if change is not None:
        if change.regression:
            verb = "fell" if change.statistic == "throughput" else "grew"
            regressions.append(change.describe().replace(f"{change.name} ", f"{change.name} {verb} ", 1)
                               .replace(" steps)", f" steps; bound {bound:g}%)"))
    else:
        regressions.extend(old_rule)
    # Summary.phases builds a new dict of every phase on each read: read once
    # (once per phase made the comparison quadratic in the phases).
    base_shares = {name: p.share for name, p in base.phases.items()}
    new_shares = {name: p.share for name, p in new.phases.items()}
    names = sorted(set(base_shares) | set(new_shares),
                   key=lambda p: -max(base_shares.get(p, 0), new_shares.get(p, 0)))
    for p in names:
        b = base_shares[p] * 100 if p in base_shares else 0.0
        n = new_shares[p] * 100 if p in new_shares else 0.0
        if b >= 0.5 or n >= 0.5:
            row(f"phase {printable(p)} (% of step)", b, n, "{:.1f}", f"{n - b:+.1f} pt")
    base_ids = {f.id for f in diagnose_summary(base) if f.severity != "info"}
    new_ids = {f.id for f in diagnose_summary(new) if f.severity != "info"}
    for fid in sorted(new_ids - base_ids):
        lines.append(f"  new finding: {fid}")
    for fid in sorted(base_ids - new_ids):
        lines.append(f"  gone: {fid}")
    for key, label in (("git_commit", "git commit"), ("dataset", "dataset"), ("container_image", "image"),
                       ("gpus", "GPUs"), ("driver_version", "driver"), ("host", "host")):
        b, n = base_meta.get(key), new_meta.get(key)
        if b != n:
            lines.append(f"  {label}: {printable(b) if b is not None else '-'} -> "
                         f"{printable(n) if n is not None else '-'}")
    if base.source != new.source:
        lines.append(f"  source: {base.source} -> {new.source} (GPU numbers are not measured alike)")
    if base.warmup.steps != new.warmup.steps:
        lines.append(f"  warm-up steps excluded: {base.warmup.steps} -> {new.warmup.steps} (the runs' "
                     "start-up is not counted alike)")
    if base.simulated or new.simulated:
        which = "both runs" if base.simulated and new.simulated else ("the baseline" if base.simulated
                                                                       else "the new run")
        lines.append(f"  simulated GPU in {which}: its GPU numbers are not measurements")
    if change is not None:
        lines.append(f"  {change.line()}")
    else:
        which = ("the baseline and the new run have" if base_times is None and new_times is None
                 else "the baseline has" if base_times is None else "the new run has")
        lines.append(f"  note: {which} no step times (saved by an earlier gpuscope): compared by the")
        lines.append("    earlier rule (p95 step time, throughput, GPU idle against the bound), which noise")
        lines.append("    can trip; --statistic needs step times: save the runs again with this gpuscope")
        lines.append("    for a test against noise with a confidence interval")
    return lines, regressions, change
