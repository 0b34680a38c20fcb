"""CPU per token of the stream reader alone: native (harness/client/_native.c) vs pure Python.

The load process's whole CPU per output token also holds per-request work (prompt generation,
Locust, recording) and depends on how often reads coalesce (a busy box coalesces more and reads
less). This isolates the reader's part with a fixed read pattern: C streams over loopback TCP
(SO_TIMESTAMPNS on), a writer that sends one SSE event to every stream per step (a batched
engine's decode step), and a reader that reads the epoll batch exactly as the load process's
reactor does: natively one `read_ready` call per batch, in Python `epoll.poll` plus one
`recvmsg`+`feed` per ready socket. After the last event, each response is interpreted
(harness.client.sse.interpret: the native scan or the Python loop). Only the reader's side is
timed, in CPU time of this thread (user + kernel: CLOCK_THREAD_CPUTIME_ID), so the writer and
the box's other load do not count. Readers alternate, A B A B.

    python bench/reader_cpu.py                       # 256 streams x 100 tokens, 5 rounds each
    python bench/reader_cpu.py --streams 512 --tokens 200 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tick_server import C_ROLE, C_TOKEN, HEAD, tail

from harness.client import http_stream
from harness.client.adapters.base import get_adapter
from harness.client.http_stream import (
    _CMSG_SPACE,
    READ_SIZE,
    SCM_TIMESTAMPNS,
    SO_TIMESTAMPNS,
    ResponseParser,
    perf_ns,
    wall_ns,
)
from harness.client.sse import interpret
from harness.metrics.record import RequestRecord
from harness.workload.builtin_tokenizer import BuiltinTokenizer

cpu = time.thread_time_ns


def pairs(n: int) -> list[tuple[socket.socket, socket.socket]]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(n)
    out = []
    for _ in range(n):
        c = socket.create_connection(srv.getsockname())
        s, _ = srv.accept()
        for x in (c, s):
            x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        c.setblocking(False)
        out.append((c, s))
    srv.close()
    return out


def one_round(reader: str, streams: int, tokens: int) -> tuple[float, float, int]:
    """(read CPU ns, interpret CPU ns, events read) for one batch of responses."""
    http_stream.READER = reader
    conns = pairs(streams)
    ep = select.epoll()
    offset = wall_ns() - perf_ns()
    parsers: dict[int, Any] = {}  # native or Python parsers
    socks = {c.fileno(): c for c, _s in conns}
    for c, _s in conns:
        fd = c.fileno()
        parsers[fd] = http_stream.new_parser(fd, True, offset, tokens + 4) if reader == "native" else ResponseParser()
        ep.register(fd, select.EPOLLIN)
    steps = [HEAD + C_ROLE] + [C_TOKEN] * (tokens - 1) + [tail(tokens)]
    read_ns = 0
    events = 0
    sol, scm, timespec = socket.SOL_SOCKET, SCM_TIMESTAMPNS, http_stream._TIMESPEC
    if reader == "native":
        read_ready = http_stream._native.read_ready
    for payload in steps:
        for _c, s in conns:
            s.sendall(payload)
        left = streams
        while left:
            t0 = cpu()
            if reader == "native":
                _finished, ready = read_ready(ep.fileno(), parsers)
            else:  # the Python reactor's loop (harness.load.reactor.Reactor._loop / _read)
                batch = ep.poll(0, 4096)
                ready = len(batch)
                for fd, _mask in batch:
                    p = parsers[fd]
                    data, anc, _f, _a = socks[fd].recvmsg(READ_SIZE, _CMSG_SPACE)
                    now = perf_ns()
                    stamp = now
                    for level, kind, pl in anc:
                        if level == sol and kind == scm and len(pl) >= 16:
                            sec, nsec = timespec.unpack_from(pl)
                            stamp = min(sec * 1_000_000_000 + nsec - offset, now)
                            break
                    p.feed(data, stamp)
            read_ns += cpu() - t0
            left -= ready
            events += ready
    adapter, count = get_adapter("openai-chat"), BuiltinTokenizer().count
    t0 = cpu()
    for p in parsers.values():
        rec = RequestRecord(index=0, class_name="c", sent_ns=0)
        interpret(rec, p.res.lines, adapter, count)
        assert rec.output_tokens == tokens and rec.error_kind is None, rec.error_kind
    interp_ns = cpu() - t0
    for c, s in conns:
        c.close()
        s.close()
    ep.close()
    return read_ns, interp_ns, events


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, default=256)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    if not http_stream.native_available():
        raise SystemExit(
            "the native reader is not built here: pip install -e . (or python setup.py build_ext --inplace)"
        )
    http_stream.warm_kernel_timestamps()
    tokens_total = args.streams * args.tokens
    per: dict[str, list[tuple[float, float]]] = {"native": [], "python": []}
    print(f"{'reader':>7} {'read µs/token':>14} {'interpret µs/token':>19} {'total µs/token':>15} {'reads/event':>12}")
    for _ in range(args.rounds):
        for reader in ("native", "python"):
            read_ns, interp_ns, reads = one_round(reader, args.streams, args.tokens)
            r, i = read_ns / 1000 / tokens_total, interp_ns / 1000 / tokens_total
            per[reader].append((r, i))
            print(
                f"{reader:>7} {r:>14.3f} {i:>19.3f} {r + i:>15.3f} {reads / (args.streams * (args.tokens + 1)):>12.2f}",
                flush=True,
            )
    med = {k: (statistics.median(a for a, _ in v), statistics.median(b for _, b in v)) for k, v in per.items()}
    for k, (r, i) in med.items():
        print(f"median {k}: read {r:.3f} + interpret {i:.3f} = {r + i:.3f} µs CPU per token")
    n, py = med["native"], med["python"]
    print(
        f"python/native: read {py[0] / n[0]:.2f}x, interpret {py[1] / n[1]:.2f}x, "
        f"reader total {(py[0] + py[1]) / (n[0] + n[1]):.2f}x; {args.streams} streams x {args.tokens} tokens, "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
