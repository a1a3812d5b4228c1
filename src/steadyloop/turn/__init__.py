"""One model call end to end: stream assembly, thinking fences, negotiation, retry, sizing, continuation."""
