"""``stead selftest isolation``: prove on this machine that one agent's residue
does not reach another's.

Tenant A's agent plants unique canaries everywhere it can leave something: a
file in its workspace, files in ``/tmp`` and ``/dev/shm`` inside its sandbox, a
secret (which its shell run gets in its environment), and its memory. Then
tenant B's agent, run by the same process right after, probes: it lists and
reads everything its sandbox can see, dumps its environment, and its own state
and context are searched; and B's view of the store is asked for A's agent,
journal, secret and blobs by name. Any canary found, or any of A's data
reachable through B's view, is a FAIL with the evidence.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import storefiles
from .canonical import dumps
from .clock import SystemClock
from .errors import NotFound
from .runtime.context import render
from .runtime.runtime import Runtime
from .sandbox.base import Sandbox
from .sandbox.secrets import KEY_FILE_ENV, new_key
from .spec import parse_spec
from .store.base import Store

PROBE = (
    "echo '--- ls'; ls -la / /tmp /dev/shm /workspace 2>&1; "
    "echo '--- cat'; cat /tmp/* /tmp/.* /dev/shm/* /dev/shm/.* 2>&1; "
    "echo '--- env'; env; "
    "echo '--- find'; find / -xdev -name '*canary*' 2>/dev/null | head -50; "
    "echo '--- grep'; grep -rl stead-canary /tmp /dev/shm /workspace /etc /root /home "
    "2>/dev/null | head -50; "
    "echo '--- ps'; ls /proc | grep -c '^[0-9]'; cat /proc/[0-9]*/cmdline 2>/dev/null | "
    "tr '\\0' ' '"
)


@dataclass(slots=True)
class SelftestReport:
    """PASS or FAIL, with every check and what it saw."""

    passed: bool = True
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def check(self, name: str, ok: bool, evidence: str = "") -> None:
        self.checks.append((name, ok, evidence))
        self.passed = self.passed and ok


def _agent(
    rt: Runtime,
    folder: Path,
    name: str,
    tenant: str,
    script: list[Any],
    tools: list[Any],
    **more: Any,
) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(yaml.safe_dump(script), encoding="utf-8")
    data = {"name": name, "tenant": tenant, "model": "scripted:script.yaml", "tools": tools}
    return rt.create(parse_spec({**data, **more}, folder)).agent_id


PROBE_SERVER = Path(__file__).parent / "tools" / "mcp" / "probe_server.py"
"""The MCP server B's agent runs in its sandbox, to look for A's data and the store."""


def _reached(path: Path, said: str) -> bool:
    """Whether what a server said of ``path`` shows the host's content there (the
    same path inside a sandbox may exist and be its own: an empty ``/tmp``)."""
    try:
        if path.is_dir():
            return any(name in said for name in os.listdir(path))
        if storefiles.is_held(path):  # its own header: opening it would drop its locks
            head = repr(storefiles.SQLITE_HEADER)[2:-1]
        else:
            with open(path, "rb") as fh:
                head = repr(fh.read(48))[2:-1]
    except OSError:
        return False
    return bool(head) and head in said


def _off_limits(store: Store, data_dir: Path, workspace_a: Path) -> list[str]:
    """Host paths no agent's MCP server may read: the store, the vault key, the data
    folder (every workspace and blob), A's workspace."""
    paths = [str(data_dir.resolve()), str(workspace_a.resolve())]
    db = getattr(store, "path", None)
    if isinstance(db, Path):
        paths.append(str(db.resolve()))
    key_file = os.environ.get(KEY_FILE_ENV)
    if key_file:
        paths.append(str(Path(key_file).resolve()))
    return paths


def _refused(call: Callable[[], object]) -> bool:
    try:
        result = call()
    except NotFound:
        return True
    return result is None or result is False or result == []


def isolation_selftest(
    store: Store, data_dir: Path, sandbox: Sandbox | None = None
) -> SelftestReport:
    """Run the canary test against ``store`` under ``data_dir``; see the module doc."""
    run_id = uuid.uuid4().hex[:12]
    canary = f"stead-canary-{run_id}"
    key = base64.b64decode(new_key())
    tenant_a, tenant_b = f"selftest-a-{run_id}", f"selftest-b-{run_id}"
    rt_a = Runtime(store, data_dir, tenant=tenant_a, sandbox=sandbox, secret_key=key)
    rt_b = Runtime(store, data_dir, tenant=tenant_b, sandbox=sandbox, secret_key=key)
    report = SelftestReport()
    specs = data_dir / "selftest" / run_id

    rt_a.vault().set(tenant_a, "TOKEN", f"{canary}-secret", at=rt_a.clock.now())
    plant = (
        f"echo {canary}-tmp > /tmp/{canary}; echo {canary}-shm > /dev/shm/{canary}; "
        f'echo "$TOKEN" > /tmp/{canary}-env; '
        f"(sleep 30; echo {canary}-process) > /dev/null 2>&1 &"
    )
    agent_a = _agent(
        rt_a,
        specs / "a",
        "canary-planter",
        tenant_a,
        [
            {"tool": "write_file", "args": {"path": f"{canary}.txt", "content": f"{canary}-ws"}},
            {"tool": "shell", "args": {"command": plant}},
            {"remember": {"canary": f"{canary}-memory"}},
            {"finish": "planted"},
        ],
        ["write_file", {"tool": "shell", "secrets": ["TOKEN"]}],
    )
    state_a = rt_a.run(agent_a).state
    planted = state_a.status == "completed" and all(c["ok"] for c in state_a.recent_calls)
    report.check(
        "tenant A's agent planted its canaries",
        planted,
        "" if planted else dumps(state_a.recent_calls),
    )
    blob_hashes = list(state_a.manifest.values())

    off_limits = _off_limits(store, data_dir, rt_a.workspace(agent_a, tenant_a).root)
    agent_b = _agent(
        rt_b,
        specs / "b",
        "canary-prober",
        tenant_b,
        [
            {"tool": "shell", "args": {"command": PROBE}},
            {"tool": "list_files", "args": {}},
            {"tool": "probe__look", "args": {"paths": off_limits}},
            {"finish": "probed"},
        ],
        ["shell", "list_files"],
        # an MCP server is a process of B's too: it runs in B's sandbox
        mcp=[{"name": "probe", "command": ["python", str(PROBE_SERVER)],
              "mounts": [str(PROBE_SERVER.parent)]}],
        scope=[{"tool": "*"}],
    )  # fmt: skip
    state_b = rt_b.run(agent_b).state
    record_b = rt_b.store.get_record(agent_b)
    # whole outputs from the journal: the state keeps only clipped ones
    outputs = {
        e.data["tool"]: dumps(e.data.get("output"))
        for e in rt_b.store.read_events(agent_b)
        if e.kind == "tool_result"
    }
    seen = {
        "B's sandbox (listing, reading, environment, processes)": outputs.get("shell", ""),
        "B's workspace listing": outputs.get("list_files", ""),
        "B's state (memory, calls)": dumps(state_b.to_json()),
        "B's next model context": render(state_b, record_b.spec, rt_b.tools_for(record_b)).text,
        "B's journal": dumps([e.to_json() for e in rt_b.store.read_events(agent_b)]),
    }
    ran = bool(state_b.recent_calls) and all(c["ok"] for c in state_b.recent_calls)
    report.check("tenant B's agent ran its probes", ran, "" if ran else dumps(state_b.recent_calls))
    looked = outputs.get("probe__look", "")
    seen["B's MCP server (files, environment)"] = looked
    lines = str(json.loads(looked)).splitlines() if looked else []
    for path in off_limits:
        said = next((line for line in lines if line.startswith(path + ":")), "")
        reached = _reached(Path(path), said[len(path) + 1 :])  # what it saw, not the name
        report.check(
            f"B's MCP server cannot read {path}", not reached, said[:240] if reached else ""
        )
    for where, text in seen.items():
        found = canary in text
        at = text.find(canary)
        report.check(
            f"no canary in {where}", not found, text[max(0, at - 120) : at + 120] if found else ""
        )

    api = {
        "A's agent record": lambda: rt_b.store.get_record(agent_a),
        "A's state": lambda: rt_b.store.load_state(agent_a),
        "A's journal": lambda: list(rt_b.store.read_events(agent_a)),
        "A's lease": lambda: rt_b.store.acquire_lease(agent_a, "selftest", 1, 0),
        "A's secret": lambda: rt_b.store.get_secret(tenant_a, "", "TOKEN"),
        "A's agents in a listing": lambda: [a for a in rt_b.store.list_agents(tenant_a)],
        "A's blobs by hash": lambda: any(rt_b.blobs(tenant_b).has(h) for h in blob_hashes),
    }
    for what, call in api.items():
        refused = _refused(call)
        report.check(
            f"B's view of the store refuses {what}", refused, "" if refused else "it was returned"
        )
    _over_http(report, store, data_dir, key, tenant_b, agent_a, canary)
    return report


def _over_http(
    report: SelftestReport, store: Store, data_dir: Path, key: bytes, tenant_b: str,
    agent_a: str, canary: str,
) -> None:  # fmt: skip
    """Tenant B's admin token, at ``stead serve``'s API and page, asks for A's agent by
    id and for everything it may list: nothing of A is found, no canary answered."""
    from starlette.testclient import TestClient

    from .server import Server, application
    from .server.auth import mint
    from .store.tokens import TokenRows

    if not isinstance(store, TokenRows):
        return
    token, record = mint(store, tenant_b, "admin", "stead selftest", SystemClock())
    try:
        server = Server(store, data_dir, secret_key=key)
        server.close = lambda: None  # type: ignore[method-assign]  # the store is the caller's
        auth = {"authorization": f"Bearer {token}"}
        with TestClient(application(server)) as http:
            for what in ("", "/events", "/stream", "/scope", "/certificate"):
                status = http.get(f"/v1/agents/{agent_a}{what}", headers=auth).status_code
                report.check(f"the API answers B's token for A's agent{what} with not found",
                             status == 404, "" if status == 404 else f"HTTP {status}")  # fmt: skip
            said = [http.get(p, headers=auth).text
                    for p in ("/v1/agents", "/v1/approvals", "/v1/secrets")]  # fmt: skip
            http.post("/login", data={"token": token})
            said += [http.get(p).text for p in ("/", "/approvals", f"/agents/{agent_a}")]
            refusal = f"no agent with id {agent_a}"
            found = [t[:240] for t in said if canary in t or agent_a in t.replace(refusal, "")]
            report.check("no canary, and nothing of A, in the API's or the page's answers to B",
                         not found, "; ".join(found))  # fmt: skip
    finally:
        store.revoke_token(record.token_id, SystemClock().now())
