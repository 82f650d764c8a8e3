"""The schedule endpoints: an operator adds, pauses, resumes and removes a tenant's
schedules; a viewer lists them with their next times and firings. A schedule of
fresh agents takes its spec as ``POST /v1/agents`` does (the operator's folder, or
a spec in the body held to the network allowlist)."""

from __future__ import annotations

from typing import Any

from ..schedules import Schedules
from ..schedules.definition import CATCH_UP, MAX_CATCH_UP, MESSAGE_CHARS, OVERLAP
from .api import patiently, spec_from
from .app import Call, Endpoint
from .schemas import ID, NUMBER, OBJECT, TEXT, answer, listing, strict

_TIME = {"type": ["number", "string"], "maxLength": 40}
_DURATION = {"type": ["number", "string"], "maxLength": 20}
SCHEDULE = answer({
    "schedule_id": ID, "agent_id": {"type": ["string", "null"]},
    "spec": {"type": ["string", "null"]},
    "when": TEXT, "definition": OBJECT, "made_by": TEXT, "paused": {"type": "boolean"},
    "next_due": {"type": ["number", "null"]}, "upcoming": {"type": "array", "items": NUMBER},
    "runs": {"type": "integer"}, "last_run": {"type": ["string", "null"]},
}, required=["schedule_id", "when", "paused"])  # fmt: skip
SHOWN = answer({"schedule": SCHEDULE, "firings": {"type": "array", "items": OBJECT}},
               required=["schedule", "firings"])  # fmt: skip
BODY = strict(
    {
        "agent_id": {"type": "string", "maxLength": 64},
        "spec": OBJECT,
        "spec_file": {"type": "string", "maxLength": 255},
        "cron": {"type": "string", "maxLength": 200},
        "tz": {"type": "string", "maxLength": 64},
        "every": _DURATION,
        "start": _TIME,
        "at": _TIME,
        "message": {"type": "string", "maxLength": MESSAGE_CHARS},
        "catch_up": {"enum": list(CATCH_UP)},
        "max_catch_up": {"type": "integer", "minimum": 1, "maximum": MAX_CATCH_UP},
        "overlap": {"enum": list(OVERLAP)},
        "jitter": _DURATION,
        "grace": _DURATION,
        "name": {"type": "string", "maxLength": 100},
    },
    one_of=[["agent_id"], ["spec"], ["spec_file"]],
)
_TARGET = ("agent_id", "spec", "spec_file")


def list_schedules(call: Call) -> Any:
    book = Schedules(call.rt)
    return [book.view(r).to_json() for r in book.list(call.query.get("agent_id"))]


def add_schedule(call: Call) -> Any:
    book = Schedules(call.rt)
    fields = {k: v for k, v in call.body.items() if k not in _TARGET}
    if "agent_id" in call.body:
        agent_id = call.body["agent_id"]
        made = patiently(call.server, agent_id, lambda: book.add(agent_id=agent_id, **fields))
    else:
        made = book.add(spec=spec_from(call), **fields)
    return book.view(made).to_json()


def show_schedule(call: Call) -> Any:
    book = Schedules(call.rt)
    found = book.get(call.params["schedule_id"])
    firings = [
        {"due": f.due, "state": f.state, "count": f.count, "agent_id": f.agent_id,
         "detail": f.detail, "done_at": f.done_at}
        for f in book.firings(found.schedule_id)
    ]  # fmt: skip
    return {"schedule": book.view(found, count=5).to_json(), "firings": firings}


def _change(call: Call, what: str) -> Any:
    book = Schedules(call.rt)
    found = book.get(call.params["schedule_id"])

    def change() -> Any:
        if what == "rm":
            book.remove(found.schedule_id)
            return None
        done = book.pause(found.schedule_id) if what == "pause" else book.resume(found.schedule_id)
        return book.view(done).to_json()

    return patiently(call.server, found.agent_id or found.schedule_id, change)


def pause_schedule(call: Call) -> Any:
    return _change(call, "pause")


def resume_schedule(call: Call) -> Any:
    return _change(call, "resume")


def remove_schedule(call: Call) -> None:
    _change(call, "rm")


ENDPOINTS = [
    Endpoint("GET", "/v1/schedules", "read", "List the tenant's schedules and their next times",
             list_schedules, listing(SCHEDULE), tag="schedules"),
    Endpoint("POST", "/v1/schedules", "operate",
             "Add a schedule: wake an agent, or make a fresh one from a spec, at chosen times",
             add_schedule, SCHEDULE, body=BODY, status=201, tag="schedules"),
    Endpoint("GET", "/v1/schedules/{schedule_id}", "read", "A schedule and its firings",
             show_schedule, SHOWN, tag="schedules"),
    Endpoint("POST", "/v1/schedules/{schedule_id}/pause", "operate", "Pause a schedule",
             pause_schedule, SCHEDULE, tag="schedules"),
    Endpoint("POST", "/v1/schedules/{schedule_id}/resume", "operate",
             "Resume a schedule from the next time after now",
             resume_schedule, SCHEDULE, tag="schedules"),
    Endpoint("DELETE", "/v1/schedules/{schedule_id}", "operate", "Remove a schedule",
             remove_schedule, {}, status=204, tag="schedules"),
]  # fmt: skip
