"""An agent as a document: read one, layer several, write one back out (public).

A versioned TOML or JSON document says what an agent is (its model, prompt, tools, approvals, context
keeping, hooks), so any host on steadyloop can store one, layer it over its own settings and run it. This
package does no I/O and imports nothing of the runtime: it reads values and returns values, so a document
can be checked anywhere. ``steadyloop.agent_settings`` turns a resolved spec into an ``Agent``'s settings.

::

    parsed = parse_spec_text(text)                       # every problem at once: SpecError, or warnings
    spec = resolve_agent_spec([host_defaults, parsed.spec])   # weakest layer first

See ``docs/spec.md`` for the format.
"""

from . import _values
from ._layers import export_spec, resolve_agent_spec, resolve_api_key
from ._parse import parse_spec, parse_spec_text
from ._values import *  # noqa: F403  (the values' names are listed once, in _values.__all__)

# Sorted as the root's is: the values' constants and classes, then this package's functions.
__all__: list[str] = []
__all__ += _values.__all__
__all__ += ["export_spec", "parse_spec", "parse_spec_text", "resolve_agent_spec", "resolve_api_key"]
