"""Agent specs: a YAML file that says what an agent is, checked before it runs.

Every problem is reported as a :class:`~stead.errors.SpecError` that names the
field, what was found, and what is allowed. A valid spec is turned into a plain
JSON record that is stored with the agent, with the scripted model's decisions
and the seed folder's path captured, so the agent can be resumed later without
the spec file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import GovernanceError, ScriptError, SpecError, ToolError
from .governance.grants import check_valid_for, parse_grant
from .hostpaths import unlinked
from .ids import is_id
from .integrity.checks import parse_check
from .integrity.monitor_config import MonitorConfigError, build_monitors
from .models.options import parse_model
from .models.recording import read_recording
from .models.scripted import ScriptedModel, read_script
from .tools.mcp.config import parse_servers
from .tools.registry import load_tools
from .yamlsafe import load_yaml, read_text

AUTONOMY_LEVELS = ("observe", "advise", "act_with_approval", "act_autonomously")
DEFAULT_MAX_STEPS = 1000
DEFAULT_COMMAND_SECONDS = 120.0
"""No command a tool runs (``shell`` included) goes on longer, whatever the
model asks, unless the spec's ``limits.command_seconds`` says otherwise."""
MAX_COMMAND_SECONDS = 86_400
DEFAULT_WORKSPACE_MB = 1024
"""How large an agent's workspace may grow (``limits.workspace_mb``)."""
DEFAULT_WORKSPACE_FILES = 10_000
"""How many files and folders an agent's workspace may hold (``limits.workspace_files``):
its manifest is in the agent's state and its journal, and scanned after every call."""
MAX_WORKSPACE_FILES = 1_000_000
LIMIT_KEYS = ("max_steps", "command_seconds", "workspace_mb", "workspace_files")
FIELDS = (
    "name",
    "tenant",
    "instructions",
    "model",
    "tools",
    "autonomy",
    "goals",
    "workspace",
    "limits",
    "scope",
    "tool_autonomy",
    "out_of_scope",
    "monitors",
    "mcp",
    "on_text",
)
ON_TEXT = ("wait", "finish", "refuse")
"""What a model's answer of text and no tool call is (``on_text``): the agent speaking
to its person, who answers (``wait``, the default); its last word on the task,
checked as a finish is (``finish``); or refused as today's tool-only models need."""
_FILED = ("scripted:", "replay:")
"""Models read from a file beside the spec."""
GRANT_FIELDS = ("tool", "args", "max_uses", "valid_for", "valid_until", "reason", "delegable")
"""The fields a grant in a spec's ``scope`` may give (the rest are filled in when recorded)."""
OUT_OF_SCOPE = ("refuse", "ask")
TOOL_FIELDS = ("tool", "secrets", "env")
"""The fields of a ``tools`` entry given as a mapping."""
GOAL_FIELDS = ("id", "description", "accept")


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """A validated agent spec."""

    name: str
    model: str
    tenant: str = "default"
    instructions: str = ""
    tools: tuple[Any, ...] = ()
    autonomy: str = "act_autonomously"
    goals: tuple[dict[str, Any], ...] = ()
    workspace: str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    # the operator's ceiling on every command a tool runs, whatever it asks for
    command_seconds: float = DEFAULT_COMMAND_SECONDS
    workspace_mb: int = DEFAULT_WORKSPACE_MB
    workspace_files: int = DEFAULT_WORKSPACE_FILES
    base_dir: str = "."  # the spec's folder; "" for a spec without one (from the network)
    script: list[Any] | None = field(default=None, compare=False)
    # None: one unconstrained grant per listed tool
    scope: tuple[dict[str, Any], ...] | None = None
    tool_autonomy: dict[str, str] = field(default_factory=dict)
    out_of_scope: str = "refuse"
    monitors: dict[str, Any] | None = None
    # a provider's model: its checked options (stead.models.options), never a key
    model_options: dict[str, Any] | None = None
    # MCP servers whose tools the agent may call (stead.tools.mcp.config)
    mcp: tuple[dict[str, Any], ...] = ()
    on_text: str = "wait"

    def to_record(self) -> dict[str, Any]:
        """The JSON form stored with the agent."""
        return {
            "name": self.name,
            "tenant": self.tenant,
            "instructions": self.instructions,
            "model": self.model,
            "model_options": self.model_options,
            "tools": list(self.tools),
            "autonomy": self.autonomy,
            "goals": [dict(g) for g in self.goals],
            "workspace": self.workspace,
            "limits": {
                "max_steps": self.max_steps,
                "command_seconds": self.command_seconds,
                "workspace_mb": self.workspace_mb,
                "workspace_files": self.workspace_files,
            },
            "base_dir": self.base_dir,
            "script": self.script,
            "scope": None if self.scope is None else [dict(g) for g in self.scope],
            "tool_autonomy": dict(self.tool_autonomy),
            "out_of_scope": self.out_of_scope,
            "monitors": self.monitors,
            "mcp": [dict(m) for m in self.mcp],
            "on_text": self.on_text,
        }


def _fail(field_name: str, problem: str) -> SpecError:
    return SpecError(f"spec field '{field_name}': {problem}")


def _str(data: dict[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if value is None:
        raise _fail(key, "is required")
    if not isinstance(value, str):
        raise _fail(key, f"must be text, got {type(value).__name__}")
    return value


def parse_spec(data: Any, base_dir: str | Path | None = ".") -> AgentSpec:
    """Validate spec data (already parsed from YAML); paths are relative to base_dir.

    ``base_dir=None`` is a spec without a folder (one sent over the network): it
    names no file and no folder, and nothing is imported from a folder of its."""
    base = Path(base_dir).resolve() if base_dir is not None else None
    if not isinstance(data, dict):
        raise SpecError(
            f"a spec is a YAML mapping with fields {', '.join(FIELDS)}; got {type(data).__name__}"
        )
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise _fail(unknown[0], f"is not a spec field; allowed fields are {', '.join(FIELDS)}")
    name = _str(data, "name").strip()
    if not name:
        raise _fail("name", "must not be empty")
    tenant = _str(data, "tenant", "default")
    if not is_id(tenant):
        raise _fail("tenant", f"{tenant!r} is not allowed; use letters, digits, '_', '-', '.'")
    instructions = _str(data, "instructions", "")
    if data.get("model") is None:
        raise _fail("model", "is required")
    if base is None and isinstance(data["model"], str) and data["model"].startswith(_FILED):
        raise _fail("model", "a spec without a folder names no script or recording")
    # without a folder, no model read from one is left: the folder given is never used
    model, script, model_options = parse_model_field(data["model"], base or Path("/"))

    tools = _parse_tools(data.get("tools", []))

    autonomy = _str(data, "autonomy", "act_autonomously")
    if autonomy not in AUTONOMY_LEVELS:
        raise _fail(
            "autonomy", f"{autonomy!r} is not a level; use one of {', '.join(AUTONOMY_LEVELS)}"
        )

    goals = _parse_goals(data.get("goals", []))

    workspace = data.get("workspace")
    if workspace is not None:
        if not isinstance(workspace, str):
            raise _fail("workspace", "must be the path of a folder to seed the workspace from")
        if base is None:
            raise _fail("workspace", "a spec without a folder seeds its workspace from none")
        folder = unlinked(base / workspace)  # a link would seed from wherever it points
        if not folder.is_dir():
            raise _fail("workspace", f"folder {folder} does not exist")
        workspace = str(folder)

    limits = data.get("limits", {})
    if limits is None:
        limits = {}
    if not isinstance(limits, dict) or set(limits) - set(LIMIT_KEYS):
        raise _fail("limits", f"must be a mapping with any of {', '.join(LIMIT_KEYS)}")
    max_steps = limits.get("max_steps", DEFAULT_MAX_STEPS)
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise _fail("limits.max_steps", f"must be a whole number of at least 1, got {max_steps!r}")
    command_seconds = limits.get("command_seconds", DEFAULT_COMMAND_SECONDS)
    if (
        isinstance(command_seconds, bool)
        or not isinstance(command_seconds, int | float)
        or not 0 < command_seconds <= MAX_COMMAND_SECONDS
    ):
        raise _fail(
            "limits.command_seconds",
            f"must be a number of seconds above 0 and at most {MAX_COMMAND_SECONDS}, "
            f"got {command_seconds!r}",
        )
    workspace_mb = limits.get("workspace_mb", DEFAULT_WORKSPACE_MB)
    if isinstance(workspace_mb, bool) or not isinstance(workspace_mb, int) or workspace_mb < 1:
        raise _fail(
            "limits.workspace_mb",
            f"must be a whole number of MiB, at least 1, got {workspace_mb!r}",
        )
    workspace_files = limits.get("workspace_files", DEFAULT_WORKSPACE_FILES)
    if (
        isinstance(workspace_files, bool)
        or not isinstance(workspace_files, int)
        or not 1 <= workspace_files <= MAX_WORKSPACE_FILES
    ):
        raise _fail(
            "limits.workspace_files",
            f"must be a whole number of files and folders from 1 to {MAX_WORKSPACE_FILES:,}, "
            f"got {workspace_files!r}",
        )

    scope = _parse_scope(data.get("scope"))
    tool_autonomy = data.get("tool_autonomy") or {}
    if not isinstance(tool_autonomy, dict) or not all(
        isinstance(k, str) and v in AUTONOMY_LEVELS for k, v in tool_autonomy.items()
    ):
        raise _fail(
            "tool_autonomy",
            f"must map tool names to a level, one of {', '.join(AUTONOMY_LEVELS)}",
        )
    out_of_scope = _str(data, "out_of_scope", "refuse")
    if out_of_scope not in OUT_OF_SCOPE:
        raise _fail("out_of_scope", f"must be 'refuse' or 'ask', not {out_of_scope!r}")
    on_text = _str(data, "on_text", "wait")
    if on_text not in ON_TEXT:
        raise _fail("on_text", f"must be one of {', '.join(ON_TEXT)}, not {on_text!r}")
    monitors = data.get("monitors")
    try:
        # python rules are imported when the agent runs; here only their shape is checked
        build_monitors(monitors, load=lambda ref: _placeholder_rule)
    except MonitorConfigError as exc:
        raise SpecError(f"spec field {exc}") from None
    return AgentSpec(
        name=name,
        model=model,
        model_options=model_options,
        tenant=tenant,
        instructions=instructions,
        tools=tuple(tools),
        autonomy=autonomy,
        goals=goals,
        workspace=workspace,
        max_steps=max_steps,
        command_seconds=float(command_seconds),
        workspace_mb=workspace_mb,
        workspace_files=workspace_files,
        base_dir="" if base is None else str(base),
        script=script,
        scope=scope,
        tool_autonomy=dict(tool_autonomy),
        out_of_scope=out_of_scope,
        monitors=dict(monitors) if monitors else None,
        mcp=tuple(parse_servers(data.get("mcp"))),
        on_text=on_text,
    )


def _parse_tools(tools: Any) -> list[Any]:
    """Tool names or ``module:function`` paths, or ``{tool: REF, secrets: [..], env: [..]}``."""
    if not isinstance(tools, list):
        raise _fail("tools", "must be a list of tool names or module:function paths")
    out: list[Any] = []
    for i, t in enumerate(tools):
        if isinstance(t, str) and t:
            out.append(t)
            continue
        where = f"tools[{i}]"
        if (
            not isinstance(t, dict)
            or not isinstance(t.get("tool"), str)
            or set(t) - set(TOOL_FIELDS)
        ):
            raise _fail(
                where,
                "must be a tool name, a module:function path, or "
                "{tool: NAME, secrets: [SECRET_NAME, ...], env: [VARIABLE, ...]}",
            )
        for key in ("secrets", "env"):
            names = t.get(key, [])
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise _fail(f"{where}.{key}", "must be a list of names")
        out.append(
            {
                "tool": t["tool"],
                "secrets": list(t.get("secrets", [])),
                "env": list(t.get("env", [])),
            }
        )
    return out


def parse_model_field(
    model: Any, base: Path
) -> tuple[str, list[Any] | None, dict[str, Any] | None]:
    """A spec's ``model``: its reference, a script's decisions (read now), and a
    provider's checked options: ``scripted:PATH``, ``replay:PATH`` (a recording),
    ``program:NAME``, ``provider:name`` or a mapping of options."""
    if isinstance(model, str) and model.startswith("replay:"):
        path = (base / model.partition(":")[2]).resolve()
        try:
            options, _ = read_recording(path)
        except SpecError as exc:
            raise _fail("model", str(exc)) from None
        return f"replay:{path}", None, options.to_json()
    if isinstance(model, str) and model.startswith("program:"):
        if not is_id(model.partition(":")[2]):
            raise _fail("model", "'program:NAME' needs a name of letters, digits, '_', '-', '.'")
        return model, None, None  # the program running the agent passes its Model
    if not (isinstance(model, str) and model.startswith("scripted:")):
        options = parse_model(model)  # SpecError naming the field and what is allowed
        return options.ref, None, options.to_json()
    ref = model.partition(":")[2]
    if not ref:
        raise _fail("model", "'scripted:PATH' needs the path of a YAML list of decisions")
    path = (base / ref).resolve()
    try:
        data = read_script(path, "the script")
        ScriptedModel.from_data(data, str(path))
    except ScriptError as exc:
        raise _fail("model", str(exc)) from None
    return model, data, None


def _placeholder_rule(event: Any, call: Any) -> None:
    return None


def _parse_scope(scope: Any) -> tuple[dict[str, Any], ...] | None:
    """The spec's initial grants: recorded at creation, by the spec's author."""
    if scope is None:
        return None
    if not isinstance(scope, list):
        raise _fail("scope", "must be a list of grants, e.g. [{tool: read_file}]")
    out = []
    for i, g in enumerate(scope):
        where = f"scope[{i}]"
        if isinstance(g, dict):
            extra = sorted(set(g) - set(GRANT_FIELDS))
            if extra:
                raise _fail(
                    f"{where}.{extra[0]}",
                    f"is not a grant field in a spec; use {', '.join(GRANT_FIELDS)}",
                )
            # read as-is elsewhere, a spec's text must say what it means: `delegable: no`
            # is the text "no", which would make a grant delegable
            if not isinstance(g.get("reason", ""), str):
                raise _fail(f"{where}.reason", "must be text")
            if not isinstance(g.get("delegable", False), bool):
                raise _fail(f"{where}.delegable", "must be true or false")
        try:
            grant = parse_grant(g, f"spec field '{where}'")
            if isinstance(g, dict) and g.get("valid_for") is not None:
                where_for = f"spec field '{where}.valid_for'"
                grant["valid_for"] = check_valid_for(g["valid_for"], where_for)
        except GovernanceError as exc:
            raise SpecError(str(exc)) from None
        out.append(grant)
    return tuple(out)


def _parse_goals(goals: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(goals, list):
        raise _fail("goals", "must be a list of {id, description, accept}")
    seen: set[str] = set()
    out = []
    for i, g in enumerate(goals):
        where = f"goals[{i}]"
        if isinstance(g, str):
            g = {"id": g}
        if not isinstance(g, dict):
            raise _fail(where, "must be a mapping with 'id' and 'description'")
        extra = set(g) - set(GOAL_FIELDS)
        if extra:
            raise _fail(
                f"{where}.{sorted(extra)[0]}", f"is not a goal field; use {', '.join(GOAL_FIELDS)}"
            )
        description = g.get("description")
        description = "" if description is None else description  # `description:` alone
        if not isinstance(description, str):
            raise _fail(f"{where}.description", "must be text")
        gid = g.get("id")
        if not is_id(gid):
            raise _fail(f"{where}.id", "must be a short identifier such as 'rename'")
        if gid in seen:
            raise _fail(f"{where}.id", f"{gid!r} is used twice; goal ids must be unique")
        seen.add(gid)
        accept = g.get("accept", [])
        if not isinstance(accept, list):
            raise _fail(f"{where}.accept", "must be a list of checks")
        checks = [parse_check(c, f"{where}.accept[{j}]") for j, c in enumerate(accept)]
        out.append({"id": gid, "description": description, "accept": checks})
    return tuple(out)


def load_spec(path: str | Path) -> AgentSpec:
    """Read and validate a spec file."""
    p = Path(path)
    data = load_yaml(read_text(p, "spec", SpecError), f"spec {p}", SpecError)
    return parse_spec(data, p.parent)


def initial_scope(spec: AgentSpec) -> list[dict[str, Any]]:
    """The spec's scope; when it gives none, every tool it lists, unconstrained; and when
    it lists no tools either, every tool the runtime gives the agent (one grant, ``*``)."""
    if spec.scope is not None:
        return [dict(g) for g in spec.scope]
    if not spec.tools:
        return [{"tool": "*", "reason": "the spec names no tools and no scope"}]
    names = set()
    for entry in spec.tools:
        ref = entry["tool"] if isinstance(entry, dict) else str(entry)
        try:
            names |= set(load_tools([entry], [spec.base_dir]))
        except ToolError:
            # a tool only the embedding program provides (Runtime.run(tools=...)):
            # granted by the name the spec gives it
            names.add(ref.rpartition(":")[2])
    grants = [{"tool": name, "reason": "listed in the spec"} for name in sorted(names)]
    return grants + [
        {"tool": f"{server['name']}__*", "reason": "an MCP server the spec lists"}
        for server in spec.mcp
    ]
