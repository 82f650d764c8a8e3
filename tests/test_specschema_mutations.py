"""The schema is never stricter than the reader: from valid specs, Hypothesis renames
keys with typos, drops keys and puts values of the wrong type, at every level, and
whenever :func:`parse_spec` accepts the result the schema must accept it too."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stead import spec as spec_module
from stead.errors import SpecError
from stead.spec import parse_spec
from stead.speccheck import dotted, schema_problems

RICH: list[dict[str, Any]] = [
    {
        "name": "every section",
        "tenant": "acme",
        "instructions": "Rename compute to compute_total.",
        "model": {
            "provider": "openai",
            "name": "llama3.1",
            "base_url": "http://127.0.0.1:11434/v1",
            "api_key_secret": "OLLAMA_KEY",
            "max_tokens": 2048,
            "temperature": 0.2,
            "context_window": 32768,
            "timeout": 120,
            "max_retries": 4,
            "invalid_answers": 3,
            "summarizer": {"provider": "anthropic", "name": "claude-haiku"},
        },
        "tools": ["read_file", {"tool": "shell", "secrets": ["TOKEN"], "env": ["HOME"]}],
        "autonomy": "act_with_approval",
        "goals": [
            "plain",
            {
                "id": "rename",
                "description": "the function is renamed",
                "accept": [
                    {"command": "pytest -q", "timeout": 60},
                    {"files_exist": ["shop/cart.py"]},
                    {"file_contains": {"path": "shop/cart.py", "text": "compute_total"}},
                    {"file_matches": {"path": "README.md", "pattern": "^# Shop"}},
                    {"predicate": "checks:no_todo_left"},
                    {"sign_off": True},
                ],
            },
        ],
        "limits": {
            "max_steps": 50,
            "command_seconds": 30,
            "workspace_mb": 64,
            "workspace_files": 500,
        },
        "scope": [
            {
                "tool": "write_file",
                "args": {
                    "path": {"glob": "src/*"},
                    "size": {"max": 10},
                    "mode": {"one_of": ["a", "w"]},
                },
                "max_uses": 10,
                "valid_for": 3600,
                "reason": "refactor",
                "delegable": True,
            },
            {"tool": "fetch", "args": {"url": {"hosts": ["*.example.com"]}, "n": {"min": 1}}},
            {"tool": "network", "valid_until": 4102444800},
        ],
        "tool_autonomy": {"shell": "act_with_approval"},
        "out_of_scope": "ask",
        "on_text": "finish",
        "monitors": {
            "loop": {"repeat": 3},
            "error_streak": {"errors": 5},
            "budget": {"tool_calls": 100, "window": 60, "steps": 200, "spend": 1.5},
            "probing": {"refusals": 4, "window": 120},
            "drift": {"baseline_sessions": 2, "demote_to": "advise", "tool_mix": 0.5},
            "dataflow": {"verdict": "block", "influence": "off", "answer": "ask"},
            "custom": [
                {"sequence": ["read_file", "fetch"], "within": 30, "verdict": "ask"},
                {"count": "shell", "max": 5, "window": 60},
            ],
        },
        "mcp": [
            {
                "name": "git",
                "command": ["mcp-server-git"],
                "env": {"GIT_AUTHOR_NAME": "stead", "TOKEN": "{secret:GH}"},
                "mounts": ["/opt/servers"],
                "secrets": ["GH"],
                "effect": "effectful",
                "effects": {"git_status": "read_only"},
                "reconcile": {"git_commit": "hooks:commit_made"},
                "timeout": 60,
            },
            {
                "name": "docs",
                "url": "https://docs.example/mcp",
                "headers": {"Authorization": "Bearer {secret:DOCS}"},
                "secrets": ["DOCS"],
            },
        ],
    },
    {
        "name": "small",
        "model": "anthropic:claude-sonnet-4-5",
        "limits": None,
        "scope": None,
        "monitors": {"dataflow": {"off": True}, "probing": None},
    },
]
WRONG = ["wrong", 12345, [1, 2], {"x": 1}, 0.5]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*path, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_paths(item, (*path, i)))
    return out


def _typo(key: str, how: int, at: int) -> str:
    at %= max(len(key), 1)
    if how == 0:
        return key[:at] + key[at + 1 :]  # a letter left out
    if how == 1:
        return key[:at] + key[at] + key[at:]  # a letter doubled
    return key[:at] + "x" + key[at:]  # one too many


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    spec = copy.deepcopy(draw(st.sampled_from(RICH)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(spec) if p]
        path = draw(st.sampled_from(paths))
        parent: Any = spec
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        action = draw(st.sampled_from(["rename", "drop", "wrong"]))
        if action == "wrong":
            parent[last] = copy.deepcopy(draw(st.sampled_from(WRONG)))
        elif isinstance(parent, dict) and action == "rename":
            new = _typo(last, draw(st.integers(0, 2)), draw(st.integers(0, 40)))
            parent[new] = parent.pop(last)
        elif isinstance(parent, dict):
            del parent[last]
        else:
            del parent[last]
    return spec


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_the_schema_never_refuses_what_the_reader_accepts(spec: dict[str, Any]) -> None:
    try:
        parse_spec(spec, None)
    except SpecError:
        return
    assert schema_problems(spec, {}) == []


def test_the_rich_specs_are_valid_to_both() -> None:
    for spec in RICH:
        parse_spec(spec, None)
        assert schema_problems(spec, {}) == []


_CLOSED = {
    (): spec_module.FIELDS,
    ("limits",): spec_module.LIMIT_KEYS,
    ("goals", 1): spec_module.GOAL_FIELDS,
    ("scope", 0): spec_module.GRANT_FIELDS,
    ("tools", 1): spec_module.TOOL_FIELDS,
}


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(sorted(_CLOSED)),
    st.data(),
    st.integers(0, 2),
    st.integers(0, 40),
)
def test_a_misspelled_field_is_refused_by_both_with_the_name_meant(
    where: tuple[Any, ...], data: st.DataObject, how: int, at: int
) -> None:
    allowed = _CLOSED[where]
    meant = data.draw(st.sampled_from(allowed))
    typo = _typo(meant, how, at)
    if typo in allowed or not typo:
        return
    spec = copy.deepcopy(RICH[0])
    target: Any = spec
    for part in where:
        target = target[part]
    target[typo] = copy.deepcopy(target.get(meant, 1))
    with pytest.raises(SpecError):
        parse_spec(spec, None)
    problems = schema_problems(spec, {})
    assert [p.field for p in problems] == [dotted((*where, typo))], problems
    assert "did you mean" in problems[0].message
