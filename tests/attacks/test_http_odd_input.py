"""Boundary: odd input a real ``stead serve`` is sent, and what it shows of it (issue 26).

A NUL byte or another control character in an id of a path ends in a clear
400 on every route, on SQLite and on PostgreSQL (which cannot store a NUL at
all). The page tells a browser not to frame it, not to guess its types and
not to send its addresses elsewhere. Control characters a model or an MCP
server put in a tool's name or a summary are journaled as they came, and shown
escaped, never as raw escapes a terminal would obey.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from stead.server import endpoints
from stead.summaries import shown

from ..postgres import connect, fresh_schema, url_for
from ..server import process
from ..server.conftest import write_spec
from ..server.process import SOURCE, Serving, stead_serve

serving = process.serving


@pytest.fixture(params=["sqlite", "postgres"])
def on_each_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Serving]:
    specs = tmp_path / "specs"
    specs.mkdir()
    write_spec(specs, "waiter", [{"wait_for_input": "go?"}, {"finish": "ok"}])
    if request.param == "sqlite":
        with stead_serve(f"sqlite:///{tmp_path / 'stead.db'}", "--specs", str(specs)) as s:
            yield s
        return
    connect().close()  # skips where no PostgreSQL answers
    with fresh_schema() as schema, stead_serve(url_for(schema), "--specs", str(specs),
                                               data_dir=tmp_path / "data") as s:  # fmt: skip
        yield s


def test_a_nul_byte_in_any_id_is_a_clear_400(on_each_store: Serving) -> None:
    serving = on_each_store
    admin, _ = serving.token(role="admin")
    auth = {"authorization": f"Bearer {admin}"}
    made = httpx.post(f"{serving.base}/v1/agents", headers=auth, json={"spec_file": "waiter.yaml"})
    real = made.json()["agent_id"]
    tried = 0
    for e in endpoints():
        names = re.findall(r"{(\w+)}", e.path)
        for bad in names:
            for odd in ("x%00y", "%00", "x%01y"):
                values = {n: real if n == "agent_id" else "x_1" for n in names} | {bad: odd}
                if bad == "seq":
                    values[bad] = "1" + odd
                path = e.path.format_map(values)
                body = {} if e.body is not None and not e.raw else None
                got = httpx.request(e.method, f"{serving.base}{path}", headers=auth, json=body)
                tried += 1
                assert got.status_code == 400, (e.method, path, got.status_code, got.text)
                assert got.json()["error"]["code"] == "bad_request", got.text
    assert tried > 60
    # the page's routes too
    with httpx.Client(base_url=serving.base) as client:
        assert client.post("/login", data={"token": admin}).status_code == 303
        for path in ("/agents/x%00y", f"/agents/{real}%00", "/agents/x%00/events/1"):
            got = client.get(path)
            assert got.status_code == 400, (path, got.status_code, got.text)


# -- 11. the page's headers; control characters shown escaped ---------------------------------


def test_the_page_tells_the_browser_not_to_frame_sniff_or_refer(serving: Serving) -> None:
    viewer, _ = serving.token()
    with httpx.Client(base_url=serving.base) as client:
        pages = [client.get("/login")]
        assert client.post("/login", data={"token": viewer}).status_code == 303
        made = client.get("/")
        pages += [made, client.get("/approvals"), client.get("/agents/ag_missing")]
        for page in pages:
            policy = page.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in policy, (page.url, page.headers)
            assert "default-src 'none'" in policy or "default-src 'self'" in policy
            assert page.headers.get("x-content-type-options") == "nosniff"
            assert page.headers.get("referrer-policy") == "no-referrer"
            assert page.headers.get("x-frame-options") == "DENY"
        api = client.get("/v1/agents", headers={"authorization": f"Bearer {viewer}"})
        assert api.headers.get("x-content-type-options") == "nosniff"
        assert "frame-ancestors 'none'" in api.headers.get("content-security-policy", "")


def test_the_agent_page_s_script_runs_under_its_policy(serving: Serving) -> None:
    operator, _ = serving.token(role="operator")
    made = httpx.post(f"{serving.base}/v1/agents", headers={"authorization": f"Bearer {operator}"},
                      json={"spec_file": "waiter.yaml"})  # fmt: skip
    with httpx.Client(base_url=serving.base) as client:
        assert client.post("/login", data={"token": operator}).status_code == 303
        page = client.get(f"/agents/{made.json()['agent_id']}")
    nonce = re.search(r"'nonce-([^']+)'", page.headers["content-security-policy"])
    assert nonce is not None and f'<script nonce="{nonce.group(1)}">' in page.text


HOSTILE = "evil\x1b[2J\u202eexe.txt"


def test_control_characters_are_journaled_as_they_came_and_shown_escaped(
    tmp_path: Path,
) -> None:
    write_spec(tmp_path, "s", [{"tool": HOSTILE, "args": {}}, {"finish": "done \x1b[31mred"}],
               tools=["read_file"])  # fmt: skip
    store = f"sqlite:///{tmp_path / 'stead.db'}"

    def stead(*argv: str) -> str:
        return subprocess.run(
            [sys.executable, "-m", "stead", *argv, "--store", store,
             "--data-dir", str(tmp_path / "data")],
            cwd=tmp_path, env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin",
                               "COLUMNS": "200"},
            capture_output=True, text=True, timeout=120,
        ).stdout + "\n"  # fmt: skip

    ran = subprocess.run(
        [sys.executable, "-m", "stead", "run", "s.yaml", "--store", store,
         "--data-dir", str(tmp_path / "data")],
        cwd=tmp_path, env={"PYTHONPATH": str(SOURCE), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "\x1b[31m" not in ran.stdout + ran.stderr and "\\x1b[31m" in ran.stdout + ran.stderr
    [agent] = json.loads(stead("ls", "--json"))
    raw = stead("trace", agent["agent_id"], "--json")
    assert "\\u001b[2J\\u202eexe.txt" in raw  # journaled as it came
    shown_trace = stead("trace", agent["agent_id"])
    assert "\x1b" not in shown_trace and "\u202e" not in shown_trace
    assert "evil\\x1b[2J\\u202eexe.txt" in shown_trace
    show = stead("show", agent["agent_id"])
    assert "\x1b" not in show and "\\x1b[31mred" in show
    # and the page says the same
    with stead_serve(store, data_dir=tmp_path / "data") as s:
        viewer, _ = s.token(tenant=agent["tenant"])
        with httpx.Client(base_url=s.base) as client:
            assert client.post("/login", data={"token": viewer}).status_code == 303
            page = client.get(f"/agents/{agent['agent_id']}").text
    assert "\x1b" not in page and "\u202e" not in page
    assert "evil\\x1b[2J\\u202eexe.txt" in page and "done \\x1b[31mred" in page


def test_shown_escapes_controls_and_direction_marks_only() -> None:
    assert shown("a\x1bb\u202ec\u2066d\x00e\x7f") == "a\\x1bb\\u202ec\\u2066d\\x00e\\x7f"
    assert shown("plain, naïve, 日本 ✓\nnext\tcol") == "plain, naïve, 日本 ✓\nnext\tcol"
