"""An agent using the reference filesystem MCP server, from npm, in its bubblewrap sandbox.

``@modelcontextprotocol/server-filesystem`` is installed once (a pinned
version, into pytest's cache folder, outside the Python environment the
sandbox shows anyway, so the spec's ``mounts`` is what lets the server be
read). It runs under ``node`` in the agent's sandbox, told to serve
``/workspace``; a second one, told to serve ``/``, shows that what the server
itself would allow, the sandbox still hides.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.needs import missing

from stead import FakeClock, Kind, Runtime, parse_spec
from stead.sandbox.bwrap import BwrapSandbox
from stead.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "@modelcontextprotocol/server-filesystem"
VERSION = "2026.8.31"
ENTRY = Path("node_modules", PACKAGE, "dist", "index.js")


@pytest.fixture(scope="session")
def npm_dir() -> Path:
    """The folder the server is installed in (installed at the first use)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing("node and npm are not installed", "install node and npm")
    folder = REPO / ".pytest_cache" / "d" / "mcp-npm" / f"server-filesystem-{VERSION}"
    if (folder / ENTRY).is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="installing-", dir=folder.parent))
    done = subprocess.run(
        [npm, "install", "--prefix", str(staging), "--no-audit", "--no-fund",
         f"{PACKAGE}@{VERSION}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        pytest.fail(f"npm install {PACKAGE}@{VERSION} failed:\n{done.stderr[-3000:]}")
    try:
        staging.rename(folder)  # whole or not at all, should another run install too
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    assert (folder / ENTRY).is_file()
    return folder


def fs_server(npm_dir: Path, name: str = "fs", *allowed: str) -> dict[str, Any]:
    return {
        "name": name,
        "command": ["node", str(npm_dir / ENTRY), *(allowed or ["/workspace"])],
        "mounts": [str(npm_dir)],
    }


def make(tmp_path: Path, sandbox: Any, script: list[Any], **spec: Any) -> tuple[Runtime, str]:
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    rt = Runtime(SqliteStore(tmp_path / "s.db"), tmp_path / "data", clock=FakeClock(),
                 sandbox=sandbox)  # fmt: skip
    data = {"name": "files", "model": "scripted:script.yaml", "scope": [{"tool": "*"}], **spec}
    parsed = parse_spec(data, tmp_path)
    Runtime.check_loads(parsed)
    return rt, rt.create(parsed).agent_id


def events(rt: Runtime, agent_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.data) for e in rt.store.read_events(agent_id) if e.kind == kind]


def text_of(output: Any) -> str:
    if isinstance(output, str):
        return output
    return "".join(p.get("text", "") for p in output["content"])


def test_an_agent_writes_and_reads_its_workspace_through_the_filesystem_server(
    tmp_path: Path, bwrap: BwrapSandbox, npm_dir: Path
) -> None:
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "seeded.txt").write_text("from the seed\n", encoding="utf-8")
    script = [
        {"tool": "fs__create_directory", "args": {"path": "/workspace/notes"}},
        {"tool": "fs__write_file",
         "args": {"path": "/workspace/notes/hello.txt", "content": "hello over MCP\n"}},
        {"tool": "fs__read_text_file", "args": {"path": "/workspace/notes/hello.txt"}},
        {"tool": "fs__read_text_file", "args": {"path": "/workspace/seeded.txt"}},
        {"tool": "fs__list_directory", "args": {"path": "/workspace"}},
        {"finish": "written"},
    ]  # fmt: skip
    rt, agent_id = make(tmp_path, bwrap, script, mcp=[fs_server(npm_dir)], workspace="seed")
    (listed,) = events(rt, agent_id, Kind.MCP_TOOLS_LISTED)
    tools = {t["name"]: t for t in listed["tools"]}
    assert {"create_directory", "write_file", "read_text_file", "list_directory"} <= set(tools)
    state = rt.run(agent_id).state
    assert state.status == "completed", state.status_reason
    made, wrote, read, seeded, listing = events(rt, agent_id, Kind.TOOL_RESULT)
    assert all(r["ok"] for r in (made, wrote, read, seeded, listing))
    assert text_of(read["output"]) == "hello over MCP\n"
    assert text_of(seeded["output"]) == "from the seed\n"
    assert "[DIR] notes" in text_of(listing["output"])
    assert "[FILE] seeded.txt" in text_of(listing["output"])
    # the file is in the agent's workspace on the host, and its manifest took it in
    root = rt.workspace(agent_id, "default").root
    assert (root / "notes" / "hello.txt").read_text(encoding="utf-8") == "hello over MCP\n"
    assert "notes/hello.txt" in state.manifest
    assert wrote["changed"] == {"notes/hello.txt": state.manifest["notes/hello.txt"]}
    # effect classes from the server's hints: writes journal an intent, reads do not
    intents = {d["tool"]: d["effect"] for d in events(rt, agent_id, Kind.TOOL_INTENT)}
    assert intents == {"fs__create_directory": "idempotent", "fs__write_file": "idempotent"}
    rt.close()
