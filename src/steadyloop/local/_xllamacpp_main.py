"""Internal: serve a GGUF model with PyPI ``xllamacpp``, run by the xllamacpp venv's Python as a script.

xllamacpp compiles llama.cpp's own server code into a wheel and runs it in-process: the same ``/health``,
``/v1/*``, ``/props``, SSE and error bodies as ``llama-server``. Its HTTP listener comes up first and answers
503 "Loading model" until the model is loaded, exactly like llama-server.

usage: python _xllamacpp_main.py --model PATH --port N [--ctx 4096] [--threads N] [--alias NAME]
                                 [--chat-template-file FILE] [--api-key-file FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import threading


def main() -> None:
    """Parse the arguments, start the server on 127.0.0.1, and run until SIGTERM or SIGINT."""
    # Imported here: this file ships inside steadyloop, where xllamacpp is not installed, and only the
    # xllamacpp venv ever runs it.
    import xllamacpp as xlc

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--alias", default="")
    ap.add_argument("--chat-template-file", default="")
    ap.add_argument("--api-key-file", default="")
    a = ap.parse_args()

    p = xlc.CommonParams()
    p.model.path = a.model
    p.n_ctx = a.ctx
    p.cpuparams.n_threads = a.threads
    p.cpuparams_batch.n_threads = a.threads
    p.hostnames = ["127.0.0.1"]
    p.port = a.port
    p.use_jinja = True
    p.ui = False
    if a.alias:
        p.model_alias = {a.alias}
    if a.chat_template_file:
        with open(a.chat_template_file) as f:
            p.chat_template = f.read()
    if a.api_key_file:
        # As llama-server's --api-key-file reads it: one key a line, "#" lines are comments.
        with open(a.api_key_file) as f:
            keys = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            raise SystemExit(f"{a.api_key_file} holds no key")
        p.api_keys = keys

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server = xlc.Server(p)
    print(f"xllamacpp listening on {server.listening_address}", flush=True)
    stop.wait()
    os._exit(0)  # native teardown can hang or crash; the OS frees everything anyway


if __name__ == "__main__":
    main()
