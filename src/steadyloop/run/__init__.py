"""The phases of one run of the agent loop, a module each (internal: ``steadyloop.loop`` is the public face).

``config`` says what a run is (``RunConfig``); ``state`` holds one run's state and its events; then, in the
order a step takes them: ``prepare`` (the request: context, fold, hooks, body), ``reply`` (the request
streamed, recovered and continued, closed as the step's assistant message), ``calls`` (the tools it asked
for), ``decide`` (whether to go on), and ``ending`` (how a run ends, on every path). ``lifecycle`` gathers
the host's lifecycle hooks onto the question. ``loop.run_loop`` is those phases in order.
"""
