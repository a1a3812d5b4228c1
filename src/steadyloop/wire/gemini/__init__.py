"""The Gemini wire (``Endpoint(api="gemini")``; internal: reached through the provider seam).

``shape`` maps a chat-completions body to a ``generateContent`` request and reads its chunks back (sans
I/O); ``provider`` sends it over the REST API.
"""
