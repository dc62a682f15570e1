"""A misbehaving MCP server, written by hand in raw JSON-RPC lines, for tests/e2e/test_proxy_faults.py.

It answers the handshake and lists its tools like any server; each tool then fails in its own way:
`exit` dies mid-call (stderr says why), `hang` never answers, `garbage` writes a line that is not
JSON and then a response with neither a result nor an error, `junk` writes a stray non-JSON line
before a good answer, `stray` answers a made-up id and then its own call twice, `unreadable` answers with invalid UTF-8 (`how`
"utf8") or JSON nested 5,000 deep ("deep"), `nested` answers with a `structuredContent` nested
`depth` levels deep (and a text block of `lines` lines, none for 0), `late` answers
after `seconds` (a result of `mb` megabytes, meanwhile serving other requests), `huge` streams a result of `mb` megabytes (never held in memory), `echo`
works. `--hang-at-start` never answers anything; `--no-tools` has no tools capability.
`--pid-file PATH` starts a child of its own (`sleep`, in its process group) and writes both pids
there; `--ignore-eof` keeps running after its stdin closes, `--ignore-sigterm` ignores SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

TOOLS = [
    {"name": name, "description": f"fails: {name}", "inputSchema": {"type": "object"}}
    for name in ("exit", "hang", "garbage", "junk", "stray", "unreadable", "nested", "late", "huge", "echo")
]


WRITING = threading.Lock()


def send(message: dict) -> None:
    with WRITING:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def text_answer(request_id: object, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}}


def stream_huge(request_id: int, mb: float) -> None:
    """A tools/call result of `mb` megabytes of text, written a chunk at a time, TypeScript-style
    (`{"result":…,"jsonrpc":"2.0","id":…}`: the id comes last)."""
    out = sys.stdout.buffer
    out.write(b'{"result":{"content":[{"type":"text","text":"')
    line = b"0123456789abcdef" * 4 + b"\\n"
    total = int(mb * 1_000_000)
    chunk = line * (65_536 // len(line))
    written = 0
    while written < total:
        out.write(chunk)
        written += len(chunk)
    out.write(b'"}]},"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b"}\n")
    out.flush()


def main() -> None:
    hang_at_start = "--hang-at-start" in sys.argv
    no_tools = "--no-tools" in sys.argv
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "--pid-file" in sys.argv:
        child = subprocess.Popen(["sleep", "600"])
        with open(sys.argv[sys.argv.index("--pid-file") + 1], "w") as f:
            f.write(f"{os.getpid()} {child.pid}\n")
    for raw in sys.stdin:
        if not raw.strip():
            continue
        message = json.loads(raw)
        if hang_at_start or "id" not in message or "method" not in message:
            continue
        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            send(
                {
                    "jsonrpc": "2.0",
                    "id": request_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                        "capabilities": {"resources": {}} if no_tools else {"tools": {}},
                        "serverInfo": {"name": "faulty", "version": "0"},
                    },
                }
            )
        elif method == "tools/list" and not no_tools:
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments") or {}
            if name == "exit":
                sys.stderr.write("fatal: the database connection was lost\n")
                sys.stderr.flush()
                os._exit(3)
            elif name == "hang":
                continue
            elif name == "garbage":
                sys.stdout.write("this is not JSON at all\n")
                send({"jsonrpc": "2.0", "id": request_id})
            elif name == "junk":
                sys.stdout.write("<html>oops</html>\n")
                send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": "fine"}]}})
            elif name == "stray":
                send(text_answer("never-asked-42", "an answer nobody asked for"))
                send(text_answer(request_id, "stray"))
                send(text_answer(request_id, "the same answer again"))
            elif name == "unreadable":
                head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'
                if arguments.get("how") == "deep":
                    body = b'{"content":[],"deep":' + b"[" * 5_000 + b"]" * 5_000 + b"}"
                else:
                    body = b'{"content":[{"type":"text","text":"caf\xe9 cr\xe8me"}]}'
                with WRITING:
                    sys.stdout.flush()
                    sys.stdout.buffer.write(head + body + b"}\n")
                    sys.stdout.buffer.flush()
            elif name == "nested":  # written out by hand, so that any depth can be asked for
                depth, lines = int(arguments.get("depth", 900)), int(arguments.get("lines", 1))
                content = [{"type": "text", "text": "\n".join(f"line {i}" for i in range(lines))}] if lines else []
                nested = "[" * (depth - 1) + '"bottom"' + "]" * (depth - 1)  # in {"deep": …}: `depth` levels
                result = '{"content":' + json.dumps(content) + ',"structuredContent":{"deep":' + nested + "}}"
                with WRITING:
                    sys.stdout.write('{"jsonrpc":"2.0","id":' + json.dumps(request_id) + ',"result":' + result + "}\n")
                    sys.stdout.flush()
            elif name == "late":
                later = text_answer(request_id, "late\n" * int(float(arguments.get("mb", 0)) * 200_000))
                threading.Timer(float(arguments.get("seconds", 2)), send, (later,)).start()
            elif name == "huge":
                stream_huge(request_id, float(arguments.get("mb", 100)))
            elif name == "echo":
                text = str(arguments.get("text", ""))
                send({"jsonrpc": "2.0", "id": request_id, "result": {"content": [{"type": "text", "text": text}]}})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": request_id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    while "--ignore-eof" in sys.argv:
        time.sleep(60)


if __name__ == "__main__":
    main()
