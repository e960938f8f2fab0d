"""Checks an installed gpuscope as a user would use it: run by tests/wheel/run.sh
inside the clean root (with --clean-root) and in the isolated source build's
venv.

    python check_installed.py VERSION WORKDIR [--clean-root]

Asserts, and says what it saw:
  - with --clean-root: the environment really lacks what the build machine had
    (no Abseil, no nlohmann-json, no libstdc++), and `ldd` of the installed
    extension names nothing but glibc's libraries, libgcc_s and the kernel's
    vdso, all found;
  - `import gpuscope` works and reports VERSION, as the installed
    distribution's metadata does;
  - an instrumented CPU loop (a slow `data` phase, a busy `compute` phase)
    gives the step count, the phase shares and the input-bound finding it
    should;
  - the program exits cleanly while daemon threads are inside gpuscope (the
    forced unwind glibc starts passes through the extension);
  - `gpuscope doctor` runs (in the clean root: and says there is no GPU, and
    why);
  - `gpuscope run` on a script that records with gs.step()/gs.phase() writes
    run.json with the script's steps, trace.json with its last steps and
    their phases (and report.html, or
    without matplotlib, a line that says how to get it).
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time

# glibc's own libraries, the unwinder glibc loads for pthread_exit() (libgcc_s:
# Debian's libc6 depends on it; cmake/GpuscopeSelfContained.cmake says why the
# extension shares it rather than carrying a second one) and the kernel's vdso.
SYSTEM = ("linux-vdso.so", "libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so",
          "ld-linux-x86-64.so", "ld-linux-aarch64.so", "libgcc_s.so")


def check(cond: bool, what: str, detail: str = "") -> None:
    if not cond:
        raise SystemExit(f"check_installed: FAILED: {what}\n{detail}")
    print(f"  ok  {what}")


def check_environment() -> None:
    libdirs = ["/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib",
               "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
               "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]
    absl = [p for d in libdirs for p in glob.glob(os.path.join(d, "libabsl_*"))]
    check(not absl, f"no Abseil library in this root ({len(absl)} found)")
    stdcxx = [p for d in libdirs for p in glob.glob(os.path.join(d, "libstdc++.so*"))]
    check(not stdcxx, f"no libstdc++ in this root ({', '.join(stdcxx) or 'none'})")
    check(not os.path.exists("/usr/include/nlohmann") and not os.path.exists("/usr/include/absl"),
          "no nlohmann-json or Abseil headers in this root")
    check(not glob.glob("/usr/local/cuda*"), "no CUDA toolkit in this root")


def check_ldd(module_path: str) -> None:
    out = subprocess.run(["ldd", module_path], capture_output=True, text=True, check=True).stdout
    print("  ldd " + os.path.basename(module_path) + ":\n" +
          "\n".join("      " + line.strip() for line in out.strip().splitlines()))
    names = [line.split()[0] for line in out.strip().splitlines()]
    check("not found" not in out, "every library the extension needs is found")
    others = [n for n in names if not os.path.basename(n).startswith(SYSTEM)]
    check(not others, "the extension needs nothing but glibc, its unwinder libgcc_s and the vdso"
          f" ({', '.join(others) or 'none else'})")


def check_loop(gs, clean_root: bool) -> None:
    s = gs.Session()
    for _ in range(40):
        with s.step():
            with s.phase("data"):
                time.sleep(0.004)
            with s.phase("compute"):
                t = time.perf_counter()
                while time.perf_counter() - t < 0.001:
                    pass
    sm = s.summary()
    check(sm.total_steps == 40, f"the loop's 40 steps are counted ({sm.total_steps})")
    data, compute = sm.phases["data"].share, sm.phases["compute"].share
    check(data > 0.6 and 0.05 < compute < 0.4,
          f"phase shares: data {data:.0%} (4 ms of ~5), compute {compute:.0%} (1 ms of ~5)")
    check(sm.step_time.p50 >= 0.005, f"p50 step time {sm.step_time.p50 * 1e3:.2f} ms >= 5 ms")
    if clean_root:  # no driver in the root: the session says why it times on the host
        check(sm.source == "host" and "libcuda" in sm.source_reason,
              f"no GPU driver here: source '{sm.source}', '{sm.source_reason[:70]}...'")
    else:
        print(f"  --  source '{sm.source}' ({sm.source_reason[:70]})")
    ids = [f.id for f in s.diagnose()]
    check("input-bound" in ids, f"findings name the slow data phase: {ids}")


def check_doctor(bindir: str, clean_root: bool) -> None:
    p = subprocess.run([os.path.join(bindir, "gpuscope"), "doctor", "--json"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "gpuscope doctor exits 0", f"rc {p.returncode}: {p.stderr[-2000:]}")
    report = json.loads(p.stdout)
    if not clean_root:
        print(f"  --  doctor: {report['gpu_count']} GPUs, {len(report['checks'])} checks")
        return
    gpus = [c for c in report["checks"] if c["id"] == "gpus"]
    check(report["gpu_count"] == 0 and gpus and gpus[0]["status"] == "WARN"
          and "NVML is not usable" in gpus[0]["reason"],
          f"doctor: no GPU, and why: '{gpus[0]['reason'][:60]}...'" if gpus else "doctor: a gpus check")
    check(any(c["id"] == "cpus" and c["status"] == "OK" for c in report["checks"]),
          "doctor checks the host's CPUs")


# Daemon threads inside gpuscope while the program ends: CPython ends them
# with pthread_exit(), a forced unwind through the extension's frames by
# glibc's unwinder. A second unwinder linked into the extension aborted here.
EXIT_DURING_CALLS = """\
import threading, time
import gpuscope as gs
s = gs.Session()
for _ in range(2000):
    with s.step():
        with s.phase("forward"):
            pass
def loop(call):
    while True:
        call()
for call in (s.summary, s.summary, s.trace_json, s.flush):
    threading.Thread(target=loop, args=(call,), daemon=True).start()
time.sleep(0.1)
print("main done", flush=True)
"""


def check_exit_with_daemon_threads(workdir: str) -> None:
    script = os.path.join(workdir, "exit_during_calls.py")
    with open(script, "w") as f:
        f.write(EXIT_DURING_CALLS)
    codes = [subprocess.run([sys.executable, script], capture_output=True, text=True,
                            timeout=120).returncode for _ in range(3)]
    check(codes == [0, 0, 0],
          f"the program exits cleanly while daemon threads are inside gpuscope (exit codes {codes})")


SCRIPT = """\
import sys, time
import gpuscope as gs
for i in range(int(sys.argv[1])):
    with gs.step():
        with gs.phase("data"):
            time.sleep(0.002)
        with gs.phase("compute"):
            sum(range(20000))
print("script done")
"""


def check_run(bindir: str, workdir: str) -> None:
    script = os.path.join(workdir, "loop.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    out = os.path.join(workdir, "run-out")
    p = subprocess.run([os.path.join(bindir, "gpuscope"), "run", "--out", out, "--status", "0",
                        script, "30"], capture_output=True, text=True, timeout=300, cwd=workdir)
    check(p.returncode == 0 and "script done" in p.stdout,
          "gpuscope run runs the script with its arguments", f"rc {p.returncode}: {p.stderr[-2000:]}")
    check("30 steps" in p.stderr and "data" in p.stderr,
          "gpuscope run's report has the script's 30 steps and its data phase", p.stderr[-2000:])
    with open(os.path.join(out, "run.json")) as f:
        steps = json.load(f)["summary"]["total_steps"]
    check(steps == 30, f"run.json holds the 30 steps ({steps})")
    with open(os.path.join(out, "trace.json")) as f:
        events = json.load(f)["traceEvents"]
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("step "))
    phases = sum(1 for e in events if e.get("name") == "data")
    check(steps == 16 and phases == 16,
          f"trace.json has the last 16 steps (trace_steps' default: {steps}), each with its data phase")
    if importlib.util.find_spec("matplotlib") is None:  # the HTML report's plots; optional
        check("no report.html (pip install matplotlib)" in p.stderr,
              "without matplotlib, gpuscope run says how to get report.html", p.stderr[-2000:])
    else:
        check(os.path.getsize(os.path.join(out, "report.html")) > 1000, "report.html written")


def main() -> int:
    version, workdir = sys.argv[1], sys.argv[2]
    clean_root = "--clean-root" in sys.argv[3:]
    print(f"check_installed: Python {sys.version.split()[0]} at {sys.executable}")
    if clean_root:
        check_environment()
        # Before the import: a missing library then shows as ldd's diagnosis,
        # not as an ImportError.
        spec = importlib.util.find_spec("gpuscope")
        (package_dir,) = spec.submodule_search_locations
        (extension,) = glob.glob(os.path.join(package_dir, "_gpuscope*.so"))
        check_ldd(extension)
    import gpuscope as gs

    check(gs.__version__ == version, f"gpuscope.__version__ is {gs.__version__}")
    dist = importlib.metadata.version("gpuscope")
    check(dist == version, f"the installed distribution is gpuscope {dist}")
    check_loop(gs, clean_root)
    check_exit_with_daemon_threads(workdir)
    bindir = os.path.dirname(sys.executable)
    check_doctor(bindir, clean_root)
    check_run(bindir, workdir)
    print("check_installed: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
