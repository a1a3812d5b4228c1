"""``python -m steadyloop.cli``: the ``steadyloop`` command without its console script."""

import sys

from .app import main

sys.exit(main())
