#!/usr/bin/env python3
"""A small fake of the Anthropic Messages API, enough for the real `claude` to run a turn.

Standard library only: the agent tests copy it into a simulator box and run it there, on
the box's own loopback (the box has its own network). It answers `POST /v1/messages`
(streaming server-sent events, or one JSON message) and `count_tokens`.

What it answers, from the last user message of a request:
- a text starting with `run: ` -> a `Bash` tool_use block for the rest of the text (a
  prompt typed after an interrupted call comes with that call's tool_result too);
- otherwise a tool_result -> the text "done" (the turn ends);
- anything else -> the text "ok".

Usage: fake_anthropic.py PORT [LOG]   (LOG gets one JSON line per request: its reply, and
the texts of the request's user messages)
"""

from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)
_LOG: str | None = None


def _last_user(body: dict) -> object:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            return message.get("content")
    return None


def _blocks(content: object) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def reply_for(body: dict) -> tuple[list[dict], str]:
    """The content blocks of the answer and its stop reason."""
    blocks = _blocks(_last_user(body))
    texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
    for text in reversed(texts):
        text = text.strip()
        if text.startswith("run: "):
            command = text[len("run: ") :].strip()
            tool = {
                "type": "tool_use",
                "id": f"toolu_{next(_ids):06d}",
                "name": "Bash",
                "input": {"command": command, "description": "Run what the user asked"},
            }
            return [tool], "tool_use"
    if any(b.get("type") == "tool_result" for b in blocks):
        return [{"type": "text", "text": "done"}], "end_turn"
    return [{"type": "text", "text": "ok"}], "end_turn"


def _usage() -> dict:
    return {"input_tokens": 12, "output_tokens": 7}


def _events(model: str, blocks: list[dict], stop: str) -> list[tuple[str, dict]]:
    message = {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    out: list[tuple[str, dict]] = [("message_start", {"type": "message_start", "message": message})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        out.append(
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        )
        out.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    out.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 7},
            },
        )
    )
    out.append(("message_stop", {"type": "message_stop"}))
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _json(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._json(200, {"ok": True})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        if path.endswith("/count_tokens"):
            self._json(200, {"input_tokens": 12})
            return
        if not path.endswith("/v1/messages"):
            self._json(404, {"type": "error", "error": {"type": "not_found_error"}})
            return
        blocks, stop = reply_for(body)
        if _LOG:
            with open(_LOG, "a") as log:
                said = [
                    b.get("text", "")
                    for m in body.get("messages") or []
                    if m.get("role") == "user"
                    for b in _blocks(m.get("content"))
                    if b.get("type") == "text"
                ]
                entry = {"stream": bool(body.get("stream")), "reply": blocks, "user": said}
                log.write(json.dumps(entry) + "\n")
        model = str(body.get("model") or "claude-fake")
        if not body.get("stream"):
            message = {
                "id": f"msg_{next(_ids):06d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": _usage(),
            }
            self._json(200, message)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for name, data in _events(model, blocks, stop):
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True


def main() -> None:
    global _LOG
    port = int(sys.argv[1])
    _LOG = sys.argv[2] if len(sys.argv) > 2 else None
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
