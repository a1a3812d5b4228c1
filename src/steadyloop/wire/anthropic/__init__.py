"""The Anthropic Messages wire (``Endpoint(api="anthropic")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a Messages request and ``events`` reads the stream's events back
as chat-completions chunks (both sans I/O); ``provider`` sends through the official SDK.
"""
