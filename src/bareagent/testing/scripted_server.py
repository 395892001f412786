"""A local HTTP server that speaks the Anthropic Messages, OpenAI Chat Completions and
OpenAI Responses APIs and replays a scripted conversation (format: `testing.script`).

Tests (and `bareagent demo`) point the real `anthropic` / `openai` SDKs at it through
their base URL.

Each request consumes the first unused turn whose `when` fits (all given conditions are
substring/name matches; no `when` fits anything). `last_user_contains` looks at what the
client sent after the last assistant message: user text, tool results and (for
Anthropic) notifications merged into the user turn. A tool call's `arguments` is a raw
string sent verbatim by the OpenAI endpoints (to exercise argument-parsing fallbacks);
the Anthropic endpoint, whose wire format needs an object, uses `input` or the parsed
string.

When no turn fits, the server answers with a normal end_turn reply whose text is
``(script exhausted)`` and records the request with ``turn=None``; a 500 would make the
SDKs retry and bury the real problem. Error turns are consumed once, so an SDK retry
after a 429/5xx gets the next turn. Requests whose shape the real API would reject
(tool results that do not answer the previous tool calls, bad thinking signatures,
`system` roles in Anthropic messages, ...) get a 400 in the provider's error format and
consume no turn. With `models`, an unknown model gets the provider's 404.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from bareagent.testing.script import load_script
from bareagent.testing.wire_replies import (
    Reply,
    anthropic_events,
    anthropic_message,
    chat_completion,
    chat_events,
    count_words,
    new_id,
    responses_events,
    responses_object,
    responses_output,
    responses_status,
)
from bareagent.testing.wire_requests import (
    RequestView,
    anthropic_view,
    chat_view,
    responses_view,
    validate_anthropic,
    validate_chat,
    validate_responses,
)

log = logging.getLogger(__name__)

EXHAUSTED_TEXT = "(script exhausted)"
_SECRET_HEADERS = {"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"}

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


@dataclass
class RecordedRequest:
    """One request the server received (secret headers removed)."""

    path: str
    body: Any
    headers: dict[str, str]
    turn: int | None = None
    status: int = 200


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: ScriptedLLMServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet; requests are recorded on the server object instead."""

    def do_POST(self) -> None:
        """Dispatch one API call to the owning ScriptedLLMServer."""
        self.server.owner._handle_post(self)

    def do_GET(self) -> None:
        """Answer `GET /v1/models` (OpenAI shape); everything else is 404."""
        self.server.owner._handle_get(self)


_ROUTES = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/responses": "responses",
    "/responses": "responses",
}


class ScriptedLLMServer:
    """Serve a scripted conversation on 127.0.0.1 for the real SDKs (see module docstring)."""

    def __init__(
        self,
        script: Mapping[str, Any] | str | os.PathLike[str],
        *,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        loaded = load_script(script)
        self._turns: list[dict[str, Any]] = loaded["turns"]
        self._models: list[str] | None = loaded["models"]
        self._used = [False] * len(self._turns)
        self._lock = threading.Lock()
        self._host = host
        self._port = port
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[RecordedRequest] = []

    # -- lifecycle

    def start(self) -> ScriptedLLMServer:
        """Bind and serve in a daemon thread (idempotent)."""
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-llm-{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedLLMServer is not running; call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://{self._host}:{self.port}"

    @property
    def anthropic_base_url(self) -> str:
        """Base URL for the Anthropic SDK (it appends `/v1/messages`)."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """Base URL for the OpenAI SDK (it appends `/chat/completions`, `/responses`)."""
        return self.url + "/v1"

    # -- script state

    @property
    def remaining_turns(self) -> int:
        """How many scripted turns have not been consumed yet."""
        with self._lock:
            return self._used.count(False)

    def _select(self, view: RequestView) -> int | None:
        for index, turn in enumerate(self._turns):
            if not self._used[index] and self._fits(turn.get("when") or {}, view):
                self._used[index] = True
                return index
        return None

    @staticmethod
    def _fits(when: Mapping[str, str], view: RequestView) -> bool:
        if "system_contains" in when and when["system_contains"] not in view.system:
            return False
        if "last_user_contains" in when and when["last_user_contains"] not in view.last_user:
            return False
        return not ("tools_include" in when and when["tools_include"] not in view.tools)

    def _reply(self, turn: Mapping[str, Any] | None, view: RequestView, api: str) -> Reply:
        turn = turn if turn is not None else {"text": EXHAUSTED_TEXT}
        prefix = "toolu_" if api == "anthropic" else "call_"
        calls = []
        for raw in turn.get("tool_calls") or []:
            arguments = raw.get("arguments")
            tool_input = raw.get("input")
            if tool_input is None:
                parsed = _try_json(arguments) if arguments is not None else {}
                tool_input = parsed if isinstance(parsed, dict) else {}
            if arguments is None:
                arguments = json.dumps(tool_input)
            calls.append(
                {
                    "id": raw.get("id") or new_id(prefix),
                    "name": raw["name"],
                    "input": dict(tool_input),
                    "arguments": arguments,
                }
            )
        text, thinking = str(turn.get("text", "")), str(turn.get("thinking", ""))
        stop = turn.get("stop_reason") or ("tool_use" if calls else "end_turn")
        spoken = " ".join([text, thinking, *(c["arguments"] for c in calls)])
        return Reply(
            text=text,
            thinking=thinking,
            calls=calls,
            stop_reason=str(stop),
            input_tokens=max(1, count_words(json.dumps(view.body))),
            output_tokens=max(1, count_words(spoken)),
            model=view.model or "scripted-model",
        )

    # -- HTTP

    def _handle_get(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path
        if path in ("/v1/models", "/models"):
            models = self._models or ["scripted-model"]
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "bareagent"} for m in models
            ]
            _send_json(handler, 200, {"object": "list", "data": data})
        else:
            _send_json(handler, 404, {"error": {"message": f"no route for GET {path}"}})

    def _handle_post(self, handler: _Handler) -> None:
        path = urlsplit(handler.path).path
        api = _ROUTES.get(path)
        headers = {
            k.lower(): v for k, v in handler.headers.items() if k.lower() not in _SECRET_HEADERS
        }
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length > 0 else b""
        record = RecordedRequest(path=path, body=None, headers=headers)
        if api is None:
            record.status = 404
            with self._lock:
                self.requests.append(record)
            _send_json(handler, 404, {"error": {"message": f"no route for POST {path}"}})
            return
        try:
            body = json.loads(raw.decode("utf-8") or "null")
        except ValueError:
            body = None
        record.body = body if body is not None else raw.decode("utf-8", "replace")
        try:
            self._answer(handler, api, body, record)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away mid-stream; nothing left to tell it
        except Exception as err:
            # A bug here must surface as one clear failure, not as SDK retries of a
            # dropped connection.
            log.exception("scripted server failed on %s", path)
            record.status = 500
            with contextlib.suppress(OSError):
                _send_error(
                    handler, api, 500, f"scripted server error: {err}", {"x-should-retry": "false"}
                )

    def _answer(self, handler: _Handler, api: str, body: Any, record: RecordedRequest) -> None:
        if not isinstance(body, Mapping):
            with self._lock:
                record.status = 400
                self.requests.append(record)
            _send_error(handler, api, 400, "request body must be a JSON object")
            return
        view = {"anthropic": anthropic_view, "chat": chat_view, "responses": responses_view}[api](
            body
        )
        validate = {
            "anthropic": validate_anthropic,
            "chat": validate_chat,
            "responses": validate_responses,
        }[api]
        with self._lock:
            self.requests.append(record)
            if self._models is not None and view.model not in self._models:
                record.status = 404
                problem: tuple[int, str] | None = (404, f"model '{view.model}' not found")
            else:
                invalid = validate(body)
                if invalid is not None:
                    record.status = 400
                    problem = (400, invalid)
                else:
                    problem = None
                    record.turn = self._select(view)
        if problem is not None:
            _send_error(handler, api, *problem)
            return
        turn = self._turns[record.turn] if record.turn is not None else None
        if turn is not None and turn.get("delay"):
            time.sleep(float(turn["delay"]))
        if turn is not None and turn.get("error"):
            error = turn["error"]
            record.status = int(error["status"])
            extra = {}
            if error.get("retry_after") is not None:
                extra["retry-after-ms"] = str(int(float(error["retry_after"]) * 1000))
            _send_error(handler, api, record.status, str(error.get("message", "")), extra)
            return
        reply = self._reply(turn, view, api)
        if view.stream:
            if api == "anthropic":
                _send_sse(handler, anthropic_events(reply), done=False)
            elif api == "chat":
                options = body.get("stream_options") or {}
                _send_sse(
                    handler, chat_events(reply, bool(options.get("include_usage"))), done=True
                )
            else:
                _send_sse(handler, responses_events(reply), done=False)
        elif api == "anthropic":
            _send_json(handler, 200, anthropic_message(reply), {"request-id": new_id("req_")})
        elif api == "chat":
            _send_json(handler, 200, chat_completion(reply), {"x-request-id": new_id("req_")})
        else:
            output = responses_output(reply)
            payload = responses_object(reply, output, responses_status(reply))
            _send_json(handler, 200, payload, {"x-request-id": new_id("req_")})


def _try_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _send_json(
    handler: _Handler, status: int, payload: Any, headers: Mapping[str, str] | None = None
) -> None:
    data = json.dumps(payload).encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()


def _send_error(
    handler: _Handler,
    api: str,
    status: int,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> None:
    if api == "anthropic":
        kind = _ANTHROPIC_ERROR_TYPES.get(status, "api_error")
        payload: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        extra = {"request-id": new_id("req_")}
    else:
        kind = _OPENAI_ERROR_TYPES.get(status, "server_error")
        code = "model_not_found" if status == 404 else None
        payload = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        extra = {"x-request-id": new_id("req_")}
    _send_json(handler, status, payload, {**extra, **(headers or {})})


def _send_sse(handler: _Handler, events: Iterable[tuple[str | None, Any]], *, done: bool) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for event, data in events:
        prefix = f"event: {event}\n" if event else ""
        handler.wfile.write(f"{prefix}data: {json.dumps(data)}\n\n".encode())
        handler.wfile.flush()
    if done:
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
