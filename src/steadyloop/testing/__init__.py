"""Test doubles for steadyloop's users and its own tests: a scripted OpenAI-compatible HTTP server."""
