"""The Gemini ``generateContent`` shape, sans I/O: the runtime's request in, Gemini's contents and config
out; its streamed response chunks in, chat-completions chunks out.

The chat-completions request becomes ``contents`` (``user`` and ``model`` turns; tool results as
``functionResponse`` parts naming the function they answer), a ``systemInstruction``, function
declarations whose parameters are cut to the schema subset Gemini takes (after the same sanitising every
strict endpoint gets), and a config: ``thinkingConfig`` by generation (a token budget on 2.x, a level from
3 on, with thought summaries asked for), and no sampling parameters from 3 on, where Google asks for none.

A thought signature is kept with the part that carried it (``SignedThinking`` with ``provider="gemini"``
and the call's id) and put back on that part when the turn is replayed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from ..._nesting import MAX_NESTING
from ...errors import EndpointRefused, EndpointUnreadable, InvalidInput, ModelRefusal
from ...messages import SignedThinking
from ..call_arguments import arguments_text
from ..failures import classify_failure
from ..schema_compat import sanitize_schema
from ..typed_errors import error_for_failure
from .parts import ReplyParts, StreamedArguments, recorded_parts

__all__ = [
    "GEMINI_SETTINGS",
    "GENERATED_ID",
    "GeminiChunks",
    "gemini_generation",
    "gemini_request",
    "gemini_schema",
]

#: Ids given to calls Gemini sent without one; never sent back to Gemini as if it had issued them.
GENERATED_ID = "sl-gemini-call-"

_VERSION = re.compile(r"gemini-(\d+)(?:\.(\d+))?")
_BUDGETS = {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576, "xhigh": 32768, "max": 32768}
_LEVELS = {
    "minimal": "minimal",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "high",
    "max": "high",
}
#: Request fields only the Gemini API reads, taken from the request as they are: safety thresholds, a
#: thinking config given outright, a cached content's name, Vertex AI labels.
_OWN_SETTINGS: dict[str, tuple[tuple[type, ...], str]] = {
    "safetySettings": ((list, tuple), "list"),
    "thinkingConfig": ((Mapping,), "object"),
    "cachedContent": ((str,), "string"),
    "labels": ((Mapping,), "object"),
}
GEMINI_SETTINGS: frozenset[str] = frozenset(_OWN_SETTINGS)
# Finish reasons that mean the model would not answer: a refusal naming the reason, never a blank reply.
_REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "LANGUAGE", "OTHER"}
)
_KEPT = frozenset(
    {
        "type", "format", "description", "nullable", "enum", "properties", "required", "items", "minItems",
        "maxItems", "minimum", "maximum", "anyOf", "minLength", "maxLength", "pattern", "title",
        "minProperties", "maxProperties", "propertyOrdering",
    }
)  # fmt: skip


def gemini_generation(model: str) -> tuple[int, int]:
    """(major, minor) of a Gemini model name; ``(99, 0)`` for a name that says none (assume the newest)."""
    match = _VERSION.search(model.lower())
    if match is None:
        return (99, 0)
    return (int(match.group(1)), int(match.group(2) or 0))


def gemini_request(body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """``(model, contents, config)`` for a chat-completions-shaped ``body``, in the API's camelCase.

    ``config`` is the flat ``GenerateContentConfig`` the SDK takes (system instruction, tools and
    generation settings side by side). The Gemini API's own settings in the body (``GEMINI_SETTINGS``,
    set through ``ModelParams.extra_body``) are taken as they are; a chat-completions endpoint of a
    failover chain is never sent them.

    Raises:
        InvalidInput: one of those settings is of the wrong JSON type, or nests absurdly deep.
    """
    model = str(body.get("model") or "")
    newer = gemini_generation(model) >= (3, 0)
    system: list[str] = []
    contents: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for raw in _items(body.get("messages")):
        if not isinstance(raw, Mapping):
            continue
        role = raw.get("role")
        if role in ("system", "developer") and not contents:
            text = _text(raw.get("content"))
            if text:
                system.append(text)
        elif role == "assistant":
            _append(contents, "model", _model_parts(raw, names))
        elif role == "tool":
            _append(contents, "user", [_function_response(raw, names)])
        elif role in ("system", "developer"):
            _append(contents, "user", [{"text": f"[system] {_text(raw.get('content'))}"}])
        else:
            _append(contents, "user", _user_parts(raw.get("content")))

    config: dict[str, Any] = {}
    if system:
        config["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    declarations = [d for d in (_declaration(t) for t in _items(body.get("tools"))) if d is not None]
    if declarations:
        config["tools"] = [{"functionDeclarations": declarations}]
        tool_config = _tool_config(body.get("tool_choice"))
        if tool_config is not None:
            config["toolConfig"] = tool_config
    ceiling = body.get("max_tokens", body.get("max_completion_tokens"))
    if isinstance(ceiling, int) and not isinstance(ceiling, bool) and ceiling > 0:
        config["maxOutputTokens"] = ceiling
    if not newer:
        for ours, theirs in (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK")):
            value = body.get(ours)
            if isinstance(value, int | float) and not isinstance(value, bool):
                config[theirs] = value
    stop = body.get("stop")
    if isinstance(stop, str):
        config["stopSequences"] = [stop]
    elif isinstance(stop, list) and stop and all(isinstance(s, str) for s in stop):
        config["stopSequences"] = list(stop)
    thinking = _thinking(body.get("reasoning_effort"), model, newer)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    # The caller's own Gemini settings, in the API's spelling (``ModelParams.extra_body``): a thinkingConfig
    # given outright wins over the one the effort makes.
    for name, (kinds, kind_name) in _OWN_SETTINGS.items():
        if name in body:
            value = body[name]
            if not isinstance(value, kinds):
                raise InvalidInput(f"{name} is a {kind_name} in the Gemini API, got {type(value).__name__}")
            config[name] = _plain(value, name)
    response_format = body.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") in ("json_schema", "json_object"):
        config["responseMimeType"] = "application/json"
        inner = response_format.get("json_schema")
        schema = inner.get("schema") if isinstance(inner, Mapping) else None
        if isinstance(schema, Mapping):
            config["responseJsonSchema"] = dict(schema)
    return model, contents, config


def _plain(value: Any, name: str, depth: int = 0) -> Any:
    """A copy of a setting as lists and dicts (what the JSON encoder takes), so the request owns it."""
    if depth > MAX_NESTING:
        raise InvalidInput(f"{name} nests deeper than {MAX_NESTING} levels")
    if isinstance(value, Mapping):
        return {str(k): _plain(v, name, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, name, depth + 1) for v in value]
    return value


def _thinking(effort: Any, model: str, newer: bool) -> dict[str, Any] | None:
    if not isinstance(effort, str):
        return None
    if effort in ("none", "off"):
        # 3.x cannot stop thinking; the lowest level is the nearest. 2.5 Pro cannot either (128 at least).
        if newer:
            return {"thinkingLevel": "low"}
        return {"thinkingBudget": 128 if "pro" in model else 0}
    if newer:
        return {"thinkingLevel": _LEVELS.get(effort, "high"), "includeThoughts": True}
    return {"thinkingBudget": _BUDGETS.get(effort, _BUDGETS["medium"]), "includeThoughts": True}


def gemini_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's JSON Schema as Gemini's ``Schema`` subset: sanitised as for any strict endpoint, then type
    unions spelled as ``nullable``/``anyOf``, ``const`` as a one-value ``enum``, unknown keywords dropped."""
    cut = _subset(sanitize_schema(schema))
    return cut if isinstance(cut, dict) else {"type": "object"}


def _subset(node: Any) -> Any:
    if isinstance(node, list):
        return [_subset(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    kind = node.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        if len(types) != len(kind):
            out["nullable"] = True
        if len(types) == 1:
            kind = types[0]
        elif types:
            out["anyOf"] = [{"type": t} for t in types]
            kind = None
        else:
            kind = None
    if isinstance(kind, str):
        out["type"] = kind
    if "const" in node and isinstance(node["const"], str):
        out["enum"] = [node["const"]]
        out.setdefault("type", "string")
    for key, value in node.items():
        if key not in _KEPT or key in ("type",) or key in out:
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _subset(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = _subset(value)
        elif key == "anyOf" and isinstance(value, list):
            branches = [b for b in value if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(branches) != len(value):
                out["nullable"] = True
            if len(branches) == 1:
                out.update({k: v for k, v in _subset(branches[0]).items() if k not in out})
            elif branches:
                out[key] = [_subset(b) for b in branches]
        elif key == "enum":
            # Gemini's enum holds strings only; other values stay in the description's words.
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                out[key] = list(value)
                out.setdefault("type", "string")
        else:
            out[key] = value
    return out


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _append(contents: list[dict[str, Any]], role: str, parts: list[dict[str, Any]]) -> None:
    # Parallel calls' responses go back in one turn, as one turn asked for them.
    if not parts:
        parts = [{"text": "(empty)"}]
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": list(parts)})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        str(p.get("text", "")) for p in _items(content) if isinstance(p, Mapping) and p.get("type") == "text"
    )


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in _items(content):
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and part.get("text"):
            parts.append({"text": str(part["text"])})
        elif part.get("type") == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
                head, data = url[5:].split(";base64,", 1)
                parts.append({"inlineData": {"mimeType": head or "image/png", "data": data}})
            elif isinstance(url, str):
                parts.append({"fileData": {"fileUri": url, "mimeType": "image/*"}})
    return parts


def _model_parts(raw: Mapping[str, Any], names: dict[str, str]) -> list[dict[str, Any]]:
    signed = [SignedThinking.from_dict(b) for b in _items(raw.get("thinking_blocks"))]
    kept = next((b.parts for b in signed if b is not None and b.provider == "gemini" and b.parts), "")
    recorded = recorded_parts(kept) if kept else None
    if recorded:
        # The reply as Gemini wrote it (code it ran, each signature in its part); the calls' names are
        # still needed to name the results that answer them.
        for call in _items(raw.get("tool_calls")):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping):
                names[str(call.get("id") or "")] = str(fn.get("name") or "")
        return recorded
    mine = [b for b in signed if b is not None and b.provider == "gemini" and b.signature]
    by_call = {b.call_id: b.signature for b in mine if b.call_id}
    loose = [b.signature for b in mine if not b.call_id]
    parts: list[dict[str, Any]] = []
    text = _text(raw.get("content"))
    if text:
        part: dict[str, Any] = {"text": text}
        if loose:
            part["thoughtSignature"] = loose[0]
        parts.append(part)
    for n, call in enumerate(_items(raw.get("tool_calls"))):
        fn = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping):
            continue
        call_id = str(call.get("id") or "")
        name = str(fn.get("name") or "")
        names[call_id] = name
        function_call: dict[str, Any] = {"name": name, "args": _arguments(fn.get("arguments"))}
        if call_id and not call_id.startswith(GENERATED_ID):
            function_call["id"] = call_id
        part = {"functionCall": function_call}
        signature = by_call.get(call_id) or (loose[0] if loose and not text and n == 0 else None)
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str) and raw.strip():
        try:
            value = json.loads(raw)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}
    return {}


def _function_response(raw: Mapping[str, Any], names: dict[str, str]) -> dict[str, Any]:
    call_id = str(raw.get("tool_call_id") or "")
    content = raw.get("content")
    text = content if isinstance(content, str) else _text(content)
    response: dict[str, Any] = {
        "name": names.get(call_id) or str(raw.get("name") or "tool"),
        "response": {"error": text} if raw.get("is_error") is True else {"result": text},
    }
    if call_id and not call_id.startswith(GENERATED_ID):
        response["id"] = call_id
    return {"functionResponse": response}


def _declaration(raw: Any) -> dict[str, Any] | None:
    fn = raw.get("function") if isinstance(raw, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
        return None
    declaration: dict[str, Any] = {"name": fn["name"]}
    if isinstance(fn.get("description"), str) and fn["description"]:
        declaration["description"] = fn["description"]
    schema = fn.get("parameters")
    if isinstance(schema, Mapping) and schema.get("properties"):
        declaration["parameters"] = gemini_schema(schema)
    return declaration


def _tool_config(choice: Any) -> dict[str, Any] | None:
    if choice == "auto":
        return {"functionCallingConfig": {"mode": "AUTO"}}
    if choice == "required":
        return {"functionCallingConfig": {"mode": "ANY"}}
    if choice == "none":
        return {"functionCallingConfig": {"mode": "NONE"}}
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if isinstance(name, str):
            return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    return None


class GeminiChunks:
    """Reads streamed ``GenerateContentResponse`` chunks (the API's JSON) into chat-completions chunks.

    Thought parts become reasoning, text parts content, each ``functionCall`` one call. The Gemini API
    sends a call's arguments whole, in one part; Vertex AI, asked to stream them
    (``streamFunctionCallArguments``), sends them as ``partialArgs`` over several parts, which are put
    back together into one call. A part's thought signature is kept as ``SignedThinking``, and the parts
    of a reply a chat message cannot hold (code the model ran, its results, several signatures) are kept
    whole in one (``SignedThinking.parts``), so the reply is sent back as it came. Usage is cumulative on
    every chunk, so the last one counts; it goes out with the finish reason, the tool-use prompt (what a
    code-execution or search tool fed the model) counted in the prompt, as Gemini's total counts it.

    Raises (from ``feed``):
        ModelRefusal: a safety, recitation or similar finish reason, or a blocked prompt.
        EndpointUnreadable: a ``functionCall``'s args cannot be written back as JSON.
    """

    def __init__(self, *, endpoint: str | None = None, model: str | None = None) -> None:
        self.endpoint = endpoint
        self.model = model
        self.usage: dict[str, Any] = {}
        self.calls = 0
        self.skipped = 0
        self.finished = False
        # The reply's id and the model version that wrote it, sent on every chunk; they go out on the finish.
        self.identity: dict[str, str] = {}
        self._streamed: StreamedArguments | None = None
        self._streamed_signature: str | None = None
        self._parts = ReplyParts()

    def feed(self, chunk: Any) -> list[dict[str, Any]]:
        if not isinstance(chunk, Mapping):
            self.skipped += 1
            return []
        out: list[dict[str, Any]] = []
        if isinstance(chunk.get("error"), Mapping):
            # An error sent inside the stream after a success (the SDK usually raises it first).
            error = chunk["error"]
            code = error.get("code")
            failure = classify_failure(code if isinstance(code, int) else None, dict(chunk))
            raise error_for_failure(
                failure, endpoint=self.endpoint, model=self.model, prefix="in the stream: "
            )
        if isinstance(chunk.get("usageMetadata"), Mapping):
            self.usage = dict(chunk["usageMetadata"])
        for key, name in (("responseId", "id"), ("modelVersion", "model")):
            value = chunk.get(key)
            if isinstance(value, str) and value:
                self.identity[name] = value
        candidates = chunk.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            feedback = chunk.get("promptFeedback")
            reason = feedback.get("blockReason") if isinstance(feedback, Mapping) else None
            if isinstance(reason, str) and reason:
                said = feedback.get("blockReasonMessage") if isinstance(feedback, Mapping) else None
                raise self._refusal(reason, said if isinstance(said, str) and said else None, prompt=True)
            return out
        candidate = candidates[0]
        if not isinstance(candidate, Mapping):
            self.skipped += 1
            return out
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for part in _items(parts):
            out.extend(self._part(part))
        reason = candidate.get("finishReason")
        if isinstance(reason, str) and reason and reason != "FINISH_REASON_UNSPECIFIED":
            if reason in _REFUSALS:
                said = candidate.get("finishMessage")
                blocked = [
                    str(r.get("category"))
                    for r in _items(candidate.get("safetyRatings"))
                    if isinstance(r, Mapping) and r.get("blocked") is True
                ]
                if blocked:
                    said = f"{said}; " if isinstance(said, str) and said else ""
                    said += "blocked for " + ", ".join(blocked)
                raise self._refusal(reason, said)
            out.extend(self._finish(reason))
        return out

    def _finish(self, reason: str) -> list[dict[str, Any]]:
        out = self._end_streamed()
        kept = self._parts.kept()
        if kept:
            out.append(_signed(SignedThinking(provider="gemini", parts=kept)))
        self.finished = True
        finish = {"STOP": "stop", "MAX_TOKENS": "length"}.get(reason, reason.lower())
        if finish == "stop" and self.calls:
            finish = "tool_calls"
        out.append({**self.identity, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        out.append({"choices": [], "usage": self.chat_usage()})
        return out

    def _part(self, part: Any) -> list[dict[str, Any]]:
        if not isinstance(part, Mapping):
            self.skipped += 1
            return []
        out: list[dict[str, Any]] = []
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(call, Mapping):
            return self._call(call, signature)
        out.extend(self._end_streamed())
        self._parts.add(part)
        if isinstance(text, str) and text:
            field = "reasoning_content" if part.get("thought") is True else "content"
            out.append({"choices": [{"index": 0, "delta": {field: text}}]})
        if isinstance(signature, str) and signature:
            out.append(_signed(SignedThinking(provider="gemini", signature=signature)))
        return out

    def _call(self, call: Mapping[str, Any], signature: str | None) -> list[dict[str, Any]]:
        name = call.get("name")
        streamed = self._streamed
        if streamed is not None and not name:
            # The next piece of the call whose arguments Vertex AI is streaming; the last says no more.
            streamed.add(call.get("partialArgs"))
            return [] if call.get("willContinue") is True else self._end_streamed()
        out = self._end_streamed()
        if not isinstance(name, str) or not name:
            self.skipped += 1  # a piece of a call that never began: nothing to join it to
            return out
        n = self.calls
        self.calls += 1
        given = call.get("id")
        call_id = given if isinstance(given, str) and given else None
        shown_id = call_id or f"{GENERATED_ID}{n}"
        streaming = call.get("willContinue") is True
        args = call.get("args")
        arguments: Mapping[str, Any] = args if isinstance(args, Mapping) else {}
        fragment = {
            "index": n,
            "id": shown_id,
            "type": "function",
            "function": {"name": name, "arguments": "" if streaming else self._written(arguments)},
        }
        out.append({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
        if signature:
            out.append(_signed(SignedThinking(provider="gemini", signature=signature, call_id=shown_id)))
        if streaming:
            self._streamed = StreamedArguments(n, call_id or "", name)
            self._streamed.add(call.get("partialArgs"))
            self._streamed_signature = signature
        else:
            self._parts.add_call(_whole_call(name, arguments, call_id), signature)
        return out

    def _end_streamed(self) -> list[dict[str, Any]]:
        """The arguments of the call being streamed, now whole; nothing when no call is streaming."""
        streamed, self._streamed = self._streamed, None
        if streamed is None:
            return []
        self.skipped += streamed.skipped
        arguments = streamed.arguments
        self._parts.add_call(
            _whole_call(streamed.name, arguments, streamed.call_id or None), self._streamed_signature
        )
        fragment = {"index": streamed.index, "function": {"arguments": self._written(arguments)}}
        return [{"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}]

    def feed_bare(self, text: bytes, *, cut: bool = False, streamed: bool = True) -> list[dict[str, Any]]:
        """The lines of a 200 body that were outside any SSE event, read as the JSON they should be.

        A server (or a proxy in front of it) that fails after answering 200 may write the error as bare
        JSON, ``{"error": {...}}`` or the array form ``[{"error": {...}}]``, with no ``data:`` framing; an
        array of chunks is the API's stream without ``alt=sse``. Each element is read as a chunk, so an
        error is the same typed failure as one with an HTTP status.

        Args:
            text: the stray lines (``SSEDecoder.stray``).
            cut: more stray text came than was kept.
            streamed: SSE events came besides; stray text that is no JSON is then only counted.

        Raises:
            EndpointError: the body holds an error (its kind read as for an HTTP status).
            ModelRefusal: as ``feed``.
            EndpointUnreadable: nothing came but text that is no JSON.
        """
        if not text.strip():
            return []
        value: Any = None
        if not cut:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError):
                value = None
        if not isinstance(value, list | Mapping):
            if streamed:
                self.skipped += 1
                return []
            shown = text[:200].decode("utf-8", "replace")
            raise EndpointUnreadable(
                f"a 200 answer whose body is no event stream and no JSON: {shown!r}",
                endpoint=self.endpoint,
                model=self.model,
            )
        out: list[dict[str, Any]] = []
        for chunk in value if isinstance(value, list) else [value]:
            out.extend(self.feed(chunk))
        return out

    def _written(self, arguments: Any) -> str:
        return arguments_text(
            arguments, what="a functionCall's args", endpoint=self.endpoint, model=self.model
        )

    def chat_usage(self) -> dict[str, Any]:
        """The last usage reported, in the chat-completions spelling."""
        u = self.usage
        # What a tool the API runs itself (code execution, search) put before the model is prompt too:
        # Gemini's totalTokenCount counts it, so the prompt here does.
        prompt = _count(u.get("promptTokenCount")) + _count(u.get("toolUsePromptTokenCount"))
        thoughts = _count(u.get("thoughtsTokenCount"))
        completion = _count(u.get("candidatesTokenCount")) + thoughts
        out: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "prompt_tokens_details": {"cached_tokens": _count(u.get("cachedContentTokenCount"))},
        }
        if "thoughtsTokenCount" in u:
            out["completion_tokens_details"] = {"reasoning_tokens": thoughts}
        return out

    def _refusal(self, reason: str, said: Any, *, prompt: bool = False) -> EndpointRefused:
        if prompt:
            words = f"the prompt was blocked (block reason {reason})"
        else:
            words = f"the model declined to answer (finish reason {reason}, category {reason})"
        given = said if isinstance(said, str) and said else None
        if given:
            words += f": {given}"
        return ModelRefusal(words, category=reason, endpoint=self.endpoint, model=self.model, body=given)


def _whole_call(name: str, arguments: Mapping[str, Any], call_id: str | None) -> dict[str, Any]:
    call: dict[str, Any] = {"name": name, "args": dict(arguments)}
    if call_id:
        call["id"] = call_id
    return call


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _signed(block: SignedThinking) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"thinking_blocks": [block.to_dict()]}}]}
