"""How much gpuscope slows a real CPU PyTorch training loop, as its user
feels it, against the tools it replaces: the distortion benchmark.

    python benchmarks/real_loop.py [--rounds 25] [--sizes tiny,medium]
        [--threads 1] [--block N] [--seed 0] [--quick]

Two loops of real training steps on the CPU (an MLP: forward, cross-entropy
loss, backward, SGD with momentum; batches taken from an in-memory list):
**tiny**, 32-64-10 with batches of 16, whose step is mostly torch's per-op
overhead, and **medium**, 256-384-384-10 with batches of 64, mostly matrix
products. On the 2-core CI VM, shared with other jobs (2026-11-25), a tiny
step took 250-370 us (130 us is out of reach there: one Linear layer and
plain SGD took 170 us) and a medium one 2-3.5 ms; the bare row says what a
step took in the run. Every instrumented step has five phases, written as a
user writes them: data (the ``next()`` of the batch list), h2d
(``.to("cpu", copy=True)``, standing in for a host-to-device copy), forward
(model and loss), backward, optimizer (``step()`` and ``zero_grad()``).
Variants, all training the same model on the same batches:

- the bare loop, no instrumentation;
- gpuscope as documented: ``for x, y in s.steps(batches)`` (its ``next()`` is
  phase "data") and ``with s.phase("h2d")`` etc., ``gs.Session()`` with
  default options; then attribution rows, each labelled with the options it
  changes: telemetry off; the step scope only; every scope with the
  background worker asleep during the block (flush interval 10 s, telemetry
  off; the queue is drained after the block); every scope on a disabled
  session (each scope one branch: the Python ``with`` statements alone);
- ``torch.profiler.record_function`` around the same five phases (the data one
  around ``next()``, as torch's DataLoader does itself), no profiler running;
- ``torch.profiler.profile(activities=[ProfilerActivity.CPU])`` recording the
  whole block (no schedule: every step of the block is recorded) with the same
  ``record_function`` scopes and ``prof.step()`` at each step's end. The
  timing stops before the ``with`` block is left; leaving it (the profiler
  building its event list) is timed apart and printed under the table.

Method: interleaved A/B. After a warm-up block of every variant, each round
runs every other variant for one block (--block steps: 200 tiny, 50 medium),
in an order shuffled per round (--seed), each next to a bare block of its
own (which of the two runs first is drawn at random): on a shared machine
whose load changes from one second to the next, a pair a block apart sees
the same load. Right before every block, whatever the variant and outside
the timed region: ``gc.collect()``, a 20 ms sleep (on a busy machine a
thread that has just used the CPU is scheduled behind one that slept, and
the gpuscope variants have just pre-run their session) and one untimed
training step (the model back in the caches). Per variant: the median and
IQR (p25-p75, NumPy's linear interpolation) over the rounds of the block's
wall time per step (the bare row: over all its blocks); the cost added per
step as the median and IQR of the differences with its bare partner, in us
and in % of that partner; and the same for the CPU time of the loop's thread
(``time.thread_time_ns()``), which leaves out time the thread waited for a
CPU and the work of other threads (gpuscope's worker, the profiler's), and
for the median of the block's step times (every step of every variant ends
with one ``time.perf_counter_ns()``), which a few steps slowed by other
processes leave alone: on a busy machine the closest to the recording
thread's own cost. A control row runs the bare loop after the set-up the
gpuscope rows have (a session created, pre-run and closed): it should add
nothing. Under each table: the time to leave ``profile()``, and the share of
the bare blocks' wall time their thread spent on a CPU (below 100 %, other
threads or processes had it: the machine was busy).

Sessions: a user has one long-lived session in the process. gpuscope's one
background worker serves every open session and wakes at the shortest flush
interval among them, so sessions kept open side by side would drain each
other's queues every 10 ms (the worker-asleep row would measure nothing).
Instead each gpuscope block gets its own session, created outside the timed
region and brought into the state of a long-lived one before the block:
65,536 empty steps (131,072 records, drained as they go) wrap its queue, so
the recording thread writes to pages it has touched before, and fill its
window, so the aggregator evicts as in a long run. It is closed after the
block and its check, and the next block starts 20 ms later, by when the
worker has seen it go.

torch runs ``torch.set_num_threads(--threads)`` intra-op threads, default 1.
torch's own default on the 2-core machine is 2, which makes the loop share
both cores with gpuscope's worker and every other process: on a busy machine
OpenMP's barriers then wait for a descheduled thread and the medium step
took 7 to 100 times as long (measured while writing this): the numbers
would then measure the machine's load rather than the tools. A user with a
core to spare per thread sets it higher (``--threads 2``).

Prints a Markdown table per size (for docs/benchmarks.md). Exits 1, the
numbers being invalid, if a gpuscope session recorded a number of steps other
than it ran, misses a phase in the steps it recorded, or counts any misuse
(dropped records, incomplete steps).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import random
import shlex
import statistics
import sys
import time

import gpuscope as gs

try:
    import torch
except ImportError:  # pragma: no cover - the benchmark is about torch loops
    print("benchmarks/real_loop.py needs torch (pip install torch)", file=sys.stderr)
    sys.exit(2)

import _machine  # benchmarks/_machine.py, beside this script

# name: (input features, hidden width, hidden layers, batch size, steps a block)
SIZES = {
    "tiny": (32, 64, 1, 16, 200),
    "medium": (256, 384, 2, 64, 50),
}
CLASSES = 10
PHASES = ("h2d", "forward", "backward", "optimizer")  # and "data", the next() of s.steps()
PREFILL_STEPS = 65_536  # 2 records each: the default queue (131,072 records) wraps
SETTLE_S = 0.02  # a sleep before each block, and after a session closes (the worker goes idle)

BARE = "bare loop (no instrumentation)"
GS = "gpuscope: `s.steps()` + 4 `s.phase()`, `Session()` defaults"
GS_NO_TELEMETRY = "gpuscope, `Session(telemetry_interval_ms=0)`"
GS_STEP_ONLY = "gpuscope: `s.steps()` only (step + data), `Session()` defaults"
GS_WORKER_ASLEEP = ("gpuscope, `Session(flush_interval_ms=10000, telemetry_interval_ms=0)`: "
                    "worker asleep, drained after the block")
GS_DISABLED = "gpuscope, `Session(enabled=False)`: every scope one branch"
RECORD = "`torch.profiler.record_function` x5 (no profiler)"
PROFILE = "`torch.profiler.profile(activities=[CPU])` + `record_function` x5 + `prof.step()`"
CONTROL = ("control: bare loop, after a `Session()` was created, pre-run and closed as the "
           "gpuscope rows' are")


def prefill(s: gs.Session) -> None:
    """Brings a fresh session into a long-lived one's state: its queue has
    wrapped (the recording thread writes to pages it touched before), its
    window is full."""
    for _ in range(PREFILL_STEPS // 8192):
        for _ in s.steps(range(8192)):
            pass
        s.flush()  # drained as it goes: nothing dropped


class Timer:
    """Wall time and the calling thread's CPU time of a `with` block, in ns,
    and the median of the steps' wall times: each step appends its end with
    ``ends.append(clock())`` (the same two calls in every variant)."""

    def __enter__(self) -> "Timer":
        self.ends: list = []
        self.cpu = time.thread_time_ns()
        self.wall = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        start = self.wall
        self.wall = time.perf_counter_ns() - start
        self.cpu = time.thread_time_ns() - self.cpu
        marks = [start] + self.ends
        self.median_step = statistics.median(b - a for a, b in zip(marks, marks[1:]))


class Loop:
    """One model, optimizer and batch list, and the variants of a training
    step over them; each variant runs one block and returns its Timer."""

    def __init__(self, size: str, block: int, seed: int, settle_s: float = SETTLE_S):
        features, hidden, depth, batch, _ = SIZES[size]
        torch.manual_seed(seed)
        layers, width = [], features
        for _ in range(depth):
            layers += [torch.nn.Linear(width, hidden), torch.nn.ReLU()]
            width = hidden
        layers.append(torch.nn.Linear(width, CLASSES))
        self.model = torch.nn.Sequential(*layers)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        g = torch.Generator().manual_seed(seed)
        self.batches = [(torch.randn(batch, features, generator=g),
                         torch.randint(0, CLASSES, (batch,), generator=g)) for _ in range(block)]
        self.settle_s = settle_s
        self.profiler_exit_ns: list = []
        self.failures: list = []

    def settle(self) -> None:
        """Right before every timed block, whatever the variant, so that each
        starts from the same state: what the previous block left is collected,
        the thread sleeps (on a busy machine a thread that has just used the
        CPU, as one that pre-ran a session has, is scheduled behind one that
        has slept), and one untimed training step brings the model back into
        the caches."""
        gc.collect()
        time.sleep(self.settle_s)
        x, y = self.batches[0]
        self.loss_fn(self.model(x.to("cpu", copy=True)), y.to("cpu", copy=True)).backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)

    def bare(self) -> Timer:
        model, opt, loss_fn = self.model, self.opt, self.loss_fn
        self.settle()
        clock = time.perf_counter_ns
        with Timer() as t:
            end = t.ends.append
            for x, y in self.batches:
                x, y = x.to("cpu", copy=True), y.to("cpu", copy=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                end(clock())
        return t

    def gpuscope(self, s: gs.Session) -> Timer:
        model, opt, loss_fn = self.model, self.opt, self.loss_fn
        self.settle()
        clock = time.perf_counter_ns
        with Timer() as t:
            end = t.ends.append
            for x, y in s.steps(self.batches):
                with s.phase("h2d"):
                    x, y = x.to("cpu", copy=True), y.to("cpu", copy=True)
                with s.phase("forward"):
                    loss = loss_fn(model(x), y)
                with s.phase("backward"):
                    loss.backward()
                with s.phase("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                end(clock())
        return t

    def gpuscope_step_only(self, s: gs.Session) -> Timer:
        model, opt, loss_fn = self.model, self.opt, self.loss_fn
        self.settle()
        clock = time.perf_counter_ns
        with Timer() as t:
            end = t.ends.append
            for x, y in s.steps(self.batches):
                x, y = x.to("cpu", copy=True), y.to("cpu", copy=True)
                loss = loss_fn(model(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                end(clock())
        return t

    def _record_function_steps(self, t: Timer, prof=None) -> None:
        model, opt, loss_fn = self.model, self.opt, self.loss_fn
        rf = torch.profiler.record_function
        clock, end = time.perf_counter_ns, t.ends.append
        it = iter(self.batches)
        for _ in range(len(self.batches)):
            with rf("data"):
                x, y = next(it)
            with rf("h2d"):
                x, y = x.to("cpu", copy=True), y.to("cpu", copy=True)
            with rf("forward"):
                loss = loss_fn(model(x), y)
            with rf("backward"):
                loss.backward()
            with rf("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            if prof is not None:
                prof.step()
            end(clock())

    def record_function(self) -> Timer:
        self.settle()
        with Timer() as t:
            self._record_function_steps(t)
        return t

    def profile(self) -> Timer:
        self.settle()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with Timer() as t:
                self._record_function_steps(t, prof)
            t1 = time.perf_counter_ns()
        self.profiler_exit_ns.append(time.perf_counter_ns() - t1)
        return t

    def control(self) -> Timer:
        s = gs.Session()
        prefill(s)
        s.close()
        time.sleep(self.settle_s)
        return self.bare()

    def with_session(self, label: str, body, options: dict, phases: tuple):
        """A variant that runs `body` on a fresh session brought into a
        long-lived session's state, then checks what it recorded."""

        def run() -> Timer:
            s = gs.Session(**options)
            try:
                enabled = options.get("enabled", True)
                if enabled:
                    prefill(s)
                t = body(s)
                if enabled:
                    self.check(label, s.summary(), phases)
                return t
            finally:
                s.close()
                time.sleep(self.settle_s)

        return run

    def check(self, label: str, summary: gs.Summary, phases: tuple) -> None:
        block = len(self.batches)
        if summary.total_steps != PREFILL_STEPS + block:
            self.failures.append(f"{label}: recorded {summary.total_steps} steps, ran "
                                 f"{PREFILL_STEPS + block} ({PREFILL_STEPS} filling it, {block} timed)")
        for p in phases:
            got = summary.phases[p].steps if p in summary.phases else 0
            if got != min(block, summary.window):
                self.failures.append(f"{label}: phase {p} in {got} steps of the window, expected "
                                     f"{min(block, summary.window)}")
        misuse = {k: v for k, v in summary.misuse.items() if v}
        if misuse:
            self.failures.append(f"{label}: misuse {misuse}")

    def variants(self) -> list:
        defaults: dict = {}
        return [
            (BARE, self.bare),
            (GS, self.with_session(GS, self.gpuscope, defaults, PHASES)),
            (GS_NO_TELEMETRY, self.with_session(GS_NO_TELEMETRY, self.gpuscope,
                                                {"telemetry_interval_ms": 0}, PHASES)),
            (GS_WORKER_ASLEEP, self.with_session(
                GS_WORKER_ASLEEP, self.gpuscope,
                {"flush_interval_ms": 10_000, "telemetry_interval_ms": 0}, PHASES)),
            (GS_STEP_ONLY, self.with_session(GS_STEP_ONLY, self.gpuscope_step_only, defaults, ())),
            (GS_DISABLED, self.with_session(GS_DISABLED, self.gpuscope, {"enabled": False}, ())),
            (RECORD, self.record_function),
            (PROFILE, self.profile),
            (CONTROL, self.control),
        ]


def quartiles(values: list) -> tuple:
    """Median, p25, p75 (NumPy's linear interpolation)."""
    if len(values) == 1:
        return values[0], values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[1], q[0], q[2]


def measure(loop: Loop, rounds: int, rng: random.Random) -> tuple:
    """Per variant, the Timer of each of its blocks, and of the bare block
    run next to each (the bare loop's own entry: all its blocks)."""
    variants = loop.variants()
    bare = variants[0][1]
    for _, run in variants:  # warm-up: torch's allocator, the profiler's start
        run()
    loop.profiler_exit_ns.clear()
    blocks: dict = {label: [] for label, _ in variants}
    partners: dict = {label: [] for label, _ in variants[1:]}
    for _ in range(rounds):
        order = variants[1:]
        rng.shuffle(order)
        for label, run in order:
            if rng.random() < 0.5:
                b, t = bare(), run()
            else:
                t, b = run(), bare()
            blocks[label].append(t)
            blocks[BARE].append(b)
            partners[label].append(b)
    return blocks, partners


def table(blocks: dict, partners: dict, steps: int) -> list:
    """The Markdown rows: per variant, wall time per step, and what it adds to
    the bare block run next to it (wall and the loop thread's CPU)."""

    def us(timers: list, attr: str) -> list:
        return [getattr(t, attr) / steps / 1e3 for t in timers]

    def spread(values: list, fmt: str, sep: str) -> str:
        med, lo, hi = quartiles(values)
        return f"{med:{fmt}} ({lo:{fmt}}{sep}{hi:{fmt}})"

    lines = ["| variant | µs per step | added µs per step | added % | added CPU µs per step, "
             "loop's thread | added µs, median step |", "|---|---:|---:|---:|---:|---:|"]
    for label, timers in blocks.items():
        cell = spread(us(timers, "wall"), ".1f", "–")
        if label == BARE:
            lines.append(f"| {label} | {cell} | — | — | — | — |")
            continue
        wall, bare = us(timers, "wall"), us(partners[label], "wall")
        diff = [v - b for v, b in zip(wall, bare)]
        pct = [100 * (v - b) / b for v, b in zip(wall, bare)]
        cpu_diff = [v - b for v, b in zip(us(timers, "cpu"), us(partners[label], "cpu"))]
        step_diff = [(v.median_step - b.median_step) / 1e3 for v, b in zip(timers, partners[label])]
        lines.append(f"| {label} | {cell} | {spread(diff, '+.2f', ' to ')} | {spread(pct, '+.1f', ' to ')} "
                     f"| {spread(cpu_diff, '+.2f', ' to ')} | {spread(step_diff, '+.2f', ' to ')} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--sizes", default="tiny,medium", help="comma-separated: " + ",".join(SIZES))
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads()")
    ap.add_argument("--block", type=int, default=None,
                    help="steps a block (default 200 tiny, 50 medium)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: 2 rounds of 10-step blocks, 5 ms sleeps (numbers not meaningful)")
    args = ap.parse_args()
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    unknown = [s for s in sizes if s not in SIZES]
    if unknown or not sizes:
        ap.error(f"--sizes: unknown {unknown}; choose from {', '.join(SIZES)}")
    rounds = 2 if args.quick else args.rounds
    if rounds < 1 or (args.block is not None and args.block < 1):
        ap.error("--rounds and --block must be at least 1")
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)

    started = datetime.datetime.now(datetime.timezone.utc)
    load0 = os.getloadavg()[0]
    sections, failures = [], []
    for size in sizes:
        block = args.block or (10 if args.quick else SIZES[size][4])
        loop = Loop(size, block, args.seed, 0.005 if args.quick else SETTLE_S)
        gc.collect()
        gc.freeze()  # what exists now is never collected: gc.collect() between blocks stays short
        t0 = time.perf_counter()
        blocks, partners = measure(loop, rounds, rng)
        features, hidden, depth, batch, _ = SIZES[size]
        exit_ms = statistics.median(loop.profiler_exit_ns) / 1e6
        on_cpu = statistics.median(t.cpu / t.wall for t in blocks[BARE])
        sections.append((
            f"**{size}**: MLP {features}-{'-'.join([str(hidden)] * depth)}-{CLASSES}, batch {batch}, "
            f"{block} steps a block, {rounds} rounds ({time.perf_counter() - t0:.0f} s)",
            table(blocks, partners, block),
            f"Leaving `torch.profiler.profile()` after a block (not counted above): "
            f"{exit_ms:.1f} ms median, {exit_ms * 1e3 / block:.0f} µs per recorded step. "
            f"The bare loop's thread was on a CPU {100 * on_cpu:.0f} % of its blocks' time "
            f"(median; under 100: other threads or processes had the CPU)."))
        failures += loop.failures

    cmd = " ".join(shlex.quote(a) for a in ["python", "benchmarks/real_loop.py"] + sys.argv[1:])
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, torch {torch.__version__} "
          f"with {torch.get_num_threads()} intra-op thread(s), {started:%Y-%m-%d %H:%M} UTC, "
          f"load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n")
    print(f"`{cmd}`\n")
    print("Each cell: median (p25–p75) over the rounds, of one block's time per step; \"added\": "
          "minus the bare block run next to it (the bare row: all of them); CPU: the loop thread's "
          "CPU time (`time.thread_time_ns()`), without time spent waiting for a CPU or in other "
          "threads; median step: the median of the block's step times, which a few steps slowed "
          "by other processes leave alone.")
    for head, lines, note in sections:
        print(f"\n{head}\n")
        print("\n".join(lines))
        print(f"\n{note}")
    if failures:
        print("\nINVALID: gpuscope did not record what ran:", file=sys.stderr)
        for f in failures:
            print(f"  {f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
