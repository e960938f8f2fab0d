"""Hostile inputs, end to end: run files, doctor baselines, phase names,
environment variables and output paths that someone else may control.

What is checked (each item broke once, or could):

1. Text from files is printed escaped by `gpuscope compare` and `gpuscope
   doctor`: no ESC, CR, NEL, bidi overrides, zero-width or other control
   characters reach the terminal, and a crafted value cannot fake a line.
   Phase names that could do that are refused, in a file and at the call.
2. compare and doctor --baseline look at a file's type and size before
   reading it: /dev/zero, a FIFO, a 1 GiB sparse file, a directory.
3. Exit codes mean one thing (0 no regression, 1 regression, 2 unusable
   input with one line on stderr) and nothing ever prints a traceback.
4. Impossible summary values are refused when read (Summary.from_json, and
   therefore compare), and compare refuses more phases than a session holds
   and integers too long for Python, with the file named.
5. GPUSCOPE_LIB* paths that are FIFOs do not hang a session.
6. GPUSCOPE_SIMULATE / GPUSCOPE_DISABLE are parsed as booleans.
7. Saved files: modes, no writing through symlinks, no temporary files left,
   no secrets from the command line in a run file.

Saved runs are made once per module; every CLI call is a subprocess."""

import copy
import json
import math
import os
import re
import resource
import stat
import subprocess
import sys
import textwrap
import time
import unicodedata

import pytest

import gpuscope as gs
from conftest import MS

TIMEOUT_S = 20
# Characters that must never reach a terminal raw: C0/C1 controls (ESC, CR,
# NEL, BEL, CSI ...), format characters (bidi overrides, zero-width space,
# BOM), lone surrogates and the Unicode line/paragraph separators.
FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
EVIL = "x\n  REGRESSION: fake\x1b[2K\r\x85\u202e\u200b\u2028\x07\x9b31m"
TEMP_SUFFIX = ".gpuscope-tmp"


# --------------------------------------------------------------- helpers


def forbidden(text):
    """The characters of ``text`` a terminal would act on (newline aside)."""
    return sorted({c for c in text if c != "\n" and unicodedata.category(c) in FORBIDDEN_CATEGORIES})


def _limit_address_space():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def cli(*args, env=None, limit_memory=False):
    """``python -m gpuscope ARGS`` in a subprocess: (returncode, stdout,
    stderr, seconds), the output decoded strictly as UTF-8 (invalid output
    fails the test). Fails the test if it runs past TIMEOUT_S."""
    cmd = [sys.executable, "-m", "gpuscope", *map(os.fspath, args)]
    start = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT_S, env=env,
                           preexec_fn=_limit_address_space if limit_memory else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{cmd} did not finish within {TIMEOUT_S} s")
    elapsed = time.monotonic() - start
    out, err = p.stdout.decode("utf-8"), p.stderr.decode("utf-8")
    for name, text in (("stdout", out), ("stderr", err)):
        assert "Traceback" not in text, f"{name}: {text}"
        assert not forbidden(text), f"raw control characters {forbidden(text)!r} in {name}: {text!r}"
    return p.returncode, out, err, elapsed


def assert_refused(rc, out, err, *needles, command="compare"):
    """Exit 2, nothing on stdout, one line on stderr naming the problem."""
    assert rc == 2, (rc, out, err)
    assert out == "", out
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith(f"gpuscope {command}: "), err
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"
    assert "MemoryError" not in err


def python(code, *argv, env=None, cwd=None):
    """A Python snippet in a subprocess: (returncode, stdout, stderr)."""
    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv], capture_output=True, text=True,
                           timeout=TIMEOUT_S, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the snippet did not finish within {TIMEOUT_S} s:\n{code}")
    assert "Traceback" not in p.stderr, p.stderr
    return p.returncode, p.stdout, p.stderr


def clean_env(**overrides):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSCOPE_")}
    env.update(overrides)
    return env


def host_run(path, dataset="imagenet-1k@v2", phases=("data", "forward"), steps=30):  # compare's --min-steps
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock)
    for _ in range(steps):
        with s.step(samples=8):
            for i, name in enumerate(phases):
                with s.phase(name):
                    clock.advance((i + 1) * 5 * MS)
    clock.advance(1000 * MS)
    out = s.save(path, dataset=dataset)
    s.close()
    return out


def cupti_run(path, steps=30):  # compare's --min-steps
    """A run on the simulated device with activity records (source cupti)."""
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(steps):
        with s.step(samples=64):
            with s.phase("data"):
                clock.advance(10 * MS)
            with s.phase("forward"):
                gpu.launch(40 * MS)
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    out = s.save(path, dataset="imagenet-1k@v2")
    s.close()
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    r = {"dir": d, "base": host_run(d / "base.json"), "cupti": cupti_run(d / "cupti.json")}
    r["cupti_doc"] = json.loads(open(r["cupti"], encoding="utf-8").read())
    assert r["cupti_doc"]["summary"]["source"] == "cupti" and r["cupti_doc"]["summary"]["activity"]
    return r


def write_doc(path, doc):
    # ensure_ascii=False: non-ASCII characters (NEL, U+202E ...) go in raw.
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def phase_of(summary, name):
    return next(p for p in summary["phases"] if p["name"] == name)


# ------------------------------------------- 1. terminal injection, escaping


def test_crafted_metadata_is_printed_escaped_and_fakes_nothing(runs, tmp_path):
    doc = json.loads(open(runs["base"], encoding="utf-8").read())
    labels = {"dataset": "dataset", "git_commit": "git commit", "host": "host", "container_image": "image",
              "driver_version": "driver"}
    for key in labels:
        doc["metadata"][key] = key + EVIL
    doc["metadata"]["gpus"] = ["H100" + EVIL]
    # A file name is text from outside too.
    crafted = write_doc(tmp_path / "r\x1b[2J\u202eREGRESSION.json", doc)
    for args in ((runs["base"], crafted), (crafted, runs["base"])):
        rc, out, err, _ = cli("compare", *args)
        assert rc == 0, out + err
        lines = out.splitlines()
        assert not [line for line in lines if line.lstrip().startswith("REGRESSION")], out
        assert lines[-1] == "no regression past 5%", out
        for key, label in labels.items():
            assert [line for line in lines if line.startswith(f"  {label}: ")], f"{key} not shown:\n{out}"
        assert [line for line in lines if line.startswith("  GPUs: ")], out
        dataset = next(line for line in lines if line.startswith("  dataset: "))
        assert "\\e[2K" in dataset and "\\u{202E}" in dataset, dataset  # escaped, visibly


@pytest.mark.parametrize("name", [
    "data\x1b[2K\rREGRESSION",
    "a\u202eb",
    "\x85",
    "a\u200b",
    "a\u2028b",
])
def test_crafted_phase_name_in_a_run_file_is_refused(runs, tmp_path, name):
    doc = copy.deepcopy(runs["cupti_doc"])
    phase_of(doc["summary"], "data")["name"] = name
    bad = write_doc(tmp_path / "bad.json", doc)
    with pytest.raises(ValueError, match="is not a phase name a session accepts"):
        gs.Summary.from_json(json.dumps(doc["summary"]))
    for args in ((runs["cupti"], bad), (bad, runs["cupti"])):
        assert_refused(*cli("compare", *args)[:3], "is not a phase name a session accepts")


@pytest.mark.parametrize("name,why", [
    ("a\u202eb", "U+202E"),
    ("\x85", "U+0085"),
    ("a\u200b", "U+200B"),
    ("\x1b[2K", "U+001B"),
    ("a\rb", "U+000D"),
    ("a\u2028b", "U+2028"),
    ("\ufeffdata", "U+FEFF"),
    (" ", "space"),
    ("a ", "space"),
    (" a", "space"),
    ("a\u00a0b", "U+00A0"),
    ("", "empty"),
])
def test_phase_names_with_control_or_invisible_characters_are_refused(session, monkeypatch, name, why):
    with pytest.raises(ValueError) as e:
        session.phase(name)
    assert why in str(e.value)
    assert not forbidden(str(e.value)), repr(str(e.value))  # the message itself is safe to print
    # The module-level gs.phase, on a default session of its own (restored after).
    default = gs.Session(clock=gs.testing.ManualClock())
    monkeypatch.setattr(gs, "_default", default)
    try:
        with pytest.raises(ValueError) as e:
            gs.phase(name)
        assert why in str(e.value)
    finally:
        default.close()


def test_ordinary_phase_names_work_and_print_as_they_are(tmp_path):
    names = ("前向", "a b", "données", "x.y/z-1")
    path = host_run(tmp_path / "names.json", phases=names)
    doc = json.loads(open(path, encoding="utf-8").read())
    assert {p["name"] for p in doc["summary"]["phases"]} >= set(names)
    rc, out, err, _ = cli("compare", path, path)
    assert rc == 0, out + err
    for name in names:
        assert f"phase {name} (% of step)" in out  # not escaped: nothing to escape


def test_crafted_doctor_baseline_is_printed_escaped(tmp_path):
    rc, out, err, _ = cli("doctor", "--json")
    report = json.loads(out)
    assert report["facts"], report
    # A fact whose value is free text (gpu_count must stay a number).
    key = next((k for k in sorted(report["facts"]) if k.startswith("host.")), sorted(report["facts"])[-1])
    report["facts"][key] = "2" + EVIL + "\nFAIL: fake"
    report["facts"]["gpu0.name\x1b]0;title\x07"] = "H100\x1b[31m\u202e"
    report["hostname"] = "h\x1b[2J"
    baseline = write_doc(tmp_path / "node.json", report)
    for env in (None, clean_env(PYTHONIOENCODING="ascii")):
        rc, out, err, _ = cli("doctor", "--baseline", baseline, env=env)
        assert rc == 1, out + err  # a difference, and nothing else
        diff = out[out.index("differences from the baseline"):]
        assert f"  {key}: 2x\\n  REGRESSION: fake\\e[2K\\r" in diff, diff
        assert "\\e]0;title" in diff and "\\u{202E}" in diff
        assert not [line for line in out.splitlines() if line.startswith(("FAIL: fake", "  REGRESSION"))]
    rc, out, err, _ = cli("doctor", "--json", "--baseline", baseline)
    assert rc == 1 and len(json.loads(out)["baseline_differences"]) == 2


def test_report_of_a_crafted_summary_is_escaped(runs):
    doc = copy.deepcopy(runs["cupti_doc"])
    doc["summary"]["source_reason"] = "r" + EVIL
    doc["summary"]["version"] = "0.1" + EVIL
    text = gs.Summary.from_json(json.dumps(doc["summary"])).report()
    assert not forbidden(text), forbidden(text)
    assert "\\e[2K" in text


# ----------------------------------------- 2. file type and size before reading


@pytest.fixture
def unusable(tmp_path):
    def make(kind):
        if kind == "/dev/zero":
            return "/dev/zero", ("character device", "not a regular file")
        path = tmp_path / kind
        if kind == "fifo":
            os.mkfifo(path)  # nobody ever writes to it
            return path, ("FIFO", "not a regular file")
        if kind == "sparse":
            with open(path, "wb") as f:
                f.truncate(1 << 30)
            return path, ("1 GiB", "at most")
        if kind == "directory":
            path.mkdir()
            return path, ("directory", "not a regular file")
        raise AssertionError(kind)
    return make


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "sparse", "directory"])
def test_unusable_files_are_refused_before_reading(runs, unusable, kind):
    path, needles = unusable(kind)
    for args in (("compare", path, runs["base"]), ("compare", runs["base"], path)):
        rc, out, err, elapsed = cli(*args, limit_memory=True)
        assert_refused(rc, out, err, *needles)
        assert elapsed < 5, f"{elapsed:.1f} s"
    rc, out, err, elapsed = cli("doctor", "--baseline", path, limit_memory=True)
    assert_refused(rc, out, err, "cannot use the baseline", *needles, command="doctor")
    assert elapsed < 5, f"{elapsed:.1f} s"


def test_a_crafted_missing_path_is_named_escaped(runs, tmp_path):
    rc, out, err, _ = cli("compare", runs["base"], tmp_path / "no\x1b[2J\rREGRESSION.json")
    assert_refused(rc, out, err, "no such file", "\\e[2J\\r")


# ------------------------------------------------- 3. one meaning per exit code


@pytest.fixture(scope="module")
def surrogate_run(runs):
    """A run saved with a lone surrogate in its dataset (a name read from a
    non-UTF-8 file system), under a file name that holds one too."""
    dataset = os.fsdecode(b"imag\xe9net")
    path = runs["dir"] / os.fsdecode(b"run-\xe9.json")
    host_run(path, dataset=dataset)
    return path


def test_lone_surrogate_in_metadata_saves_valid_utf8_json(surrogate_run):
    raw = open(surrogate_run, "rb").read()
    doc = json.loads(raw.decode("utf-8"))  # strict UTF-8, and JSON
    assert doc["metadata"]["dataset"].startswith("imag")


def test_lone_surrogate_in_metadata_is_stored_as_valid_unicode(surrogate_run):
    """Every string in the file must be real Unicode: a lone surrogate as a
    JSON \\u escape is refused by strict JSON readers, gpuscope's own C++
    parser among them ("unpaired low surrogate")."""
    doc = json.loads(open(surrogate_run, "rb").read().decode("utf-8"))

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for k, x in v.items():
                yield k
                yield from strings(x)
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)

    bad = [s for s in strings(doc) if any(unicodedata.category(c) == "Cs" for c in s)]
    assert not bad, f"lone surrogates written to the run file: {bad!r}"


@pytest.mark.parametrize("env", [
    {},
    {"PYTHONIOENCODING": "ascii"},
    {"LC_ALL": "C", "LANG": "C"},
    {"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": "ascii:strict", "PYTHONUTF8": "0"},
], ids=["default", "ascii", "C-locale", "C-locale-ascii-strict"])
def test_lone_surrogate_in_metadata_compares_and_prints_escaped(runs, surrogate_run, env):
    env = clean_env(**env)
    rc, out, err, _ = cli("compare", surrogate_run, surrogate_run, env=env)
    assert rc == 0 and "no regression past 5%" in out, out + err
    assert "UnicodeEncodeError" not in err
    rc, out, err, _ = cli("compare", runs["base"], surrogate_run, env=env)
    assert rc == 0, out + err
    dataset = next(line for line in out.splitlines() if line.startswith("  dataset: "))
    assert dataset.startswith("  dataset: imagenet-1k@v2 -> imag\\x") and dataset.endswith("net"), dataset
    assert "run-\\x" in out.splitlines()[0]  # the file name, escaped too
    if "ascii" in env.get("PYTHONIOENCODING", ""):
        assert out.isascii() and err.isascii()


def with_activity(doc, **values):
    doc = copy.deepcopy(doc)
    doc["summary"]["activity"].update(values)
    return doc


TINY = 5e-324  # the smallest denormal


@pytest.mark.parametrize("values", [
    dict(kernel_time_per_step=TINY, gemm_time_per_step=0.04),  # GEMM > kernel time
    dict(gemm_time_per_step=TINY, fp32_gemm_time_per_step=0.01),  # FP32 GEMM > GEMM
    dict(kernel_time_per_step=TINY, gemm_time_per_step=TINY, fp32_gemm_time_per_step=0.03),
    dict(collective_time_per_step=TINY, exposed_collective_time_per_step=0.01),  # exposed > collective
    dict(kernel_time_per_step=TINY, collective_time_per_step=0.02),  # collective > kernel time
], ids=["gemm>kernel", "fp32>gemm", "fp32>tiny-gemm", "exposed>collective", "collective>kernel"])
def test_inconsistent_kernel_times_are_refused(runs, tmp_path, values):
    doc = with_activity(runs["cupti_doc"], **values)
    with pytest.raises(ValueError, match="inconsistent"):
        gs.Summary.from_json(json.dumps(doc["summary"]))
    bad = write_doc(tmp_path / "bad.json", doc)
    assert_refused(*cli("compare", runs["cupti"], bad)[:3], "inconsistent")


@pytest.mark.parametrize("values", [
    dict(gemm_time_per_step=TINY),
    dict(kernel_time_per_step=TINY, gemm_time_per_step=TINY, fp32_gemm_time_per_step=TINY),
    dict(kernel_time_per_step=TINY, gemm_time_per_step=TINY, fp32_gemm_time_per_step=TINY, kernel_time_p50=TINY,
         collective_time_per_step=TINY, exposed_collective_time_per_step=TINY, sync_time_per_step=TINY,
         host_wait_time_per_step=TINY),
    dict(kernel_time_per_step=1e-310, gemm_time_per_step=1e-310, fp32_gemm_time_per_step=1e-310),
    dict(kernel_time_per_step=2.2250738585072014e-308, gemm_time_per_step=2.2250738585072014e-308,
         fp32_gemm_time_per_step=2.2250738585072014e-308),
], ids=["tiny-gemm", "all-three-tiny", "every-time-tiny", "denormal", "smallest-normal"])
def test_consistent_but_tiny_kernel_times_diagnose_finitely(runs, tmp_path, values):
    doc = with_activity(runs["cupti_doc"], **values)
    summary = gs.Summary.from_json(json.dumps(doc["summary"]))
    findings = gs.diagnose(summary)
    assert isinstance(findings, list)
    for f in findings:
        assert isinstance(f.share, float) and math.isfinite(f.share), f
        assert all(isinstance(v, float) and math.isfinite(v) for v in f.evidence.values()), f
        assert not re.search(r"\b(nan|inf)\b", f.title, re.I), f.title
    assert not re.search(r"\b(nan|inf)\b", summary.report(), re.I)
    tiny = write_doc(tmp_path / "tiny.json", doc)
    for args in ((runs["cupti"], tiny), (tiny, tiny)):
        rc, out, err, _ = cli("compare", *args)
        assert rc == 0, out + err
        assert not re.search(r"\b(nan|inf)\b", out, re.I), out


# ------------------------------------------- 4. impossible values, one check


def _step_time_all(value):
    def mutate(doc):
        for q in ("step_time", "lifetime_step_time"):
            doc["summary"][q].update({k: value for k in ("mean", "min", "max", "p50", "p90", "p95", "p99")})
    return mutate


def _set(*keys, value):
    def mutate(doc):
        target = doc["summary"]
        for k in keys[:-1]:
            target = next(p for p in target if p["name"] == k[1:]) if k.startswith("@") else target[k]
        target[keys[-1]] = value
    return mutate


def _idle_by_cause_past_idle(doc):
    s = doc["summary"]
    s["idle_by_cause"] = {"data": s["gpu_idle_pct"] * 0.75, "launch": s["gpu_idle_pct"] * 0.75}


IMPOSSIBLE = [
    # id, mutation of the run file, what the one line must name
    ("p95=-1", _set("step_time", "p95", value=-1), "step_time.p95"),
    ("p95=-1,others-too", _step_time_all(-1.0), "step_time"),
    ("steps=-3", _set("steps", value=-3), "steps"),
    ("steps=true", _set("steps", value=True), "steps"),
    ("gpu_idle_pct=200", _set("gpu_idle_pct", value=200), "gpu_idle_pct"),
    ("phase-share=50", _set("phases", "@data", "share", value=50), "share"),
    ("total_steps<steps", _set("total_steps", value=3), "total_steps"),
    ("idle_by_cause>gpu_idle", _idle_by_cause_past_idle, "idle_by_cause"),
]


@pytest.mark.parametrize("mutate,field", [p[1:] for p in IMPOSSIBLE], ids=[p[0] for p in IMPOSSIBLE])
def test_impossible_summary_values_are_refused_on_read(runs, tmp_path, mutate, field):
    doc = copy.deepcopy(runs["cupti_doc"])
    mutate(doc)
    with pytest.raises(ValueError, match=re.escape(field)):
        gs.Summary.from_json(json.dumps(doc["summary"]))
    bad = write_doc(tmp_path / "bad.json", doc)
    for args in ((runs["cupti"], bad), (bad, runs["cupti"])):
        rc, out, err, _ = cli("compare", *args)
        assert "no regression" not in out  # a p95 of -1 is not "faster"
        assert_refused(rc, out, err, "summary cannot be used", field)


@pytest.mark.parametrize("version", [True, 1.0, "1", 0, 2, None, [1]], ids=repr)
def test_run_file_schema_version_must_be_a_known_integer(runs, tmp_path, version):
    doc = copy.deepcopy(runs["cupti_doc"])
    doc["schema_version"] = version
    bad = write_doc(tmp_path / "bad.json", doc)
    assert json.loads(bad.read_text())["schema_version"] == version  # 1.0 stays 1.0 in the file
    for args in ((runs["cupti"], bad), (bad, runs["cupti"])):
        assert_refused(*cli("compare", *args)[:3], "schema_version")


def split_phase(doc, name, parts):
    """`doc` with phase `name` split into `parts` phases of equal time: a
    consistent summary (shares still sum to 1), with as many phase names."""
    phases = doc["summary"]["phases"]
    at = next(i for i, p in enumerate(phases) if p["name"] == name)
    one = copy.deepcopy(phases[at])
    for key in ("total", "share", "inclusive_share"):
        one[key] /= parts
    one["time"] = {k: v if k == "count" else v / parts for k, v in one["time"].items()}
    pieces = [dict(one, name=f"{name}{i}", builtin=False) for i in range(parts)]
    out = copy.deepcopy(doc)
    out["summary"]["phases"] = phases[:at] + pieces + phases[at + 1:]
    return out


def test_a_run_file_of_20000_phases_is_refused_at_once(runs, tmp_path):
    # 11 MB, far under the 64 MiB cap, and consistent: compare, quadratic in
    # the phases, ran for more than 10 minutes on it. A session holds 4096
    # phase names at most; more is refused before the summary is read.
    doc = split_phase(json.loads(open(runs["base"]).read()), "forward", 20000)
    assert len(gs.Summary._from_dict(doc["summary"]).phases) == 20002  # otherwise readable
    bad = write_doc(tmp_path / "many.json", doc)
    assert 10e6 < os.path.getsize(bad) < 64 << 20
    for args in ((runs["base"], bad), (bad, runs["base"])):
        rc, out, err, _ = cli("compare", *args)
        assert_refused(rc, out, err, f"{bad}: its summary lists 20002 phases, 20000 of them not built-in",
                       "4096 phase names at most", "save the run again")
    from gpuscope._baseline import BaselineError, load_run_file

    with pytest.raises(BaselineError, match="20002 phases"):
        load_run_file(str(bad))


DIGITS = "7" * 5000  # past Python's 4300-digit limit on converting an integer


@pytest.mark.parametrize("where,mutate,needle", [
    ("summary", lambda doc: doc["summary"].update(steps="INT"), "field 'steps' holds an integer of 5000 digits"),
    ("metadata", lambda doc: doc["metadata"].update(extra="INT"), "field 'extra' holds an integer of 5000 digits"),
    ("step-times", lambda doc: doc.update(step_times=[0.01, "INT"]), "holds an integer of 5000 digits"),
    ("negative", lambda doc: doc["summary"].update(steps="-INT"), "field 'steps' holds an integer of 5000 digits"),
])
def test_a_number_too_long_for_python_names_the_file(runs, tmp_path, where, mutate, needle):
    doc = json.loads(open(runs["base"]).read())
    mutate(doc)
    bad = tmp_path / "long.json"
    bad.write_text(json.dumps(doc, indent=2).replace('"-INT"', "-" + DIGITS).replace('"INT"', DIGITS))
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if DIGITS in text)
    for args in ((runs["base"], bad), (bad, runs["base"])):
        rc, out, err, _ = cli("compare", *args)
        assert_refused(rc, out, err, f"{bad}: {needle} (line {line}, column ", "corrupt or not a gpuscope run file",
                       "save the run again")
        assert "set_int_max_str_digits" not in err


def test_a_number_past_the_interpreters_int_limit_names_the_file(runs, tmp_path):
    # The interpreter's limit may be set lower than Python's default: the
    # same one line, not Python's ValueError.
    doc = json.loads(open(runs["base"]).read())
    doc["metadata"]["extra"] = "INT"
    bad = tmp_path / "long.json"
    bad.write_text(json.dumps(doc).replace('"INT"', "7" * 700))
    # Lifted, the limit would let the reader convert an 8 MB number: minutes
    # (quadratic in the digits before Python 3.12). Still refused, at once.
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps(doc).replace('"INT"', "7" * (8 << 20)))
    for limit, path, needle in ((640, bad, "holds an integer of 700 digits"),
                                (0, huge, f"holds an integer of {8 << 20} digits")):
        rc, out, err = python("""
            import sys
            from gpuscope._baseline import BaselineError, load_run_file
            sys.set_int_max_str_digits(int(sys.argv[2]))
            try:
                load_run_file(sys.argv[1])
            except BaselineError as e:
                print(e)
        """, str(path), str(limit))
        assert rc == 0 and f"{path}: field 'extra' {needle}" in out, out + err


# --------------------------------------------------- 5. library paths


def test_library_paths_that_are_fifos_do_not_hang(tmp_path):
    env = clean_env()
    for var in ("GPUSCOPE_LIBCUDA", "GPUSCOPE_LIBNVML", "GPUSCOPE_LIBCUPTI"):
        fifo = tmp_path / var.lower()
        os.mkfifo(fifo)
        env[var] = str(fifo)
    rc, out, err = python("""
        import gpuscope as gs
        s = gs.Session()
        with s.step():
            pass
        print(s.summary().source)
    """, env=env)
    assert rc == 0 and out.strip() == "host", out + err
    rc, out, err, _ = cli("doctor", env=env)
    assert rc in (0, 1) and "checks:" in out, out + err


# --------------------------------------------------- 6. boolean switches


SWITCH_SCRIPT = """
    import json, sys
    import gpuscope as gs
    out = []
    for _ in range(2):  # two sessions: a warning is given once
        s = gs.Session()
        with s.step():
            with s.phase("forward"):
                pass
        with s.step():
            pass
        sm = s.summary()
        out.append({"source": sm.source, "simulated": sm.simulated, "recording": s.recording,
                    "report_simulated": "SIMULATED GPU" in s.report()})
        if len(sys.argv) > 1:
            s.save(sys.argv[1])
        s.close()
    print(json.dumps(out))
"""


SWITCHES = [
    # variable, value, summary.source, summary.simulated, s.recording, warns
    ("GPUSCOPE_SIMULATE", "false", "host", False, True, False),
    ("GPUSCOPE_SIMULATE", "no", "host", False, True, False),
    ("GPUSCOPE_SIMULATE", "off", "host", False, True, False),
    ("GPUSCOPE_SIMULATE", " 0", "host", False, True, False),
    ("GPUSCOPE_SIMULATE", "0", "host", False, True, False),
    ("GPUSCOPE_SIMULATE", "1", "events", True, True, False),
    ("GPUSCOPE_SIMULATE", "true", "events", True, True, False),
    ("GPUSCOPE_SIMULATE", "yes", "events", True, True, False),
    ("GPUSCOPE_SIMULATE", "on", "events", True, True, False),
    ("GPUSCOPE_SIMULATE", "maybe", "host", False, True, True),
    ("GPUSCOPE_DISABLE", "off", "host", False, True, False),
    ("GPUSCOPE_DISABLE", "yes", "host", False, False, False),
]


@pytest.mark.parametrize("var,value,source,simulated,recording,warns", SWITCHES,
                         ids=[f"{v[0][len('GPUSCOPE_'):]}={v[1]!r}" for v in SWITCHES])
def test_boolean_switches(runs, tmp_path, var, value, source, simulated, recording, warns):
    saved = tmp_path / "run.json"
    rc, out, err = python(SWITCH_SCRIPT, str(saved), env=clean_env(**{var: value}))
    assert rc == 0, out + err
    for got in json.loads(out):
        assert got == {"source": source, "simulated": simulated, "recording": recording,
                       "report_simulated": simulated}, (got, err)
    warnings = [line for line in err.splitlines() if var in line]
    assert len(warnings) == (1 if warns else 0), err
    if warns:
        assert "not a boolean" in warnings[0]
    doc = json.loads(saved.read_text())
    assert doc["summary"]["simulated"] is simulated
    if simulated:
        rc, out, err, _ = cli("compare", runs["base"], saved, "--min-steps", "2")  # the script's 2 steps
        assert rc == 0 and "simulated GPU in the new run" in out, out + err


# --------------------------------------------------- 7. saved files


@pytest.fixture
def recorded(session, clock):
    for _ in range(3):
        with session.step(samples=4):
            with session.phase("data"):
                clock.advance(MS)
    clock.advance(100 * MS)
    return session


def no_temporary_files(directory):
    return not [n for n in os.listdir(directory) if n.endswith(TEMP_SUFFIX)]


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077], ids=oct)
def test_run_file_modes(recorded, tmp_path, umask):
    old = os.umask(umask)
    try:
        new = recorded.save(tmp_path / "new.json")
        assert stat.S_IMODE(os.stat(new).st_mode) == 0o600
        shared = recorded.save(tmp_path / "shared.json", mode=0o644)
        assert stat.S_IMODE(os.stat(shared).st_mode) == 0o644
        existing = tmp_path / "existing.json"
        existing.write_text("old")
        os.chmod(existing, 0o640)
        recorded.save(existing)
        assert stat.S_IMODE(os.stat(existing).st_mode) == 0o640
        assert json.loads(existing.read_text())["schema"] == "gpuscope.run"
        if os.geteuid() == 0:
            # A file another user planted first lends neither mode nor owner.
            planted = tmp_path / "planted.json"
            planted.write_text("{}")
            os.chown(planted, 65534, 65534)
            os.chmod(planted, 0o666)
            recorded.save(planted)
            st = os.stat(planted)
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600)
    finally:
        os.umask(old)
    assert no_temporary_files(tmp_path)


@pytest.mark.parametrize("method", ["save", "save_trace", "save_html", "save_prometheus"])
@pytest.mark.parametrize("dangling", [False, True], ids=["link", "dangling-link"])
def test_writers_refuse_a_symlink_target(recorded, tmp_path, method, dangling):
    if method == "save_html":
        pytest.importorskip("matplotlib")
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("precious")
        os.chmod(victim, 0o644)
    link = tmp_path / "out"
    os.symlink("victim.txt", link)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(OSError, match="symbolic link"):
        getattr(recorded, method)(link)
    assert os.path.islink(link) and os.readlink(link) == "victim.txt"
    if dangling:
        assert not os.path.lexists(victim)
    else:
        assert victim.read_text() == "precious" and stat.S_IMODE(os.stat(victim).st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == before  # nothing left behind


@pytest.mark.parametrize("method", ["save", "save_trace", "save_html", "save_prometheus"])
def test_writers_raise_the_errors_gpuscope_exports(recorded, tmp_path, method):
    if method == "save_html":
        pytest.importorskip("matplotlib")
    from gpuscope import _files

    assert gs.FileWriteError is _files.FileWriteError and gs.UnsafePathError is _files.UnsafePathError
    assert {"FileWriteError", "UnsafePathError"} <= set(gs.__all__)
    assert issubclass(gs.UnsafePathError, gs.FileWriteError) and issubclass(gs.FileWriteError, OSError)
    link = tmp_path / "out"
    os.symlink("elsewhere", link)
    with pytest.raises(gs.UnsafePathError, match="symbolic link"):
        getattr(recorded, method)(link)
    os.mkdir(tmp_path / "dir")
    with pytest.raises(gs.UnsafePathError, match="it is a directory"):
        getattr(recorded, method)(tmp_path / "dir")
    missing = tmp_path / "missing" / "out"
    with pytest.raises(gs.FileWriteError, match="does not exist") as e:
        getattr(recorded, method)(missing)
    assert type(e.value) is gs.FileWriteError and e.value.filename


TOKEN = "hf_abcdefghijklmnopqrstuvwxyzABCDEF12"


def test_run_file_never_holds_a_secret_from_the_command_line(tmp_path):
    saved = tmp_path / "run.json"
    rc, out, err = python("""
        import sys
        import gpuscope as gs
        s = gs.Session()
        with s.step():
            pass
        s.save(sys.argv[1])
    """, str(saved), "--hf-token", TOKEN, "--max-tokens", "4096", env=clean_env(), cwd=tmp_path)
    assert rc == 0, err
    raw = saved.read_text()
    command = json.loads(raw)["metadata"]["command"]
    assert "--max-tokens" in command and "4096" in command, command
    assert "--hf-token" in command, command
    assert TOKEN not in raw and TOKEN[3:] not in raw, command
