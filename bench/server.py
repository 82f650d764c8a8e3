"""The approvals inbox with 100 calls waiting: how long the page takes.

``python -m bench.server`` makes 100 agents that each wait on a person's
approval (a scripted agent whose write needs one), serves the store with
``stead serve``, and measures, as medians over repeated loads:

* the server's answer for ``/approvals`` (the page's HTML, over HTTP);
* the page loaded in Debian's Chromium through Playwright, to its ``load``
  event (where Chromium is installed: ``apt-get install chromium``).

The issue's bar is one second for the page.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

from stead import Runtime, parse_spec
from stead.clock import SystemClock
from stead.server.auth import mint
from stead.store.sqlite import SqliteStore

REPO = Path(__file__).resolve().parents[1]
WAITING = 100


def _store(folder: Path) -> str:
    (folder / "script.yaml").write_text(yaml.safe_dump(
        [{"tool": "write_file", "args": {"path": "out.txt", "content": "x" * 200}},
         {"finish": "done"}]), encoding="utf-8")  # fmt: skip
    data = {"name": "asker", "model": "scripted:script.yaml", "tools": ["write_file"],
            "autonomy": "act_with_approval"}  # fmt: skip
    spec = parse_spec(data, folder)
    store = SqliteStore(folder / "stead.db")
    rt = Runtime(store, folder)
    for _ in range(WAITING):
        rt.run(rt.create(spec).agent_id)
    assert len(rt.pending_approvals()) == WAITING
    token, _ = mint(store, "default", "approver", "bench", SystemClock())
    rt.close()
    return token


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        token = _store(folder)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env |= {"PYTHONPATH": str(REPO),
                "STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode()}  # fmt: skip
        server = subprocess.Popen(
            [sys.executable, "-m", "stead", "serve", "--port", str(port), "--store",
             f"sqlite:///{folder / 'stead.db'}", "--data-dir", str(folder)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    httpx.get(base + "/v1/health", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            client = httpx.Client(base_url=base, timeout=30)
            client.post("/login", data={"token": token})
            times = []
            for _ in range(21):
                t0 = time.perf_counter()
                page = client.get("/approvals")
                times.append(time.perf_counter() - t0)
                assert page.status_code == 200 and page.text.count('class="card"') == WAITING
            print(f"| /approvals with {WAITING} waiting | median | max |\n|---|---|---|")
            print(f"| server's answer (HTML over HTTP) | {statistics.median(times) * 1000:.0f} ms "
                  f"| {max(times) * 1000:.0f} ms |")  # fmt: skip
            chromium = shutil.which("chromium")
            if chromium is None:
                print("| the page in Chromium | not measured: chromium is not installed | |")
                return
            from playwright.sync_api import sync_playwright

            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page()
                page.goto(base + "/login")
                page.fill("#token", token)
                page.click("button[type=submit]")
                loads = []
                for _ in range(7):
                    t0 = time.perf_counter()
                    page.goto(base + "/approvals", wait_until="load")
                    loads.append(time.perf_counter() - t0)
                browser.close()
            median, worst = statistics.median(loads) * 1000, max(loads) * 1000
            print(f"| the page in Chromium, to its load event | {median:.0f} ms | {worst:.0f} ms |")
        finally:
            server.terminate()
            server.wait(timeout=20)


if __name__ == "__main__":
    main()
