"""The wordings endpoints use when they refuse a request, as data (internal to ``failures``).

Rules are tried in order and the first match decides the kind, so the order is the policy:

1. a model still loading, bad credentials and exhausted billing come first: they say nothing else;
2. rate limits come before overflows, because a token-per-minute refusal borrows an overflow's words
   ("Request too large ... tokens per min") and means the opposite: wait, do not shrink;
3. overflows come before out-of-range values, because vLLM blames ``max_tokens`` for a prompt that
   does not fit ("'max_tokens' is too large: 2048. This model's maximum context length is ...");
4. specific refusals (tools, grammar, a value, a number, a field) before the generic ones;
5. busy/overloaded wording last, so it never hides a more specific reason.

Each pattern is searched in the server's words joined with its error ``code`` and ``type``, so a body
whose message is empty but whose code says ``context_length_exceeded`` still reads right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

FailureKind = Literal[
    "context_overflow",
    "rate_limited",
    "model_loading",
    "transient",
    "refused_field",
    "refused_value",
    "out_of_range",
    "grammar",
    "tools_unsupported",
    "auth",
    "not_found",
    "invalid_request",
    "refusal",
    "other",
]

KINDS: frozenset[str] = frozenset(get_args(FailureKind))

_FLAGS = re.IGNORECASE | re.DOTALL


@dataclass(frozen=True, slots=True)
class Rule:
    """One wording: the kind it means, the field it names, and the statuses it may arrive with.

    A named group ``field`` in the pattern takes the field from the words themselves; ``field`` here is
    for wordings that imply one without naming it.
    """

    kind: FailureKind
    pattern: re.Pattern[str]
    field: str | None = None
    statuses: frozenset[int | None] | None = None


# Wordings of servers that could not build a grammar from a tool schema or response_format, each quoted from
# the server's source or a report of it (their origins are listed in tests/tools/test_schema_compat.py).
# One list, read both by classify_failure and by schema_compat.is_grammar_error.
GRAMMAR_WORDINGS = (
    r"failed to parse grammar",  # llama.cpp sampler init, LM Studio and Ollama relay it
    r"error parsing grammar",  # llama.cpp GBNF parser
    r"failed to initiali[sz]e samplers",  # llama-server's wrapper around the parse failure
    r"json schema conversion (?:failed|was incomplete)",  # llama.cpp json-schema-to-grammar
    r"unrecognized schema",
    r"pattern must start with '\^' and end with '\$'",
    r"number of repetitions exceeds sane defaults",
    r"not supported by (?:xgrammar|outlines|guidance)",  # vLLM, per structured-output backend
    r"empty grammar stack",  # llama.cpp and Ollama, a grammar that dead-ends mid-answer
    r"failed to transform (?:json schema|regex) into a (?:grammar|regex)",  # vLLM xgrammar / outlines
    r"invalid (?:json )?grammar specification",  # vLLM
    r"regex uses unsupported feature for structured outputs",  # vLLM outlines backend
    r"error (?:in )?compiling grammar|grammar compilation (?:failed|error)",
    r"invalid grammar request",  # SGLang, and routers relaying it
    r"'type' must be a string",  # outlines as shipped in LM Studio's MLX engine
    r"schema is too complex for compilation",  # hosted structured-output compilers
    r"json schema not supported: could not understand",  # Fireworks (earendil-works/pi#5352)
)
GRAMMAR_RE = re.compile("|".join(GRAMMAR_WORDINGS), re.IGNORECASE)


def _rule(
    kind: FailureKind,
    regex: str,
    field: str | None = None,
    statuses: frozenset[int | None] | None = None,
) -> Rule:
    return Rule(kind, re.compile(regex, _FLAGS), field, statuses)


# llama.cpp answers 503 while mapping weights; an HTTP 400 "error loading model" is a broken file, not a
# wait, hence the status guard.
_LOADING_STATUSES: frozenset[int | None] = frozenset({None, 503})
_T = "tools"

# llama-server's words for its slots' shared cache filled by requests at once (see the rule below).
SHARED_CACHE_FULL = re.compile(r"\bcontext size has been exceeded\b", _FLAGS)
SHARED_CACHE_STATUSES: frozenset[int | None] = frozenset({500})

RULES: tuple[Rule, ...] = (
    # -- a model still loading (llama.cpp, its router, Hugging Face style servers)
    _rule("model_loading", r"^\s*loading model\b", statuses=_LOADING_STATUSES),
    _rule(
        "model_loading", r"\bmodel\b[^.]{0,80}\bis (?:currently |still )?loading\b", None, _LOADING_STATUSES
    ),
    # -- credentials
    _rule("auth", r"\b(?:invalid_api_key|authentication_error|permission_error|permission_denied)\b"),
    _rule("auth", r"\bincorrect api key\b|\binvalid api key\b|\bapi key not valid\b"),
    # -- billing: a 429 that waiting will not fix
    _rule("other", r"\binsufficient_quota\b|\brequires more credits\b"),
    # -- the machine cannot hold the model: no retry will change that
    _rule("other", r"\brequires more system memory\b"),
    # -- rate limits (before overflows: see the module docstring)
    _rule("rate_limited", r"\brate[ _-]?limit"),
    _rule("rate_limited", r"\b(?:tokens|requests) per (?:min|minute|day)\b|\b(?-i:TPM|RPM|TPD|RPD)\b"),
    _rule("rate_limited", r"\bresource_exhausted\b|\bresource (?:has been )?exhausted\b|\bquota exceeded\b"),
    _rule("rate_limited", r"\btoo many requests\b"),
    # -- the request does not fit the window; the ones naming the ceiling field first
    _rule(
        "context_overflow",
        r"'?(?P<field>max_(?:completion_)?tokens)'?\W+(?:or\W+'?max_completion_tokens'?\W+)?is too large\b"
        r".{0,80}maximum context length",
    ),
    _rule("context_overflow", r"\binput length and\W+(?P<field>max_tokens)\W+exceed context limit\b"),
    _rule("context_overflow", r"\bcontext_length_exceeded\b|\bexceed_context_size_error\b"),
    _rule("context_overflow", r"\bmaximum context length\b|\bmaximum prompt length\b"),
    _rule("context_overflow", r"\bexceeds? the context window\b|\bcontext window exceeds limit\b"),
    _rule("context_overflow", r"\bis longer than the model'?s context length\b"),
    _rule("context_overflow", r"\bprompt is too long\b|\bexceed(?:s|ed)? (?:the )?context limit\b"),
    _rule("context_overflow", r"\bexceeds? the available context size\b"),
    _rule("context_overflow", r"\binput token count\b.{0,40}\bexceeds the maximum number of tokens\b"),
    _rule("context_overflow", r"\bis too long to fit into the model\b|\brequested tokens exceed context\b"),
    # LM Studio's phrasings, old and new, llama.cpp engine and MLX engine
    _rule("context_overflow", r"\btrying to keep the first \d+ tokens when context the overflows\b"),
    _rule("context_overflow", r"\bnumber of tokens to keep from the initial prompt is greater than\b"),
    _rule("context_overflow", r"\bcannot truncate prompt with n_keep\b|\bdoes not fit in context length\b"),
    # llama-server's slots share one cache (`--parallel`, a unified KV cache). A request alone is held to
    # its window before it runs (400 exceed_context_size_error) and stops at it with finish "length"; the
    # 500 "Context size has been exceeded." (also relayed as "decode() failed: ...") is the shared cache
    # filled by other requests at the same moment, which clears when they end: wait and send again,
    # one at a time (``SHARED_CACHE_FULL``), and do not shrink a conversation that fits.
    _rule("transient", SHARED_CACHE_FULL.pattern, statuses=SHARED_CACHE_STATUSES),
    _rule("context_overflow", r"\bcontext (?:length|size) (?:has been )?exceeded\b"),
    # "context overflow policy" is LM Studio's own setting, not an overflow
    _rule("context_overflow", r"\bcontext overflow\b(?! ?policy)|\breached context length of \d+ tokens\b"),
    _rule("context_overflow", r"\bplease reduce the length of the messages\b"),
    # Together (text-generation-inference's words, stanford-crfm/helm#2079)
    _rule("context_overflow", r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= \d+"),
    # -- the model takes no tools at all
    _rule("tools_unsupported", r"\bdoes not support tools\b", _T),
    _rule(
        "tools_unsupported", r"\bdoes(?:n'?t| not) support (?:tool use|tool calling|function calling)\b", _T
    ),
    _rule("tools_unsupported", r"\b(?:tool use|tool calling|function calling) (?:is )?not supported\b", _T),
    _rule("tools_unsupported", r"\bdoes not support parameters:\W+tools\b", _T),
    # vLLM started without a tool-call parser: it takes no tools, and says how it would
    _rule("tools_unsupported", r"\btool choice requires --enable-auto-tool-choice\b", _T),
    # -- a schema (response_format or a tool's parameters) the server could not turn into a grammar
    _rule("grammar", "|".join(GRAMMAR_WORDINGS)),
    # -- a known field given a value this model does not take
    _rule("refused_value", r"\bunsupported value:\W+(?P<field>[\w.]+)\W+does not support\b"),
    _rule("refused_value", r"\binvalid value:.{0,80}\bsupported values are\b"),
    _rule("refused_value", r"\b(?P<field>response_format) type must be one of\b"),
    _rule("refused_value", r"\bdoesn'?t support (?P<field>\w+)=\S+"),
    # -- a number outside what the model allows
    _rule("out_of_range", r"\b(?P<field>max_tokens): \d+ > \d+, which is the maximum\b"),
    _rule(
        "out_of_range",
        r"\b(?P<field>max_(?:completion_)?tokens)\b\W*(?:\(\d+\)\s*)?"
        r"(?:is too large|exceeds the maximum|must be (?:at least|at most|less|greater)|limit exceeded)",
    ),
    _rule("out_of_range", r"\binvalid (?P<field>\w+) value, the valid range\b"),
    _rule(
        "out_of_range",
        r"\bparameter\W+(?P<field>\w+)\W+specified in the request are not valid: \w+ (?:abo|bel)",
    ),
    _rule("out_of_range", r"\binvalid\W+(?P<field>\w+)\W+:? ?\w* ?(?:above maximum|below minimum) value\b"),
    _rule(
        "out_of_range",
        r"\b(?P<field>[a-z_]+)\W? must be (?:between|at least|at most|less than|greater than|non-negative"
        r"|in \[)",
    ),
    # -- a field the server does not take at all. Each wording's source is beside it; the bodies are in
    # tests/data/error_bodies, one file per server.
    # OpenAI (openai.json; "'response_format' of type 'json_object'": openai-php/client#259)
    _rule("refused_field", r"\binvalid parameter:\W+(?P<field>response_format)\W.{0,60}\bis not supported\b"),
    # DeepInfra (through a gateway, truefoundry/models#913)
    _rule(
        "refused_field",
        r"\b(?:json_object|json_schema) response format is not supported\b",
        "response_format",
    ),
    # Groq names a field of a message the same way as a request field: that is the transcript's, not a
    # field to drop (chatboxai/chatbox#2081, run-llama/llama_index#14701)
    _rule("invalid_request", r"'messages\.\d+'\s*:\s*property '[\w.]+' is unsupported\b"),
    # Groq: "property 'store' is unsupported, did you mean 'stop'?" (fanenr/chatbot#21,
    # immersive-translate/immersive-translate#3003, CherryHQ/cherry-studio#1099)
    _rule("refused_field", r"\bproperty '(?P<field>[\w.]+)' is unsupported\b"),
    # Fireworks: "Extra inputs are not permitted, field: 'stream_options'" (FlowiseAI/Flowise#2866,
    # web-infra-dev/midscene#1322)
    _rule("refused_field", r"\bextra inputs are not permitted, field: '(?P<field>[\w.\[\]]+)'"),
    _rule("refused_field", r"\bunsupported parameter:\W+(?P<field>[\w.]+)"),
    _rule("refused_field", r"\bunrecognized request argument supplied: (?P<field>[\w.]+)"),
    _rule("refused_field", r"\bunknown parameter:\W+(?P<field>[\w.\[\]]+?)['\"`]"),
    _rule("refused_field", r"`(?P<field>\w+)` is deprecated for this model\b"),
    _rule("refused_field", r"\bargument not supported on this model: (?P<field>\w+)"),
    _rule("refused_field", r"\bdoes not support parameters:\W+(?P<field>\w+)"),
    _rule("refused_field", r"'loc':\s*[(\[]\s*'body',\s*'(?P<field>\w+)'.{0,200}extra inputs are not perm"),
    # the lookbehind and the bound keep a long run of word characters from costing n² steps
    _rule("refused_field", r"(?<![\w.])(?P<field>[\w.]{1,200}): extra inputs are not permitted\b"),
    _rule("refused_field", r"\bextra inputs are not permitted\b|\bextra_forbidden\b"),
    # -- the model (or route) is not there
    _rule("not_found", r"\bmodel_not_found\b|\bnot found, try pulling it first\b|\bno such model\b"),
    _rule("not_found", r"\bmodel\b.{0,120}\bdoes not exist\b|\bmodel '[^']+' not found\b"),
    _rule("not_found", r"\bunavailable model\b"),
    # Together: a model served only on a dedicated endpoint (truefoundry/models#950)
    _rule("not_found", r"\bunable to access non-serverless model\b"),
    # -- refused for its content: the caller has to change the request
    _rule("invalid_request", r"\bcontent_filter\b|\bcontent management policy\b|\bresponsibleaipolicy"),
    _rule("invalid_request", r"\binvalid_prompt\b|\bflagged as potentially violating\b"),
    # -- busy or overloaded: worth another try
    _rule("transient", r"\boverloaded\b|\bcapacity exceeded\b|\bno slot available\b|\bserver (?:is )?busy\b"),
    _rule("transient", r"\bservice[ _]unavailable\b|\btemporarily unavailable\b|\bunavailable_error\b"),
)

# Lists of accepted values: the group ``list`` holds quoted values, ``value`` a single bare one.
SUPPORTED: tuple[re.Pattern[str], ...] = tuple(
    re.compile(regex, _FLAGS)
    for regex in (
        r"supported values are:?(?P<list>.*)",
        r"must be one of:?(?P<list>.*)",
        r"only the default \((?P<value>[^)]*)\) value is supported",
        r"only \w+=(?P<value>[^\s,;]+?)\.? is supported",
    )
)
QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"|`([^`]*)`")

# Waits named in the words: "try again in 1m12.5s", "retry after 7 seconds", Gemini's retryDelay.
RETRY_IN_BODY: tuple[re.Pattern[str], ...] = tuple(
    re.compile(regex, _FLAGS)
    for regex in (
        r"try again in (?P<dur>(?:\d+(?:\.\d+)?(?:ms|h|m|s))+)\b",
        r"(?:retry|try again) (?:after|in) (?P<num>\d+(?:\.\d+)?) ?"
        r"(?P<unit>milliseconds?|seconds?|secs?|minutes?|mins?)\b",
        r"\"?retryDelay\"?\s*:\s*\"(?P<dur>\d+(?:\.\d+)?s)\"",
    )
)
DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
UNIT_SECONDS: dict[str, float] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

# The window and the request's size, where an overflow's words give them. A pattern may give the size
# as two parts (``add1``, ``add2``): vLLM and Anthropic state prompt and ceiling separately.
OVERFLOW_NUMBERS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(regex, _FLAGS)
    for regex in (
        r"for a total of (?:at least )?(?P<requested>\d+) tokens",
        r"maximum context length (?:is|of) (?P<limit>\d+) tokens\W+(?:however,? )?"
        r"(?:your messages resulted in|you requested(?: about| a total of)?) (?P<requested>\d+) ?tokens",
        r"\((?P<add1>\d+) > (?P<limit>\d+) - (?P<add2>\d+)\)",
        r"your request has (?P<add1>\d+) input tokens plus (?P<add2>\d+)",
        r"your request has (?P<requested>\d+) input tokens\.",
        r"total length (?P<requested>\d+)\) is too long to fit into the model \(context length"
        r" (?P<limit>\d+)",
        r"requested tokens exceed context window of (?P<limit>\d+)",
        r"the input \((?P<requested>\d+) tokens\) is longer than the model'?s context length"
        r" \((?P<limit>\d+)",
        r"prompt is too long: (?P<requested>\d+) tokens > (?P<limit>\d+)",
        r"exceed context limit: (?P<add1>\d+) \+ (?P<add2>\d+) > (?P<limit>\d+)",
        r"request \((?P<requested>\d+) tokens\) exceeds the available context size \((?P<limit>\d+)",
        r"keep the first (?P<requested>\d+) tokens .{0,80}context length of only (?P<limit>\d+)",
        r"n_keep\W+(?P<requested>\d+)\)?\s*>=\s*n_ctx\W+(?P<limit>\d+)",
        r"input has (?P<requested>\d+) tokens, but the context length only supports (?P<limit>\d+)",
        r"input token count \((?P<requested>\d+)\) exceeds the maximum number of tokens allowed"
        r" \((?P<limit>\d+)",
        r"maximum prompt length is (?P<limit>\d+) but the request contains (?P<requested>\d+)",
        r"prompt contains (?P<requested>\d+) tokens, too large for model with (?P<limit>\d+)",
        r"max_new_tokens`? must be <= (?P<limit>\d+)\. Given: (?P<add1>\d+) `?inputs`? tokens and"
        r" (?P<add2>\d+) `?max_new_tokens",
        r"maximum context length (?:is|of) (?P<limit>\d+)",
        r"reached context length of (?P<limit>\d+)",
    )
)

# A quota counted per day. A 429 that names one and no wait cannot succeed again today: Gemini names the
# quota that ran out in its error details (``"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"``,
# or ErrorInfo's ``quota_limit``), Code Assist and OpenRouter say it in words ("Gemini 2.5 Pro Requests per
# day per user per tier", "free-models-per-day").
QUOTA_IDS = re.compile(r"\"(?:quotaId|quota_limit)\"\s*:\s*\"(?P<id>[^\"]{1,200})\"")
PER_DAY_ID = re.compile(r"PerDay|per_day|Daily", re.IGNORECASE)
PER_DAY_WORDS = re.compile(r"\bper[ -]day\b|\bdaily (?:quota|limit)\b", _FLAGS)
