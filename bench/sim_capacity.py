"""How many tokens/s the simulator streams in scripted mode, and how late its writes are.

Starts `python -m harness.sim` in scripted mode with `--trace`, keeps N streams busy for a while
with a deliberately cheap raw-socket client (keep-alive connections, each issuing the next
request when the previous one ends), then reads the trace. Send lateness of a token is
(write time - scheduled time), scheduled = arrival + TTFT + i x ITL, both from the simulator's
own perf_counter_ns, so client load does not enter it.

    python bench/sim_capacity.py                      # 64 streams x 2.5 ms ITL (~25k tokens/s offered)
    python bench/sim_capacity.py --streams 128 --itl-ms 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


PROBE = """
import sys, time
end = time.monotonic() + float(sys.argv[1]); lat = []
while time.monotonic() < end:
    t = time.perf_counter(); time.sleep(0.001); lat.append(time.perf_counter() - t - 0.001)
lat.sort(); n = len(lat)
print(f"{lat[n // 2] * 1e3:.3f} {lat[int(n * 0.99)] * 1e3:.3f}")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_busy() -> tuple[float, float]:
    """(busy, total) jiffies over all CPUs, from /proc/stat."""
    vals = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class StreamClient(asyncio.Protocol):
    """One keep-alive connection that streams completions back to back, counting events."""

    def __init__(self, request: bytes, stats: dict, stop: asyncio.Event) -> None:
        self.request = request
        self.stats = stats
        self.stop = stop
        self.transport: asyncio.Transport | None = None
        self.tail = b""
        self.closed = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP connection
        self.transport = transport
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self) -> None:
        self.stats["requests"] += 1
        assert self.transport is not None  # connected
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.stats["events"] += data.count(b"\n\n")
        buf = self.tail + data
        if b"0\r\n\r\n" in buf and b"[DONE]" in buf:  # end of one response
            self.stats["done"] += 1
            self.tail = b""
            if not self.stop.is_set():
                self.send()
            elif self.transport is not None:
                self.transport.close()
        else:
            self.tail = buf[-32:]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def drive(port: int, streams: int, max_tokens: int, duration: float, spread_s: float) -> dict:
    loop = asyncio.get_running_loop()
    body = json.dumps(
        {"model": "sim-llama-8b", "prompt": "hello world", "max_tokens": max_tokens, "ignore_eos": True, "stream": True}
    ).encode()
    request = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    stats = {"requests": 0, "events": 0, "done": 0}
    stop = asyncio.Event()
    clients = []
    for _ in range(streams):
        _, c = await loop.create_connection(lambda: StreamClient(request, stats, stop), "127.0.0.1", port)
        clients.append(c)
    # start the streams at random times over one request's length, so arrivals, completions and
    # token phases are spread as in a steady state rather than all synchronized
    rng = random.Random(0)
    for c in clients:
        loop.call_later(rng.random() * spread_s, c.send)
    t0 = time.perf_counter_ns()
    await asyncio.sleep(duration)
    stop.set()
    t1 = time.perf_counter_ns()
    await asyncio.wait_for(asyncio.gather(*[c.closed for c in clients]), 60)
    return {**stats, "t0": t0, "t1": t1}


def analyse(trace: Path, ttft_ms: float, itl_ms: float, t0: int, t1: int, warmup_s: float) -> dict:
    ttft_ns, itl_ns = ttft_ms * 1e6, itl_ms * 1e6
    start = t0 + warmup_s * 1e9
    lateness: list[float] = []
    tokens = 0
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        i = 0
        for stamp, n, kind in rec["writes"]:
            if kind != "content":
                continue
            if start <= stamp <= t1:
                lateness.append((stamp - (rec["received_ns"] + ttft_ns + i * itl_ns)) / 1e6)
                tokens += n
            i += n
    lateness.sort()

    def pct(p: float) -> float:
        return lateness[min(len(lateness) - 1, int(p * (len(lateness) - 1)))] if lateness else float("nan")

    return {
        "tokens": tokens,
        "tokens_per_s": tokens / ((t1 - start) / 1e9),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "max_ms": lateness[-1] if lateness else float("nan"),
        "samples": len(lateness),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--itl-ms", type=float, default=2.5)
    ap.add_argument("--ttft-ms", type=float, default=20.0)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("--duration", type=float, default=8.0, help="seconds measured, after the ramp-up")
    ap.add_argument(
        "--warmup",
        type=float,
        default=0.5,
        help="seconds excluded after the ramp-up (streams start over one request's length)",
    )
    ap.add_argument("--sim-arg", action="append", default=[], help="extra simulator flag (repeatable)")
    ap.add_argument(
        "--nice",
        type=int,
        default=None,
        help="renice the simulator process (e.g. -10, needs root) to measure it on a busy host",
    )
    a = ap.parse_args(argv)

    load0 = os.getloadavg()[0]
    port = free_port()
    tmp = Path(tempfile.mkdtemp(prefix="sim_capacity_"))
    trace = tmp / "trace.jsonl"
    cmd = [
        sys.executable,
        "-m",
        "harness.sim",
        "--port",
        str(port),
        "--startup-delay",
        "0",
        "--scripted-ttft-ms",
        str(a.ttft_ms),
        "--scripted-itl-ms",
        str(a.itl_ms),
        "--max-model-len",
        "8192",
        "--disable-log-stats",
        "--trace",
        str(trace),
        *a.sim_arg,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    err = open(tmp / "sim.err", "w")  # lives as long as the simulator
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    if a.nice is not None:
        os.setpriority(os.PRIO_PROCESS, proc.pid, a.nice)
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None:
                    print((tmp / "sim.err").read_text(), file=sys.stderr)
                    return 1
                time.sleep(0.05)
        cpu0, w0, (busy0, total0) = cpu_seconds(proc.pid), time.monotonic(), host_busy()
        spread = (a.ttft_ms + a.max_tokens * a.itl_ms) / 1000
        # a bystander process that sleeps 1 ms at a time: its oversleep is what the host's
        # scheduler alone costs any process on this machine during the run
        probe = subprocess.Popen(
            [sys.executable, "-c", PROBE, str(a.duration + spread)], stdout=subprocess.PIPE, text=True
        )
        res = asyncio.run(drive(port, a.streams, a.max_tokens, a.duration + spread, spread))
        probe_p50, probe_p99 = (float(x) for x in probe.communicate(timeout=30)[0].split())
        cpu = (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - w0)
        busy1, total1 = host_busy()
        host = (busy1 - busy0) / max(1, total1 - total0)
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(30)
    fig = analyse(trace, a.ttft_ms, a.itl_ms, res["t0"], res["t1"], spread + a.warmup)
    target = a.streams * 1000.0 / a.itl_ms
    print(
        f"scripted mode: {a.streams} streams x {a.itl_ms} ms ITL (offered ~{target:,.0f} tokens/s), "
        f"TTFT {a.ttft_ms} ms, {a.max_tokens} tokens/request, {a.duration:.1f} s measured after a {spread + a.warmup:.1f} s ramp-up"
    )
    print(
        f"  delivered: {fig['tokens_per_s']:,.0f} tokens/s ({fig['tokens']:,} tokens, "
        f"{res['done']} requests; client saw {res['events']:,} events)"
    )
    print(
        f"  send lateness (write - schedule): p50 {fig['p50_ms']:.3f} ms, p99 {fig['p99_ms']:.3f} ms, "
        f"p99.9 {fig['p999_ms']:.3f} ms, max {fig['max_ms']:.3f} ms"
    )
    print(f"  host wake-up oversleep of a bystander sleeping 1 ms: p50 {probe_p50:.3f} ms, p99 {probe_p99:.3f} ms")
    print(
        f"  simulator CPU: {cpu * 100:.0f}% of one core; exit code {rc}; host CPUs {host * 100:.0f}% busy "
        f"(load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
        + (f"; simulator reniced to {a.nice}" if a.nice is not None else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
