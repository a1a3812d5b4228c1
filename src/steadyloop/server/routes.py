"""The API's routes: each reads its request, asks the runtime, and answers; no decision is made here."""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from steadyloop.messages import message_to_json
from steadyloop.sessions import SessionInfo, reconstruct

from .agents import server_layer
from .control import Order
from .errors import ApiError
from .floor import floor_gates
from .guard import is_json
from .hub import attach
from .listing import MAX_QUERY, search, title_from
from .runtime import Runtime
from .schemas import (
    ApprovalOut,
    BranchIn,
    BranchOut,
    BranchSummaryOut,
    CreateSession,
    Decision,
    DecisionOut,
    EntryOut,
    FloorOut,
    InfoOut,
    PostMessage,
    QueuedOut,
    QueueMessage,
    RunOut,
    SessionDetail,
    SessionList,
    SessionOut,
    SessionPatch,
    ToolOut,
    TreeOut,
    UsageOut,
)
from .settings import LOCAL_PRINCIPAL, is_local
from .sse import error_frame, frame, heartbeat

__all__ = ["Api"]

M = TypeVar("M", bound=BaseModel)

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_HEARTBEAT_S = 15.0


class _NotANumber(ValueError):
    """A number JSON cannot hold, which Python's reader would have taken as a float."""


def _no_constant(word: str) -> Any:
    # NaN and the infinities are no JSON; read as floats they went on into free-form fields (an output
    # schema, an agent document) and from there onto the wire to the model as text no JSON reader takes.
    raise _NotANumber(f"{word} is no JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotANumber(f"{text[:40]} is past what a JSON number can be read as")
    return value


def _json(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", by_alias=True), status_code=status)


class Api:
    """The route handlers over one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings

    # -- request plumbing ----------------------------------------------------------------------------

    def principal(self, request: Request) -> str:
        tokens = self.settings.tokens
        if not tokens:
            peer = request.client.host if request.client is not None else None
            if not is_local(peer, request.headers.items()):
                raise ApiError(
                    "forbidden",
                    "this server has no tokens, so it answers this machine only, and not through a proxy",
                    hint="start it with --token NAME=TOKEN to serve other machines or a reverse proxy",
                )
            return LOCAL_PRINCIPAL
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        given = given.strip()
        if scheme.lower() == "bearer" and given:
            for token, principal in tokens.items():
                if hmac.compare_digest(token.encode(), given.encode()):
                    return principal
        raise ApiError(
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": 'Bearer realm="steadyloop"'},
        )

    async def body(self, request: Request, model: type[M]) -> M:
        if not is_json(request.headers.get("content-type")):
            raise ApiError(
                "unsupported_media_type",
                "this route takes a JSON body: Content-Type must be application/json",
                hint="send Content-Type: application/json (an empty body is read as {})",
            )
        limit = self.settings.limits.max_body_bytes
        length = request.headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > limit:
            raise ApiError("payload_too_large", f"the body is over {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError("payload_too_large", f"the body is over {limit} bytes")
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            data: Any = (
                json.loads(raw, parse_constant=_no_constant, parse_float=_finite) if raw.strip() else {}
            )
        except _NotANumber as exc:
            raise ApiError("invalid_request", f"the body is not JSON: {exc}") from None
        except (ValueError, RecursionError):
            raise ApiError("invalid_request", "the body is not JSON") from None
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in error['loc']) or '(body)'}: {error['msg']}"
                for error in exc.errors(include_input=False, include_url=False)[:10]
            )
            raise ApiError("invalid_request", f"the body does not fit the schema: {problems}") from None

    async def session_out(self, principal: str, info: SessionInfo) -> SessionOut:
        usage = info.usage
        status, waiting = await self.runtime.status_and_waiting(principal, info.session_id)
        return SessionOut(
            id=info.session_id,
            title=info.title,
            created_at=info.created_at,
            updated_at=info.updated_at,
            status=status,  # type: ignore[arg-type]
            usage=UsageOut(
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                turns=usage.turns,
                runs=usage.runs,
            ),
            message_count=info.message_count,
            last_event_seq=info.last_event_seq,
            model=await self.runtime.layer_model(principal, info.session_id),
            waiting=waiting,
        )

    # -- routes --------------------------------------------------------------------------------------

    async def info(self, request: Request) -> Response:
        self.principal(request)
        limits = self.settings.limits
        tools = self.settings.tools
        floor = server_layer(self.settings, None).approvals
        return _json(
            InfoOut(
                model=self.runtime.model,
                models=await self.runtime.listed_models(),
                tools=[
                    ToolOut(
                        name=t.name,
                        description=t.description,
                        effect=t.effect,
                        gated=floor_gates(t.name, floor, tools),
                    )
                    for t in tools
                ],
                mcp_servers=[s.name for s in self.settings.mcp_servers],
                auth=bool(self.settings.tokens),
                approvals=FloorOut(
                    require_for=sorted(floor.require_for or ()),
                    overrides=dict(floor.overrides or {}),
                    timeout_s=floor.timeout,
                ),
                limits={
                    "max_body_bytes": limits.max_body_bytes,
                    "max_images": limits.max_images,
                    "max_image_bytes": limits.max_image_bytes,
                    "max_schema_bytes": limits.max_schema_bytes,
                    "max_runs_per_token": limits.max_runs_per_token,
                },
            )
        )

    async def list_sessions(self, request: Request) -> Response:
        principal = self.principal(request)
        query = request.query_params.get("q", "")
        if len(query) > MAX_QUERY:
            raise ApiError("invalid_request", f"q is longer than {MAX_QUERY} characters")
        infos = await search(self.runtime.store, principal, await self.runtime.store.list(principal), query)
        return _json(SessionList(sessions=[await self.session_out(principal, i) for i in infos]))

    async def create_session(self, request: Request) -> Response:
        principal = self.principal(request)
        body = await self.body(request, CreateSession)
        info = await self.runtime.create(principal, body)
        return _json(await self.session_out(principal, info), 201)

    async def get_session(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        info = await self.runtime.info(principal, sid)
        live = await self.runtime.live(principal, sid)
        stored = await self.runtime.store.load_messages(sid, agent_id=principal)
        out = await self.session_out(principal, info)
        detail = SessionDetail(
            **out.model_dump(),
            messages=json.loads(
                self.runtime.scrub.secrets_only(
                    "["
                    + ",".join(message_to_json(m) for m in reconstruct(stored, replay_reasoning=True))
                    + "]"
                )
            ),
            pending_approvals=[
                ApprovalOut(
                    approval_id=r.approval_id,
                    call_id=r.call_id,
                    name=r.name,
                    arguments=r.arguments,
                    effect=r.effect,
                    expires_at=r.expires_at,
                )
                for r in await self.runtime.pending_approvals(live)
            ],
            tools=[t.name for t in live.agent.state.tools],
            system=live.agent.state.system_prompt,
        )
        return _json(detail)

    async def rename_session(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        body = await self.body(request, SessionPatch)
        await self.runtime.info(principal, sid)
        title = " ".join(body.title.split()) if body.title is not None else ""
        await self.runtime.store.set_title(sid, title or None, agent_id=principal)
        return _json(await self.session_out(principal, await self.runtime.info(principal, sid)))

    async def delete_session(self, request: Request) -> Response:
        principal = self.principal(request)
        await self.runtime.delete(principal, request.path_params["session_id"])
        return Response(status_code=204)

    async def export_session(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        await self.runtime.info(principal, sid)
        text = await self.runtime.store.export_jsonl(sid, agent_id=principal)
        return Response(
            self.runtime.scrub.secrets_only(text),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{sid}.jsonl"'},
        )

    async def post_message(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        body = await self.body(request, PostMessage)
        runtime = self.runtime
        images = runtime.images(body.images)
        response_format = runtime.response_format(body.output_schema)
        if runtime.draining:
            raise ApiError(
                "unavailable",
                f"node {runtime.node} is draining: it finishes the runs it has and starts no new one",
                hint="post it to another node",
                headers={"Retry-After": "1"},
            )
        live = await runtime.live(principal, sid)
        await live.settled()
        runtime.check_can_run(live)
        if (await runtime.info(principal, sid)).title is None:  # made over the API without one
            await runtime.store.set_title(sid, title_from(body.text), agent_id=principal)
        await runtime.claim_run(live)
        try:
            runtime.check_can_run(live)  # again: the claim waited on the store
        except ApiError:
            await runtime.release_claim(live)
            raise
        streaming = "text/event-stream" in request.headers.get("accept", "")
        watcher = live.hub.watch() if streaming else None
        base = live.hub.last_seq
        try:
            runtime.start_run(live, body.text, images, response_format)
        except BaseException:
            if watcher is not None:
                live.hub.unwatch(watcher)
            raise
        if watcher is not None:

            async def no_replay(_: int) -> list[Any]:
                return []

            items = attach(live.hub, watcher, no_replay, after=base, until_end_after=base, follow=False)
            return StreamingResponse(
                self._frames(items), media_type="text/event-stream", headers=_SSE_HEADERS
            )
        assert live.task is not None
        outcome = await live.task
        scrub = runtime.scrub
        return _json(
            RunOut(
                outcome=outcome.outcome,
                answer=outcome.answer,
                structured=outcome.structured,
                error=scrub(outcome.error) if outcome.error else None,
                usage=outcome.usage,
                messages=json.loads(scrub.secrets_only(json.dumps(outcome.messages))),
                last_event_seq=live.hub.last_seq,
            )
        )

    async def events(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        after = _seq(request.query_params.get("after") or request.headers.get("last-event-id") or "0")
        follow = request.query_params.get("follow", "run")
        if follow not in ("run", "session"):
            raise ApiError("invalid_request", "follow must be 'run' or 'session'")
        runtime = self.runtime
        info = await runtime.info(principal, sid)
        elsewhere = await runtime.run_elsewhere(principal, sid)
        # No await from here to the watch: an idle hub without watchers may be let go meanwhile.
        hub = runtime.hub(sid, info.last_event_seq, principal)
        watcher = hub.watch()
        if after > max(info.last_event_seq, hub.last_seq):
            hub.unwatch(watcher)
            raise ApiError(
                "invalid_request",
                f"after={after} is past the session's last event ({info.last_event_seq})",
                hint="attach with after=0 to replay the whole record",
            )
        store = runtime.store

        async def replay(seq: int) -> list[Any]:
            return await store.load_events(sid, agent_id=principal, after_seq=seq)

        # The run going when the watcher attached: here, the hub's; on another node, the one its claim
        # names (its end is the first after the seq the claim was made at, even if the hub has it already).
        until: int | None = None
        if watcher.running:
            until = watcher.base
        elif elsewhere is not None:
            until = elsewhere if elsewhere >= 0 else watcher.base  # a claim that did not say where

        async def going() -> bool:
            live = runtime.loaded(sid)
            if live is not None and live.running:
                return True
            return await runtime.run_elsewhere(principal, sid) is not None

        items = attach(
            hub,
            watcher,
            replay,
            after=after,
            until_end_after=until,
            follow=follow == "session",
            heartbeat_s=_HEARTBEAT_S,
            going=going,
        )
        return StreamingResponse(self._frames(items), media_type="text/event-stream", headers=_SSE_HEADERS)

    async def _frames(self, items: AsyncIterator[Any]) -> AsyncIterator[bytes]:
        scrub = self.runtime.scrub
        try:
            async for item in items:
                yield heartbeat() if item is None else frame(item, scrub)
        except Exception:
            yield error_frame("internal", "the event stream failed; reattach with Last-Event-ID")

    async def tree(self, request: Request) -> Response:
        principal = self.principal(request)
        leaf, entries = await self.runtime.tree(principal, request.path_params["session_id"])
        scrub = self.runtime.scrub.secrets_only
        return _json(
            TreeOut(
                leaf=leaf,
                entries=[
                    EntryOut(
                        id=entry.id,
                        parent_id=entry.parent_id,
                        role=entry.message.role,
                        message=json.loads(scrub(message_to_json(entry.message))),
                        read_files=list(entry.files.read_files) if entry.files is not None else None,
                        modified_files=list(entry.files.modified_files) if entry.files is not None else None,
                    )
                    for entry in entries
                ],
            )
        )

    async def branch(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        body = await self.body(request, BranchIn)
        live = await self.runtime.live(principal, sid)
        await live.settled()
        move = await self.runtime.branch(
            live,
            body.entry_id,
            summarise=body.summarise,
            instructions=body.instructions,
            reserve_tokens=body.reserve_tokens,
        )
        summary = move.summary
        scrub = self.runtime.scrub
        return _json(
            BranchOut(
                moved=move.moved,
                target=move.target,
                leaf=move.leaf,
                left=move.left,
                summary=BranchSummaryOut(
                    summary=scrub.secrets_only(summary.summary),
                    read_files=list(summary.read_files),
                    modified_files=list(summary.modified_files),
                    summarised=summary.summarised,
                    aborted=summary.aborted,
                    error=scrub(summary.error) if summary.error is not None else None,
                )
                if summary is not None
                else None,
            )
        )

    async def steer(self, request: Request) -> Response:
        return await self._queue(request, "steer")

    async def follow_up(self, request: Request) -> Response:
        return await self._queue(request, "follow_up")

    async def _queue(self, request: Request, which: Literal["steer", "follow_up"]) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        body = await self.body(request, QueueMessage)
        live = await self.runtime.live(principal, sid)
        await self.runtime.control(live, Order(which, text=body.text))
        return _json(QueuedOut(queued=which), 202)

    async def abort(self, request: Request) -> Response:
        principal = self.principal(request)
        live = await self.runtime.live(principal, request.path_params["session_id"])
        await self.runtime.control(live, Order("abort"))
        return Response(status_code=202)

    async def pending(self, request: Request) -> Response:
        principal = self.principal(request)
        live = await self.runtime.live(principal, request.path_params["session_id"])
        return JSONResponse(
            {
                "approvals": [
                    ApprovalOut(
                        approval_id=r.approval_id,
                        call_id=r.call_id,
                        name=r.name,
                        arguments=r.arguments,
                        effect=r.effect,
                        expires_at=r.expires_at,
                    ).model_dump(mode="json")
                    for r in await self.runtime.pending_approvals(live)
                ]
            }
        )

    async def decide(self, request: Request) -> Response:
        principal = self.principal(request)
        sid = request.path_params["session_id"]
        approval_id = request.path_params["approval_id"]
        body = await self.body(request, Decision)
        live = await self.runtime.live(principal, sid)
        order = Order(
            "decide",
            approval_id=approval_id,
            decision=body.decision,
            reason=body.reason,
            decided_by=principal,
        )
        await self.runtime.control(live, order)
        return _json(DecisionOut(approval_id=approval_id, decision=body.decision))


def _seq(text: str) -> int:
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ApiError("invalid_request", f"a seq is a whole number >= 0, not {text[:40]!r}")
    return int(text)
