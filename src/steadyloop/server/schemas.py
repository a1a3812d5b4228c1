"""The API's request and response bodies, as pydantic models: validation and the OpenAPI document.

Requests refuse unknown fields, so a typo is an error rather than a silently ignored setting.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ApprovalOut",
    "ApprovalsIn",
    "BranchIn",
    "BranchOut",
    "BranchSummaryOut",
    "CreateSession",
    "Decision",
    "DecisionOut",
    "EntryOut",
    "ErrorDetail",
    "ErrorOut",
    "FloorOut",
    "ImageIn",
    "InfoOut",
    "OutputSchema",
    "PostMessage",
    "QueueMessage",
    "QueuedOut",
    "RunOut",
    "SessionDetail",
    "SessionList",
    "SessionOut",
    "SessionPatch",
    "ToolOut",
    "TreeOut",
    "UsageOut",
]

EffectName = Literal["read", "mutate-reversible", "mutate-irreversible", "destructive"]
Effort = Literal["none", "minimal", "low", "medium", "high", "off"]
_NAME = r"^[A-Za-z0-9_.:-]{1,128}$"
_EntryId = Annotated[str, Field(pattern=r"^[0-9]{1,18}$")]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ApprovalsIn(_In):
    """Which of the session's calls wait for a decision."""

    require_for: list[EffectName] | None = Field(default=None, max_length=4)
    overrides: dict[str, bool] | None = Field(default=None, max_length=256)
    timeout_s: float | None = Field(default=None, gt=0, le=86_400)


class CreateSession(_In):
    """A new session: an agent document, and fields layered over it."""

    title: str | None = Field(default=None, max_length=200)
    system: str | None = Field(default=None, max_length=200_000, description="the system prompt")
    model: str | None = Field(default=None, max_length=256)
    tools: list[str] | None = Field(
        default=None, max_length=256, description="tool names from GET /info; absent: every tool offered"
    )
    mcp_servers: list[str] | None = Field(default=None, max_length=64, description="MCP servers by name")
    thinking: Effort | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    max_turns: int | None = Field(default=None, ge=1, le=10_000)
    context: bool | None = Field(default=None, description="prune and fold when the window fills")
    approvals: ApprovalsIn | None = None
    agent: dict[str, Any] | None = Field(
        default=None, description="an agent spec document (docs/spec.md) as JSON; its endpoint is ignored"
    )


class SessionPatch(_In):
    """What a session's owner may change after it was made: its title."""

    title: str | None = Field(
        max_length=200, description="the new title; null or blank: none (the next message titles it)"
    )


class ImageIn(_In):
    """An image: base64 bytes with their type, or a ``data:`` URL."""

    data: str = Field(max_length=40_000_000)
    mime_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"] | None = None


class OutputSchema(_In):
    """Hold the final answer to a JSON schema."""

    schema_: dict[str, Any] = Field(alias="schema")
    name: str = Field(default="output", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    strict: bool = True

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class PostMessage(_In):
    """A user message that starts a run."""

    text: str = Field(max_length=10_000_000)
    images: list[ImageIn] = Field(default_factory=list, max_length=64)
    output_schema: OutputSchema | None = None


class QueueMessage(_In):
    """A message for a running session's steering or follow-up queue."""

    text: str = Field(min_length=1, max_length=1_000_000)


class Decision(_In):
    """A decision on a gated call."""

    decision: Literal["allow", "deny"]
    reason: str = Field(default="", max_length=2000)


class BranchIn(_In):
    """Continue the session from an entry of its tree (``GET /sessions/{id}/tree``)."""

    entry_id: _EntryId | Annotated[int, Field(strict=True, ge=0, lt=10**18)] | None = Field(
        description="the entry to continue from (its id, as a string or a number); null: from the start, "
        "before any entry",
    )
    summarise: bool = Field(
        default=True,
        description="summarise the branch left behind into an entry the session continues from",
    )
    instructions: str | None = Field(
        default=None, max_length=20_000, description="what the summary should keep or focus on"
    )
    reserve_tokens: int | None = Field(
        default=None,
        ge=0,
        le=10_000_000,
        description="tokens of the window kept free when the summary request is sized (default: the agent's)",
    )


class EntryOut(BaseModel):
    id: str
    parent_id: str | None
    role: str
    message: dict[str, Any] = Field(description="the entry's message, as in the transcript")
    read_files: list[str] | None = Field(
        default=None, description="on a branch summary: the files the branch left behind read"
    )
    modified_files: list[str] | None = Field(
        default=None, description="on a branch summary: the files the branch left behind changed"
    )


class TreeOut(BaseModel):
    leaf: str | None = Field(description="the entry the session continues from; null before any")
    entries: list[EntryOut] = Field(description="every entry of every branch, oldest first")


class BranchSummaryOut(BaseModel):
    summary: str = Field(description="the summary with the files listed after it; empty when aborted")
    read_files: list[str]
    modified_files: list[str]
    summarised: bool = Field(description="false when the summary is only a note of what was left")
    aborted: bool = Field(description="the summary was cancelled (POST /sessions/{id}/abort)")
    error: str | None = Field(description="why the summariser gave no summary")


class BranchOut(BaseModel):
    moved: bool = Field(description="false when the summary was aborted or failed: nothing moved")
    target: str | None
    leaf: str | None = Field(description="the entry the session continues from now")
    left: int = Field(description="entries the move left behind")
    summary: BranchSummaryOut | None = None


class UsageOut(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int = 0
    turns: int = 0
    runs: int = 0


class ApprovalOut(BaseModel):
    approval_id: str
    call_id: str
    name: str
    arguments: dict[str, Any]
    effect: str | None
    expires_at: float


class SessionOut(BaseModel):
    id: str
    title: str | None = Field(description="set by its creator or a rename, else from its first message")
    created_at: float
    updated_at: float
    status: Literal["idle", "running", "interrupted"]
    usage: UsageOut
    message_count: int
    last_event_seq: int
    model: str | None = None
    waiting: int = Field(default=0, description="gated calls of its run waiting for a decision here")


class SessionDetail(SessionOut):
    messages: list[dict[str, Any]] = Field(description="the transcript, every call answered (thinking kept)")
    pending_approvals: list[ApprovalOut]
    tools: list[str]
    system: str


class SessionList(BaseModel):
    sessions: list[SessionOut]


class RunOut(BaseModel):
    outcome: str
    answer: str
    structured: Any = None
    error: str | None = None
    usage: dict[str, Any]
    messages: list[dict[str, Any]]
    last_event_seq: int


class QueuedOut(BaseModel):
    queued: Literal["steer", "follow_up"]


class DecisionOut(BaseModel):
    approval_id: str
    decision: Literal["allow", "deny"]


class ToolOut(BaseModel):
    name: str
    description: str
    effect: str | None
    gated: bool = Field(default=False, description="the operator's floor makes every call of it wait")


class FloorOut(BaseModel):
    """The operator's approvals: a session may gate more and wait less, never less or longer."""

    require_for: list[str] = Field(description="effects whose calls always wait for a decision")
    overrides: dict[str, bool] = Field(description="tools gated (true) or not (false) whatever their effect")
    timeout_s: float | None = Field(description="the longest a decision may take; silence is a deny")


class InfoOut(BaseModel):
    model: str | None
    models: list[str] = Field(default_factory=list, description="the models the endpoint lists, if it does")
    tools: list[ToolOut]
    mcp_servers: list[str]
    auth: bool
    limits: dict[str, float]
    approvals: FloorOut | None = None


class ErrorDetail(BaseModel):
    code: str
    message: str
    hint: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
