#!/usr/bin/env python3
"""A small fake of the OpenAI APIs, enough for the real `codex` (Responses) and `hermes`
(Chat Completions) to run a turn.

Standard library only, like fake_anthropic.py. It answers `POST /v1/responses` with
server-sent events (`response.created`, one `response.output_item.done`,
`response.completed`), `POST /v1/chat/completions` with one message (streamed as two
chunks when asked) and any GET with a list holding one model, `fake-model`.

What it answers, from the end of a request's input:
- a function call's output -> the message "done" (the turn ends);
- a user message holding `run: CMD` -> an `exec_command` call of CMD that asks to leave
  the sandbox (`require_escalated`), so a Codex whose approval policy is on-request asks
  (for chat completions: a `terminal` tool call of CMD, Hermes's shell tool);
- anything else -> the message "ok".

Usage: fake_openai.py PORT [LOG]   (LOG gets one JSON line per Responses request: the texts
of its user messages)
"""

from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_ids = itertools.count(1)
_LOG: str | None = None


def _user_texts(body: dict) -> list[str]:
    said = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("role") == "user":
            content = item.get("content")
            parts = content if isinstance(content, list) else [{"text": str(content or "")}]
            said += [c.get("text", "") for c in parts if isinstance(c, dict)]
    return said


def _last(body: dict) -> tuple[str, bool]:
    """The text of the last user message, and whether a tool's output came after it."""
    for item in reversed(body.get("input") or []):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call_output":
            return "", True
        if item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, list):
                texts = [c.get("text", "") for c in content if isinstance(c, dict)]
                return " ".join(texts), False
            return str(content or ""), False
    return "", False


def reply_for(body: dict) -> dict:
    """The one output item of the answer."""
    text, after_tool = _last(body)
    if not after_tool and "run: " in text:
        command = text.split("run: ", 1)[1].strip()
        arguments = {
            "cmd": command,
            "sandbox_permissions": "require_escalated",
            "justification": "Run what the user asked",
        }
        return {
            "type": "function_call",
            "name": "exec_command",
            "arguments": json.dumps(arguments),
            "call_id": f"call_{next(_ids)}",
        }
    return {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{next(_ids)}",
        "content": [{"type": "output_text", "text": "done" if after_tool else "ok"}],
    }


def chat_reply(body: dict) -> tuple[dict, str]:
    """The assistant message of a chat completion and its finish reason."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    text = last.get("content") if isinstance(last.get("content"), str) else ""
    if last.get("role") == "user" and text.startswith("run: "):
        call = {
            "id": f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": "terminal", "arguments": json.dumps({"command": text[5:]})},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": "done" if last.get("role") == "tool" else "ok"}, "stop"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        model = {"id": "fake-model", "object": "model", "context_length": 128000}
        data = json.dumps({"object": "list", "data": [model]}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        if self.path.rstrip("/").endswith("/chat/completions"):
            self.chat(body)
            return
        if _LOG:
            with open(_LOG, "a") as log:
                log.write(json.dumps({"user": _user_texts(body)}) + "\n")
        rid = f"resp_{next(_ids)}"
        usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
        events = [
            {"type": "response.created", "response": {"id": rid}},
            {"type": "response.output_item.done", "item": reply_for(body)},
            {"type": "response.completed", "response": {"id": rid, "usage": usage}},
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for event in events:
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def chat(self, body: dict) -> None:
        message, finish = chat_reply(body)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            reply = {"id": "chat_1", "object": "chat.completion", "model": "fake-model",
                     "choices": [choice], "usage": usage}  # fmt: skip
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        delta = dict(message)
        if "tool_calls" in delta:
            delta["tool_calls"] = [{**delta["tool_calls"][0], "index": 0}]
        chunks = [
            {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage},
        ]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for chunk in chunks:
            chunk.update(id="chat_1", object="chat.completion.chunk", model="fake-model")
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def main() -> None:
    global _LOG
    _LOG = sys.argv[2] if len(sys.argv) > 2 else None
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()


if __name__ == "__main__":
    main()
