"""In a real browser: the agent's timeline shows what its model is writing while the
answer streams in, then the decision it made in its place."""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.models.fake_servers import FakeServer, Reply, openai_answer, openai_call, openai_stream
from tests.needs import missing

from .process import stead_serve
from .test_browser import CHROMIUM, Site

WORDS = ["I am reading ", "the notes, ", "then I will ", "finish the work."]


def _dripped(release: threading.Event) -> Iterator[bytes]:
    """An OpenAI stream whose words come a piece at a time, and whose call comes
    only once the test has seen the words on the page."""
    calls = [openai_call("call_1", "finish", {"summary": "finished"})]
    whole = list(openai_stream(openai_answer(calls, "".join(WORDS))))
    text_chunks = [c for c in whole if b'"content"' in c and b"tool_calls" not in c]
    rest = [c for c in whole if c not in text_chunks]
    yield rest[0]  # the role
    for chunk in text_chunks:
        yield chunk
        time.sleep(0.05)
    release.wait(timeout=60)
    yield from rest[1:]


@pytest.fixture
def live_site(tmp_path: Path) -> Iterator[tuple[Site, FakeServer, threading.Event]]:
    if not Path(CHROMIUM).exists():
        missing("Debian's chromium is not installed", "apt-get install -y chromium")
    release = threading.Event()
    with FakeServer() as model:
        model.queue(Reply(200, headers={"content-type": "text/event-stream"},
                          chunks=_dripped(release)))  # fmt: skip
        specs = tmp_path / "specs"
        specs.mkdir()
        spec = {"name": "streamer", "instructions": "Read, then finish.",
                "model": {"provider": "openai", "name": "m-1", "base_url": model.url},
                "tools": ["read_file"]}  # fmt: skip
        (specs / "streamer.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
        extra = {"STEAD_SECRET_KEY": base64.b64encode(os.urandom(32)).decode(),
                 "OPENAI_API_KEY": "sk-test-0123456789",
                 "STEAD_MODEL_KEY_ENV": "OPENAI_API_KEY"}  # fmt: skip
        store = f"sqlite:///{tmp_path / 'stead.db'}"
        with stead_serve(store, "--specs", str(specs), extra=extra) as served:
            token, _ = served.token("default", "operator")
            try:
                yield Site(served.base, {"operator": token}), model, release
            finally:
                release.set()  # the model's answer ends, and with it the server's run


def test_the_timeline_shows_the_models_words_as_they_stream(
    live_site: tuple[Site, FakeServer, threading.Event],
) -> None:
    from playwright.sync_api import expect, sync_playwright

    site, _, release = live_site
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(site.base + "/login")
        page.fill("#token", site.tokens["operator"])
        page.click("button[type=submit]")
        agent_id = site.api("POST", "/v1/agents", json={"spec_file": "streamer.yaml"})["agent_id"]
        page.goto(f"{site.base}/agents/{agent_id}")
        site.api("POST", f"/v1/agents/{agent_id}/run")
        writing = page.locator("#writing")
        expect(writing).to_contain_text("".join(WORDS), timeout=20_000)  # before the decision
        assert page.locator("#timeline").inner_text().count("decision") == 0
        release.set()
        expect(page.locator("#status")).to_have_text("completed", timeout=20_000)
        expect(page.locator("#timeline")).to_contain_text("decision")
        expect(writing).to_have_count(0)  # the decision took its place
        browser.close()
