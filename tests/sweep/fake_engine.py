"""A tiny stand-in engine for the sweep tests (stdlib only, starts in ~0.1 s).

    python fake_engine.py --port P [--style vllm|sglang|llamacpp|tgi] [--startup-delay S]
        [--max-num-seqs N] [--max-model-len L] [--num-gpu-blocks-override B]
        [--spawn-child] [--ignore-sigterm] [--die-after-requests N] [--exit-before-ready CODE]

Readiness per style: vllm = nothing listens until ready, then /health 200; sglang and llamacpp
= /health 503 while "starting", then 200; tgi = like sglang. Prints each kind's startup lines.
Exits 1 with vLLM's ValueError when B x 16 < L (too small a KV cache). /v1/completions answers
a JSON stub; /reset_prefix_cache counts resets (GET /resets reports the count). The tgi style
logs the PREFIX_CACHING it was started with.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BLOCK = 16


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--style", default="vllm")
    p.add_argument("--startup-delay", type=float, default=0.2)
    p.add_argument("--max-num-seqs", type=int, default=8)
    p.add_argument("--max-model-len", type=int, default=256)
    p.add_argument("--num-gpu-blocks-override", type=int, default=None)
    p.add_argument("--spawn-child", action="store_true")
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--die-after-requests", type=int, default=0)
    p.add_argument("--exit-before-ready", type=int, default=None)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args()

    def log(msg: str) -> None:
        print(msg, flush=True)

    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.spawn_child:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN) if {args.ignore_sigterm!r} else None; time.sleep(3600)",
            ]
        )
        log(f"worker pid={child.pid}")
        with open(os.environ.get("FAKE_CHILD_PIDFILE", os.devnull), "w") as f:
            f.write(str(child.pid))

    state = {"ready": False, "requests": 0, "resets": 0}
    blocks = args.num_gpu_blocks_override or 4096
    tokens = blocks * BLOCK

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _send(self, code: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                if state["ready"]:
                    self._send(200, {"status": "ok"})
                elif args.style == "llamacpp":
                    self._send(503, {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}})
                else:
                    self._send(503, {"error": "unhealthy"})
            elif self.path == "/v1/models":
                self._send(200, {"data": [{"id": "fake", "max_model_len": args.max_model_len}]})
            elif self.path == "/resets":
                self._send(200, {"resets": state["resets"]})
            else:
                self._send(404, {})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            if self.path in ("/reset_prefix_cache", "/flush_cache"):
                state["resets"] += 1
                self._send(200, {})
                return
            state["requests"] += 1
            if args.die_after_requests and state["requests"] >= args.die_after_requests:
                log("RuntimeError: simulated engine crash")
                os._exit(3)
            self._send(200, {"choices": [{"text": "x"}], "usage": {"completion_tokens": 1}})

    # vLLM binds late (nothing answers before the engine is up); SGLang/llama.cpp answer 503 early
    server: ThreadingHTTPServer | None = None
    if args.style != "vllm":
        server = ThreadingHTTPServer((args.host, args.port), H)
        threading.Thread(target=server.serve_forever, daemon=True).start()

    log("INFO Loading weights took 0.02 seconds")
    time.sleep(args.startup_delay)
    if args.exit_before_ready is not None:
        log(f"error: asked to exit with {args.exit_before_ready}")
        return args.exit_before_ready
    if args.style in ("vllm", "sim"):
        if tokens < args.max_model_len:
            log(
                "ValueError: To serve at least one request with the model's max seq len "
                f"({args.max_model_len}), (0.0 GiB KV cache is needed, which is larger than the available KV cache memory"
            )
            log("RuntimeError: Engine core initialization failed. See root cause above.")
            return 1
        log(
            f"INFO GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {args.max_model_len:,} tokens per request: {tokens / args.max_model_len:.2f}x"
        )
        log("INFO init engine (profile, create kv cache, warmup model) took 0.20 s")
    elif args.style == "sglang":
        log(
            f"max_total_num_tokens={tokens}, chunked_prefill_size=2048, max_prefill_tokens=16384, max_running_requests={args.max_num_seqs}, context_len={args.max_model_len}, available_gpu_mem=10.5 GB"
        )
    elif args.style == "tgi":
        log(f"Setting max batch total tokens to {tokens}")
        # the settings TGI takes from its environment, as a sweep's env: flags set them
        log(f"env PREFIX_CACHING={os.environ.get('PREFIX_CACHING', '(unset)')}")
    if server is None:
        server = ThreadingHTTPServer((args.host, args.port), H)
        threading.Thread(target=server.serve_forever, daemon=True).start()
    state["ready"] = True
    if args.style == "sglang":
        log("The server is fired up and ready to roll!")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
