"""The editor path, end to end: the real ``yaml-language-server`` (from npm), told of
the schema by a spec's first-line comment, names the line of a misspelled field."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import IO, Any

import pytest

from stead.specschema import schema_text

from .needs import missing

SPEC = """\
# yaml-language-server: $schema={schema}
name: tidy
model: openai:gpt-4o-mini
instructons: Tidy the README.
limits:
  max_step: 5
"""


@pytest.fixture(scope="module")
def language_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        missing("npm and node are not installed", "install node and npm")
    folder = tmp_path_factory.mktemp("yls")
    try:
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "yaml-language-server@1"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=300,
        )
    except subprocess.TimeoutExpired:
        missing("npm install yaml-language-server took over 300 s", "reach the npm registry")
    server = folder / "node_modules" / ".bin" / "yaml-language-server"
    if done.returncode != 0 or not server.exists():
        tail = " ".join(done.stderr.split())[-200:]
        missing(f"npm cannot install yaml-language-server: {tail}", "reach the npm registry")
    return server


def _send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    pipe.flush()


def _receive(pipe: IO[bytes]) -> dict[str, Any]:
    length = 0
    while (line := pipe.readline().strip()) != b"":
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    if not length:
        raise EOFError("the language server closed its output")
    message: dict[str, Any] = json.loads(pipe.read(length))
    return message


def test_the_language_server_names_the_misspelled_fields_lines(
    language_server: Path, tmp_path: Path
) -> None:
    schema = tmp_path / "agent-spec.schema.json"
    schema.write_text(schema_text(), encoding="utf-8")
    spec = tmp_path / "agent.yaml"
    spec.write_text(SPEC.format(schema=schema.as_uri()), encoding="utf-8")
    diagnostics = _diagnostics(language_server, tmp_path, spec)
    lines = sorted(d["range"]["start"]["line"] + 1 for d in diagnostics)
    assert lines == [4, 6], diagnostics  # instructons, limits.max_step
    assert all("not allowed" in d["message"] for d in diagnostics), diagnostics


def _diagnostics(server: Path, root: Path, spec: Path) -> list[dict[str, Any]]:
    """The first non-empty diagnostics the server publishes for ``spec`` (60 s at most)."""
    settings = {"yaml": {"validate": True, "schemaStore": {"enable": False}}}
    with subprocess.Popen(
        [str(server), "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            init = {"processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {}}
            _send(proc.stdin, {"id": 1, "method": "initialize", "params": init})
            deadline = time.monotonic() + 60
            opened = False
            while time.monotonic() < deadline:
                message = _receive(proc.stdout)
                if message.get("id") == 1 and "result" in message:
                    _send(proc.stdin, {"method": "initialized", "params": {}})
                    _send(proc.stdin, {"method": "workspace/didChangeConfiguration",
                                       "params": {"settings": settings}})  # fmt: skip
                    _send(proc.stdin, {"method": "textDocument/didOpen", "params": {
                        "textDocument": {"uri": spec.as_uri(), "languageId": "yaml",
                                         "version": 1,
                                         "text": spec.read_text(encoding="utf-8")}}})  # fmt: skip
                    opened = True
                elif "method" in message and "id" in message:  # a request of the server's
                    items = message.get("params", {}).get("items", [])
                    result = [settings["yaml"] for _ in items] if items else None
                    _send(proc.stdin, {"id": message["id"], "result": result})
                elif opened and message.get("method") == "textDocument/publishDiagnostics":
                    params = message["params"]
                    if params["uri"] == spec.as_uri() and params["diagnostics"]:
                        found: list[dict[str, Any]] = params["diagnostics"]
                        return found
        finally:
            proc.kill()
    return []
