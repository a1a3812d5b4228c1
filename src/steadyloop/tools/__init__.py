"""Tools: definitions, schema compat, argument repair, text-call recovery, scheduling, approvals."""
