"""How requests reach a server (internal; ``configure_clients`` and its kin are public at the root).

``clients`` keeps the pooled clients per endpoint and event loop; a streamed chat-completions request goes
through a ``ChatClient`` (``chat_client``): straight over aiohttp (``aiohttp_chat``) or through the SDK
(``sdk_chat``), whose reply bodies ``stream_body`` reads; ``rest`` is plain HTTP for the native wires.
"""
