"""The API's event stream sends what an agent's model is writing as ``event: text``,
with no id: resuming by ``Last-Event-ID`` stays the journal's."""

from __future__ import annotations

import json
from typing import Any

from stead.livetext import CHANNEL, Piece

from .conftest import Served
from .test_api import made, run_until


def test_the_stream_forwards_the_models_text_without_an_id(served: Served) -> None:
    agent_id = made(served, "waiter.yaml")
    run_until(served, agent_id, {"waiting"})
    path = f"/v1/agents/{agent_id}/stream"
    frames: list[dict[str, str]] = []
    with served.client.stream("GET", path, headers=served.as_("acme", "viewer")) as answer:
        frame: dict[str, str] = {}
        published = False
        for line in answer.iter_lines():
            if line:
                key, _, value = line.partition(": ")
                frame[key] = value
                continue
            if frame:
                frames.append(frame)
            frame = {}
            if not published and any("id" in f for f in frames):
                # the journal so far is being sent: the model of this agent now writes,
                # and another agent's model too (which this stream never shows)
                CHANNEL.publish(Piece("ag_someone_else", "not for this stream", False))
                CHANNEL.publish(Piece(agent_id, "I will wri", False))
                CHANNEL.publish(Piece(agent_id, "I will write the notes.", True))
                published = True
            texts = [f for f in frames if f.get("event") == "text"]
            if texts and json.loads(texts[-1]["data"])["done"]:
                break
    texts = [f for f in frames if f.get("event") == "text"]
    last: dict[str, Any] = json.loads(texts[-1]["data"])
    assert last == {"agent_id": agent_id, "text": "I will write the notes.", "done": True,
                    "step": 0}  # fmt: skip
    assert all("id" not in f for f in texts)
    assert all("someone" not in f["data"] for f in texts)
    journal = [int(f["id"]) for f in frames if "id" in f]
    assert journal == list(range(1, len(journal) + 1))
