"""A live training loop for the fleet tests (test_fleet.py), on the simulated
device with the real clock, so that Prometheus, the Pushgateway and
node_exporter see what a job would show them.

MODE picks the loop:
  healthy  the GPU busy most of each step (a 1 ms loader, a 20 ms kernel);
  idle     the GPU idle most of each step (a 20 ms loader, a 2 ms kernel);
  hung     healthy for HEALTHY_S seconds, then stuck in `forward` for ever
           (writes OUT/hung with the Unix time it hung);
  host     healthy, without the simulated device: no GPU numbers, but the
           host's telemetry (a simulated session has none, to stay exact).
It runs STEPS steps (0: until killed). With PORT_FILE it serves /metrics and
writes the port there; with PUSH (a Pushgateway URL) and/or TEXTFILE it
pushes every PUSH_EVERY seconds and at exit (DELETE=1: deletes at exit).
With OTLP (an OTLP/HTTP endpoint) it exports every PUSH_EVERY seconds and
at exit. With FINAL it writes its last ``s.prometheus()`` there at the end
of the loop. RUN_ID is the session's run_id.
"""

import os
import pathlib
import time

import gpuscope as gs


def main() -> None:
    mode = os.environ.get("MODE", "healthy")
    steps = int(os.environ.get("STEPS", "0"))
    healthy_s = float(os.environ.get("HEALTHY_S", "6"))
    gpu = None if mode == "host" else gs.testing.SimulatedDevice()
    s = gs.Session(run_id=os.environ.get("RUN_ID") or None, simulated_device=gpu, stream=0, window=64)
    if os.environ.get("PORT_FILE"):
        server = s.serve_prometheus(0)
        tmp = pathlib.Path(os.environ["PORT_FILE"] + ".tmp")
        tmp.write_text(str(server.port))
        tmp.rename(os.environ["PORT_FILE"])
    if os.environ.get("PUSH") or os.environ.get("TEXTFILE"):
        s.push_prometheus(os.environ.get("PUSH") or None, textfile=os.environ.get("TEXTFILE") or None,
                          every=float(os.environ.get("PUSH_EVERY", "60")),
                          delete_at_exit=os.environ.get("DELETE") == "1", timeout_s=2.0)
    if os.environ.get("OTLP"):
        s.export_otlp(os.environ["OTLP"], every=float(os.environ.get("PUSH_EVERY", "60")), timeout_s=2.0)
    loader_s, kernel_ns = (0.020, 2_000_000) if mode == "idle" else (0.001, 20_000_000)
    start = time.monotonic()
    i = 0
    while steps == 0 or i < steps:
        with s.step(samples=32):
            with s.phase("data"):
                time.sleep(loader_s)
            with s.phase("forward"):
                if mode == "hung" and time.monotonic() - start > healthy_s:
                    out = pathlib.Path(os.environ["OUT"])
                    (out / "hung").write_text(repr(time.time()))
                    while True:
                        time.sleep(1)
                if gpu is None:
                    time.sleep(kernel_ns / 1e9)
                else:
                    gpu.launch(kernel_ns)
                    time.sleep(gpu.synchronize() / 1e9)
        i += 1
    if os.environ.get("FINAL"):
        pathlib.Path(os.environ["FINAL"]).write_text(s.prometheus())


if __name__ == "__main__":
    main()
