"""The JSON Schema of agent specs, built from the code that reads them.

Each part of a spec has its schema beside its parser, made from the same
constants (the model's options in :mod:`stead.models.options`, grants in
:mod:`stead.governance.grants`, checks in :mod:`stead.integrity.checks`,
monitors in :mod:`stead.integrity.monitor_config`, MCP servers in
:mod:`stead.tools.mcp.config`); the top level is here, from :mod:`stead.spec`'s
fields. The schema is never stricter than :func:`~stead.spec.parse_spec`, which
also checks what a schema cannot (files that must exist, a script's decisions,
unique goal ids). The package ships it as ``schemas/agent-spec.schema.json``
(``stead spec schema`` prints it) so an editor checks a spec as it is typed.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from . import spec
from .governance.grants import constraint_schema, grant_schema
from .integrity.checks import check_schema
from .integrity.monitor_config import monitors_schema
from .models.options import provider_model_schema
from .tools.mcp.config import servers_schema

SCHEMA_ID = "urn:stead:agent-spec"
SCHEMA_FILE = "agent-spec.schema.json"

_FIELD_HELP = {
    "name": "The agent's name, shown in listings and traces. Required.",
    "tenant": "The tenant the agent belongs to: letters, digits, '_', '-' and '.'. "
    "Default: default.",
    "instructions": "What the agent is to do, given to the model as its task. Default: none.",
    "model": "The model that decides each step: provider:name (openai:gpt-4o-mini, "
    "anthropic:claude-sonnet-4-5), a mapping of a provider's options, scripted:PATH "
    "(decisions from a file), replay:PATH (a recording) or program:NAME. Required.",
    "tools": "The tools the agent may call: built-in names, module:function paths, or "
    "{tool, secrets, env} to give a tool vault secrets or variables. Default: none listed, "
    "so every tool the runtime provides.",
    "autonomy": "How much the agent may do on its own, from observe to act_autonomously. "
    "Default: act_autonomously.",
    "goals": "What must be done, each an id with a description and the checks (accept) that "
    "must pass for it to count as done. Default: none.",
    "workspace": "A folder, relative to the spec, copied into the agent's workspace when it "
    "is made. Default: an empty workspace.",
    "limits": "Ceilings on the run: steps, seconds per command, workspace size and files. "
    "Each has a default.",
    "scope": "The grants the agent starts with: which tools it may call, with which "
    "arguments, how often and until when. Default: one unconstrained grant per listed tool.",
    "tool_autonomy": "An autonomy level for single tools, by name, overriding autonomy. "
    "Default: none.",
    "out_of_scope": "What happens to a call no grant covers: refuse it, or ask a person. "
    "Default: refuse.",
    "monitors": "Rules that watch the agent's calls (loops, error streaks, budgets, data "
    "flows, probing, drift) and your own. Default: the built-in rules.",
    "mcp": "MCP servers whose tools the agent may call, each started by a command or "
    "reached by a url. Default: none.",
    "on_text": "What an answer of text with no tool call is: wait for the person's reply, "
    "finish the task, or refuse it. Default: wait.",
}
_LIMIT_HELP = {
    "max_steps": "The most steps the agent takes.",
    "command_seconds": "The longest any command a tool runs may take, in seconds.",
    "workspace_mb": "How large the workspace may grow, in MiB.",
    "workspace_files": "How many files and folders the workspace may hold.",
}
_LIMIT_TYPES: dict[str, dict[str, Any]] = {
    "max_steps": {"type": "integer", "minimum": 1, "default": spec.DEFAULT_MAX_STEPS},
    "command_seconds": {"type": "number", "exclusiveMinimum": 0,
                        "maximum": spec.MAX_COMMAND_SECONDS,
                        "default": spec.DEFAULT_COMMAND_SECONDS},
    "workspace_mb": {"type": "integer", "minimum": 1, "default": spec.DEFAULT_WORKSPACE_MB},
    "workspace_files": {"type": "integer", "minimum": 1, "maximum": spec.MAX_WORKSPACE_FILES,
                        "default": spec.DEFAULT_WORKSPACE_FILES},
}  # fmt: skip
_ID = "^(?!.*\\.\\.)[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
"""A short identifier (:func:`stead.ids.is_id`)."""
_NAMES = {"type": "array", "items": {"type": "string"}}


def _tool_entry() -> dict[str, Any]:
    help_text = {
        "tool": "The tool's name or module:function path.",
        "secrets": "Vault secrets the tool is given.",
        "env": "Variables of the worker the tool is given.",
    }
    types: dict[str, Any] = {"tool": {"type": "string"}, "secrets": _NAMES, "env": _NAMES}
    return {
        "anyOf": [
            {"title": "a tool name or module:function path", "type": "string", "minLength": 1},
            {
                "title": "a tool with secrets or variables",
                "type": "object",
                "properties": {
                    key: {"description": help_text[key], **types[key]} for key in spec.TOOL_FIELDS
                },
                "required": ["tool"],
                "additionalProperties": False,
            },
        ]
    }


def _goal() -> dict[str, Any]:
    help_text = {
        "id": "A short identifier, unique in the spec, e.g. rename.",
        "description": "What the goal is, for the model and for people.",
        "accept": "Checks that must all pass for the goal to count as done.",
    }
    types: dict[str, Any] = {
        "id": {"type": "string", "pattern": _ID},
        "description": {"type": ["string", "null"], "default": ""},
        "accept": {"type": "array", "items": {"$ref": "#/$defs/check"}, "default": []},
    }
    return {
        "anyOf": [
            {"title": "a goal's id", "type": "string", "pattern": _ID},
            {
                "title": "a goal",
                "type": "object",
                "properties": {
                    key: {"description": help_text[key], **types[key]} for key in spec.GOAL_FIELDS
                },
                "required": ["id"],
                "additionalProperties": False,
            },
        ]
    }


def _field_types() -> dict[str, dict[str, Any]]:
    levels = list(spec.AUTONOMY_LEVELS)
    return {
        "name": {"type": "string", "pattern": "\\S"},
        "tenant": {"type": "string", "pattern": _ID, "default": "default"},
        "instructions": {"type": "string", "default": ""},
        "model": {
            "anyOf": [
                {
                    "title": "scripted:PATH, replay:PATH or program:NAME",
                    "type": "string",
                    "pattern": "^(scripted:.|replay:|program:.)",
                },
                {"title": "a provider's model", "$ref": "#/$defs/providerModel"},
            ]
        },
        "tools": {"type": "array", "items": {"$ref": "#/$defs/toolEntry"}, "default": []},
        "autonomy": {"enum": levels, "default": "act_autonomously"},
        "goals": {"type": "array", "items": {"$ref": "#/$defs/goal"}, "default": []},
        "workspace": {"type": ["string", "null"]},
        "limits": {
            "type": ["object", "null"],
            "properties": {
                key: {"description": _LIMIT_HELP[key], **_LIMIT_TYPES[key]}
                for key in spec.LIMIT_KEYS
            },
            "additionalProperties": False,
        },
        "scope": {"type": ["array", "null"], "items": {"$ref": "#/$defs/grant"}},
        "tool_autonomy": {"type": ["object", "null"], "additionalProperties": {"enum": levels}},
        "out_of_scope": {"enum": list(spec.OUT_OF_SCOPE), "default": "refuse"},
        "monitors": {"$ref": "#/$defs/monitors"},
        "mcp": {"$ref": "#/$defs/mcp"},
        "on_text": {"enum": list(spec.ON_TEXT), "default": "wait"},
    }


def spec_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of an agent spec."""
    types = _field_types()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "stead agent spec",
        "description": "What an agent is: its task, model, tools, goals and the limits and "
        "grants it runs under. `stead spec check FILE` checks a spec against this schema and "
        "reads the files it names.",
        "type": "object",
        "properties": {key: {"description": _FIELD_HELP[key], **types[key]} for key in spec.FIELDS},
        "required": ["name", "model"],
        "additionalProperties": False,
        "$defs": {
            "providerModel": provider_model_schema("#/$defs/providerModel"),
            "toolEntry": _tool_entry(),
            "goal": _goal(),
            "check": check_schema(),
            "grant": grant_schema(spec.GRANT_FIELDS),
            "constraint": constraint_schema(),
            "monitors": monitors_schema(),
            "mcp": servers_schema(),
        },
    }


def schema_text() -> str:
    """The schema as the package ships it: indented JSON with a final newline."""
    return json.dumps(spec_schema(), indent=2) + "\n"


def shipped_schema_text() -> str:
    """The schema file in the installed package (``schemas/agent-spec.schema.json``)."""
    return resources.files("stead").joinpath("schemas", SCHEMA_FILE).read_text(encoding="utf-8")
