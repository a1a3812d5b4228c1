"""The transcript as values: messages, content parts, tool calls and the answered turn (public).

Every value is a frozen dataclass with a discriminating ``role`` (messages) or ``type`` (content parts),
round-trips through JSON (``message_to_json`` / ``message_from_json``), and converts to and from the
OpenAI chat-completions message shape that users already have in hand (``to_openai`` / ``from_openai``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import from_json

from .arguments import parse_tool_arguments
from .errors import InvalidInput
from .usage import Usage

__all__ = [
    "AssistantMessage",
    "ContentPart",
    "Disposition",
    "ImagePart",
    "Message",
    "SignedThinking",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolResultMessage",
    "Turn",
    "UserMessage",
    "from_openai",
    "message_from_json",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
    "text_of",
    "to_openai",
]


Disposition: TypeAlias = Literal["completed", "failed", "blocked", "aborted", "timeout", "skipped"]
"""How a tool call ended (see ``steadyloop.tools.execution``)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for.

    Attributes:
        id: the call id the result must answer.
        name: the tool's name.
        arguments: the arguments, parsed (repaired where the model wrote almost-JSON; ``{}`` if unreadable).
        raw_arguments: the arguments text exactly as the model wrote it, when it came as text.
    """

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str | None = None


@dataclass(frozen=True, slots=True)
class SignedThinking:
    """Reasoning a provider signed, kept so it can be sent back to that provider unchanged.

    Anthropic refuses a tool-use turn whose thinking was altered or dropped, and Gemini 3 wants a call's
    thought signature back on that call; both check the bytes, so these are kept exactly as they came.

    Attributes:
        provider: whose signature it is (``"anthropic"``, ``"gemini"``); only that provider is sent it.
        signature: the signature, as the provider sent it.
        text: the thinking it signs (Anthropic); ``""`` for a redacted block or a bare signature.
        redacted: a redacted block's opaque data (Anthropic's ``redacted_thinking``).
        call_id: the call whose part carried the signature (Gemini); ``""`` when it came with text.
        parts: a Gemini reply's parts as the API sent them (JSON), kept when they hold what a chat message
            has no field for (code the model ran and its results, a signature on each of several parts),
            so the reply is sent back exactly; ``""`` otherwise.
    """

    provider: str
    signature: str = ""
    text: str = ""
    redacted: str = ""
    call_id: str = ""
    parts: str = ""

    def to_dict(self) -> dict[str, str]:
        """The block as the ``thinking_blocks`` entry a chat-completions-shaped message carries."""
        out = {"provider": self.provider}
        for name in ("signature", "text", "redacted", "call_id", "parts"):
            value = getattr(self, name)
            if value:
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, raw: object) -> SignedThinking | None:
        """A block back from ``to_dict``'s shape; ``None`` for anything that is not one."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("provider"), str):
            return None

        def text(name: str) -> str:
            value = raw.get(name)
            return value if isinstance(value, str) else ""

        return cls(
            provider=raw["provider"],
            signature=text("signature"),
            text=text("text"),
            redacted=text("redacted"),
            call_id=text("call_id"),
            parts=text("parts"),
        )


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text inside a multi-part message."""

    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image inside a user message: an ``https:`` or ``data:`` URL."""

    url: str
    detail: Literal["auto", "low", "high"] | None = None
    type: Literal["image"] = "image"

    @classmethod
    def from_bytes(cls, data: bytes, mime_type: str = "image/png") -> ImagePart:
        """An image part carrying the bytes inline as a base64 data URL."""
        return cls(url=f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}")

    @property
    def mime_type(self) -> str | None:
        """The media type of an inline image, ``None`` for a linked one."""
        if self.url.startswith("data:"):
            return self.url[5:].split(";", 1)[0].split(",", 1)[0] or None
        return None


ContentPart: TypeAlias = Annotated[TextPart | ImagePart, Field(discriminator="type")]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    """Instructions from whoever runs the agent."""

    content: str
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """What the user said: text, or parts (text and images)."""

    content: str | tuple[ContentPart, ...]
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model answered: its text, its scratchpad, the calls it asked for, and signed thinking.

    ``thinking`` is the reasoning a provider signed (Anthropic, Gemini), kept whole to be replayed; it
    is sent back whatever the reasoning setting, because those providers refuse a transcript without it.
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    thinking: tuple[SignedThinking, ...] = ()
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultMessage:
    """A tool's answer to one call.

    Attributes:
        call_id: the call it answers.
        content: what the model reads.
        is_error: the model should read it as a failure.
        name: the tool's name.
        disposition: how the call ended, as the loop closed it (``completed``, ``failed``, ``blocked``,
            ``aborted``, ``timeout``, ``skipped``); kept with the message so a stored transcript still says
            which results a tool wrote and which the runtime wrote for it. Never sent to the model.
    """

    call_id: str
    content: str | tuple[ContentPart, ...]
    is_error: bool = False
    name: str | None = None
    disposition: Disposition | None = None
    role: Literal["tool"] = "tool"


Message: TypeAlias = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolResultMessage, Field(discriminator="role")
]


@dataclass(frozen=True, slots=True)
class Turn:
    """One answered request.

    Attributes:
        content: the answer, thinking taken out.
        reasoning: the scratchpad, from reasoning fields or thinking fences.
        tool_calls: the calls the model asked for, in order.
        usage: tokens and timings.
        finish_reason: as the server said it; ``""`` when it never said.
        thinking: reasoning the provider signed, in the order it came (see ``SignedThinking``).
        response_id: the id the endpoint gave the reply (``""`` when it gave none).
        response_model: the model the endpoint says answered (``""`` when it did not say).
    """

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str = ""
    thinking: tuple[SignedThinking, ...] = ()
    response_id: str = ""
    response_model: str = ""

    def to_message(self, *, keep_reasoning: bool = True) -> AssistantMessage:
        """The turn as the assistant message a transcript keeps."""
        return AssistantMessage(
            content=self.content,
            reasoning=self.reasoning if keep_reasoning else "",
            tool_calls=tuple(self.tool_calls),
            thinking=self.thinking,
        )


_MESSAGE = TypeAdapter[Any](Message)
_MESSAGES = TypeAdapter[Any](list[Message])


def refuse_non_finite(text: str | bytes, what: str) -> None:
    """Raise ``InvalidInput`` when ``text`` holds NaN or Infinity outside a string.

    They are not JSON, and the writers put ``null`` in their place, so a value read with them would not
    come back from its own JSON. The full check runs only when the words occur at all.
    """
    if isinstance(text, str):
        if "NaN" not in text and "Infinity" not in text:
            return
    elif b"NaN" not in text and b"Infinity" not in text:
        return
    try:
        from_json(text, allow_inf_nan=False)
    except ValueError as exc:
        raise InvalidInput(f"not a steadyloop {what}: {exc}") from None


def message_to_json(message: Message) -> str:
    """The message as JSON text, with its ``role`` as the discriminator."""
    return _MESSAGE.dump_json(message).decode()


def message_from_json(text: str | bytes) -> Message:
    """A message back from ``message_to_json``'s output.

    Raises:
        InvalidInput: the text is not a message.
    """
    try:
        result: Message = _MESSAGE.validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"not a steadyloop message: {exc}") from None
    refuse_non_finite(text, "message")
    return result


def messages_to_json(messages: Sequence[Message]) -> str:
    """A whole transcript as one JSON array."""
    return _MESSAGES.dump_json(list(messages)).decode()


def messages_from_json(text: str | bytes) -> list[Message]:
    """A transcript back from ``messages_to_json``'s output.

    Raises:
        InvalidInput: the text is not a list of messages.
    """
    try:
        result: list[Message] = _MESSAGES.validate_json(text)
    except ValidationError as exc:
        raise InvalidInput(f"not a steadyloop transcript: {exc}") from None
    refuse_non_finite(text, "transcript")
    return result


def text_of(content: str | Sequence[ContentPart]) -> str:
    """The text of a message's content, parts joined; images are left out."""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))


# -- the OpenAI chat-completions shape ------------------------------------------------------------


def _parts_to_openai(parts: Sequence[ContentPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            out.append({"type": "text", "text": part.text})
        else:
            image: dict[str, Any] = {"url": part.url}
            if part.detail is not None:
                image["detail"] = part.detail
            out.append({"type": "image_url", "image_url": image})
    return out


def to_openai(message: Message, *, reasoning_field: str | None = None) -> dict[str, Any]:
    """The message in the OpenAI chat-completions shape.

    Args:
        message: the message.
        reasoning_field: when set (``"reasoning_content"``), an assistant message's reasoning is sent
            under that name; otherwise it is not sent, since most models are better off without it.
    """
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        content = message.content
        return {"role": "user", "content": content if isinstance(content, str) else _parts_to_openai(content)}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
            if not message.content:
                out["content"] = None
        if reasoning_field and message.reasoning:
            out[reasoning_field] = message.reasoning
        if message.thinking:
            out["thinking_blocks"] = [block.to_dict() for block in message.thinking]
        return out
    if isinstance(message, ToolResultMessage):
        content = message.content
        result: dict[str, Any] = {
            "role": "tool",
            "tool_call_id": message.call_id,
            "content": content if isinstance(content, str) else _parts_to_openai(content),
        }
        if message.is_error:
            # Not a chat-completions field: native providers read it, the chat-completions wire drops it.
            result["is_error"] = True
        return result
    raise InvalidInput(f"not a message: {type(message).__name__}")


def _parts_from_openai(raw: Iterable[Any], where: str) -> tuple[ContentPart, ...]:
    parts: list[ContentPart] = []
    for item in raw:
        if isinstance(item, str):
            parts.append(TextPart(item))
            continue
        if not isinstance(item, Mapping):
            raise InvalidInput(f"{where}: a content part must be an object, got {type(item).__name__}")
        kind = item.get("type")
        if kind == "text":
            parts.append(TextPart(str(item.get("text", ""))))
        elif kind == "image_url":
            image = item.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str) or not url:
                raise InvalidInput(f"{where}: an image_url part needs a url")
            detail = image.get("detail") if isinstance(image, Mapping) else None
            parts.append(ImagePart(url=url, detail=detail if detail in ("auto", "low", "high") else None))
        else:
            raise InvalidInput(f"{where}: content part type {kind!r} is not supported (text, image_url)")
    return tuple(parts)


def _content_from_openai(raw: Any, where: str) -> str | tuple[ContentPart, ...]:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return _parts_from_openai(raw, where)
    raise InvalidInput(f"{where}: content must be a string or a list of parts, got {type(raw).__name__}")


def from_openai(raw: Mapping[str, Any]) -> Message:
    """A message from the OpenAI chat-completions shape (``developer`` reads as ``system``).

    Raises:
        InvalidInput: the mapping is not a message this shape allows; the text says what is wrong.
    """
    if not isinstance(raw, Mapping):
        raise InvalidInput(f"a message must be an object, got {type(raw).__name__}")
    role = raw.get("role")
    where = f"{role or '?'} message"
    if role in ("system", "developer"):
        return SystemMessage(content=text_of(_content_from_openai(raw.get("content"), where)))
    if role == "user":
        return UserMessage(content=_content_from_openai(raw.get("content"), where))
    if role == "assistant":
        calls: list[ToolCall] = []
        for i, item in enumerate(raw.get("tool_calls") or ()):
            fn = item.get("function") if isinstance(item, Mapping) else None
            if not isinstance(fn, Mapping) or not fn.get("name"):
                raise InvalidInput(f"{where}: tool_calls[{i}] needs function.name")
            args = fn.get("arguments")
            try:
                parsed = parse_tool_arguments(args)
            except Exception:
                parsed = {}
            calls.append(
                ToolCall(
                    id=str(item.get("id") or f"call_{i}"),
                    name=str(fn["name"]),
                    arguments=parsed,
                    raw_arguments=args if isinstance(args, str) else None,
                )
            )
        reasoning = raw.get("reasoning_content") or raw.get("reasoning") or ""
        blocks = raw.get("thinking_blocks")
        signed = [SignedThinking.from_dict(b) for b in blocks] if isinstance(blocks, list) else []
        return AssistantMessage(
            content=text_of(_content_from_openai(raw.get("content"), where)),
            reasoning=reasoning if isinstance(reasoning, str) else "",
            tool_calls=tuple(calls),
            thinking=tuple(b for b in signed if b is not None),
        )
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInput(f"{where}: tool_call_id is required")
        return ToolResultMessage(
            call_id=call_id,
            content=_content_from_openai(raw.get("content"), where),
            is_error=raw.get("is_error") is True,
        )
    raise InvalidInput(f"unknown message role {role!r} (system, developer, user, assistant, tool)")
