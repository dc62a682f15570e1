"""The documentation's nginx example in front of three replicas: a real nginx, the config as printed.

The `nginx` block of "Running for a team" is taken from docs/guides/team.md, its upstream servers pointed at
three `serve --http --host 0.0.0.0 --database … --stateless` replicas on loopback and its TLS
listener swapped for a plain loopback port (the rest is used as written), and real MCP clients of
both protocol eras work through it, before and after one replica is SIGKILLed. nginx comes from
Debian (`.ci/run` installs nginx-light); without it this skips, and fails under CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _servers import client, free_port, serve

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "alice-token-for-the-nginx-test"


def _readme_config() -> str:
    text = (ROOT / "docs" / "guides" / "team.md").read_text("utf-8")
    section = text[text.index("# Running for a team") :]
    match = re.search(r"```nginx\n(.*?)```", section, re.S)
    assert match, "docs/guides/team.md (Running for a team) has no nginx example"
    return match.group(1)


def _config(home: Path, ports: list[int], listen: int) -> str:
    config = _readme_config()
    upstreams = re.findall(r"^\s*server \S+:8765;\n", config, re.M)
    assert len(upstreams) == 3, config
    for upstream, port in zip(upstreams, ports, strict=True):
        config = config.replace(upstream, f"    server 127.0.0.1:{port};\n", 1)
    config = re.sub(r"listen 443 ssl;", f"listen 127.0.0.1:{listen};", config)
    return (
        f"worker_processes 1;\npid {home}/nginx.pid;\nerror_log {home}/error.log;\n"
        "events { worker_connections 256; }\n"
        f"http {{\nlog_format upstream '$upstream_addr';\naccess_log {home}/access.log upstream;\n"
        f"client_body_temp_path {home}/body;\n"
        f"proxy_temp_path {home}/proxy;\n{config}}}\n"
    )


async def test_the_readme_nginx_example_balances_three_replicas(tmp_path: Path, pg_url: str) -> None:
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if nginx is None:
        message = "nginx is not installed (apt-get install nginx-light; .ci/run does it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    env = {"CONTEXTFOLD_TOKENS": f"alice={TOKEN}"}
    args = ("--host", "0.0.0.0", "--database", pg_url, "--stateless")
    with (
        serve(tmp_path / "a", *args, env=env) as a,
        serve(tmp_path / "b", *args, env=env) as b,
        serve(tmp_path / "c", *args, env=env) as c,
    ):
        ports = [int(s.url.rsplit(":", 1)[1].split("/")[0]) for s in (a, b, c)]
        listen = free_port()
        conf = tmp_path / "nginx.conf"
        conf.write_text(_config(tmp_path, ports, listen))
        started = subprocess.run([nginx, "-c", str(conf), "-p", str(tmp_path)], capture_output=True, text=True)
        assert started.returncode == 0, started.stderr
        url = f"http://127.0.0.1:{listen}/mcp"
        try:
            for mode in ("auto", "legacy"):
                async with client(url, token=TOKEN, mode=mode) as c1:
                    assert not (await c1.call_tool("session_open", {"session_id": mode, "model": "gpt-4o"})).is_error
                    for i in range(6):
                        done = await c1.call_tool(
                            "append", {"session_id": mode, "messages": [{"role": "user", "content": f"message {i}"}]}
                        )
                        assert not done.is_error, done.content
                    context = await c1.call_tool("get_context", {"session_id": mode})
                    assert [m["content"] for m in context.structured_content["messages"]] == [
                        f"message {i}" for i in range(6)
                    ]
            b.kill()
            async with client(url, token=TOKEN) as c2:
                for _ in range(6):  # some would have gone to the dead replica
                    status = await c2.call_tool("status", {"session_id": "auto"})
                    assert not status.is_error and status.structured_content["message_count"] == 6
        finally:
            subprocess.run([nginx, "-c", str(conf), "-p", str(tmp_path), "-s", "stop"], capture_output=True)
    # Which replica answered each request (after the kill, nginx tried the dead one, then the next).
    answered = {line.rsplit(", ", 1)[-1] for line in (tmp_path / "access.log").read_text().splitlines()}
    assert {f"127.0.0.1:{port}" for port in ports} <= answered, answered
