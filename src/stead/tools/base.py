"""Tools: Python functions with a declared effect class.

The effect class decides what happens to a call whose intent was committed but
whose result never was (the worker died in between):

``read_only``
    No effect outside the call. No intent is journaled; it simply runs again.
``idempotent``
    Running it twice with the same ``ctx.idempotency_key`` has the effect of
    running it once. It runs again with the same key.
``effectful``
    Anything else. If it has a ``reconcile`` hook, the hook is asked whether the
    call happened (``"done"``, ``"not_done"`` or ``"unknown"``); otherwise, or on
    ``"unknown"``, the call is marked *outcome unknown* and the agent stops in
    ``needs_attention`` until a person decides (``stead resolve``).

A tool may accept a keyword parameter ``ctx`` (a :class:`ToolContext`). Its JSON
schema is derived from the other parameters' annotations.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from ..canonical import dumps
from ..errors import ToolError
from ..sandbox.base import WORKSPACE_INSIDE, Limits, RunResult, Sandbox
from ..sandbox.select import select
from ..sandbox.session import SandboxSession


class Effect(enum.StrEnum):
    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    EFFECTFUL = "effectful"


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call it serves."""

    agent_id: str
    tenant: str
    call_id: str
    idempotency_key: str
    workspace: Path
    # the sandbox command tools run in; None: the machine's (see stead.sandbox)
    sandbox: Sandbox | None = None
    # the vault secrets this tool declared, for this call only
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    # the worker's environment variables this tool declared (and only those)
    env: Mapping[str, str] = field(default_factory=dict)
    # whether the agent holds a live network grant now (see stead.governance.grants)
    network: bool = False
    # the operator's limits: no command runs looser, whatever a tool or model asks
    ceiling: Limits | None = None
    # how large the workspace may grow (bytes; the ceiling's file_bytes too); None: no quota
    quota_bytes: int | None = None
    # the lease's epoch: rises at every takeover, so a service that remembers the
    # highest it has seen can refuse a call from a worker that lost the agent
    fencing_token: int | None = None
    lease_check: Callable[[], None] | None = field(default=None, repr=False)
    # stores bytes as a blob, returning its digest (binary parts of a result)
    put_blob: Callable[[bytes], str] | None = field(default=None, repr=False)
    # journals an event for the agent now (an MCP server's changed tool list); only
    # the kinds of NOTABLE (see noted)
    note: Callable[..., Any] | None = field(default=None, repr=False)
    # the agent's long-term memories (stead.memories.access.Access): given to the
    # memory tools' calls only
    memories: Any = field(default=None, repr=False)

    def check_lease(self) -> None:
        """Raise :class:`~stead.errors.StaleEpoch` if this worker lost the agent's lease.

        Call it just before an effect that must not happen twice (a file
        written, a request sent): a worker paused past its lease learns here
        that another has taken over. Outside an activation it does nothing.
        """
        if self.lease_check is not None:
            self.lease_check()

    def run(
        self, argv: Sequence[str], *, timeout: float = 120.0, limits: Limits | None = None
    ) -> RunResult:
        """Run a command for this call, in the sandbox, in the workspace.

        Every process a tool starts should start here: the command sees the
        workspace at ``/workspace``, this call's declared variables and
        secrets, and nothing else of the worker; it is killed with its children
        at ``timeout``, or at the operator's ``ceiling`` if that is sooner. Without
        a sandbox (and no opt-in) it raises :class:`~stead.errors.SandboxUnavailable`.
        """
        sandbox = self.sandbox or select()
        home = WORKSPACE_INSIDE if sandbox.isolation().isolated else str(self.workspace)
        env = {**self.env, **self.secrets}
        env.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"})
        # a command given secrets gets a sandbox of its own, so nothing left by
        # or lingering after another command can read them
        run = (
            sandbox.run_alone
            if self.secrets and isinstance(sandbox, SandboxSession)
            else sandbox.run
        )
        return run(
            list(argv),
            self.workspace,
            env=env,
            limits=self.capped(limits or Limits(wall_seconds=timeout)),
            network=self.network,
        )

    def capped(self, limits: Limits) -> Limits:
        """``limits`` held to the operator's ceiling (which holds files to the quota)."""
        return limits if self.ceiling is None else limits.capped_by(self.ceiling)


@dataclass(frozen=True, slots=True)
class Reconciled:
    """A reconcile hook's richer answer: the verdict and, if done, the result."""

    verdict: str
    result: Any = None


ReconcileHook = Callable[..., "str | Reconciled"]
CompensateHook = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool: the function, its name, schema and effect class."""

    name: str
    func: Callable[..., Any]
    effect: Effect
    schema: Mapping[str, Any]
    description: str
    wants_ctx: bool
    reconcile: ReconcileHook | None = None
    compensate: CompensateHook | None = None
    secrets: tuple[str, ...] = ()
    # the URL its secrets are sent to (an MCP server's): each must be bound to its host
    secrets_to: str | None = None
    env: tuple[str, ...] = ()
    # a schema given with the declaration, checked in full (jsonschema) at each call
    explicit_schema: bool = False
    # its results are third-party text (mail, pages, chat): the data-flow rule's untrusted;
    # or only the fields named (the rest is system data)
    untrusted: bool | tuple[str, ...] = False
    # its results are system data (the data-flow rule's default treats results as untrusted)
    trusted: bool = False

    def call(self, args: Mapping[str, Any], ctx: ToolContext) -> Any:
        if self.explicit_schema:  # the whole schema, as declared (an MCP tool's, say)
            check_schema_args(self, args)
        else:
            check_args(self, args)
        if self.wants_ctx:
            return self.func(**args, ctx=ctx)
        return self.func(**args)

    def ask_reconcile(self, args: Mapping[str, Any], ctx: ToolContext) -> Reconciled:
        """Ask the reconcile hook; a plain string answer is wrapped."""
        if self.reconcile is None:
            return Reconciled("unknown")
        answer = self.reconcile(dict(args), ctx)
        if isinstance(answer, Reconciled):
            verdict, result = answer.verdict, answer.result
        else:
            verdict, result = str(answer), None
        if verdict not in ("done", "not_done", "unknown"):
            raise ToolError(
                f"reconcile hook of tool {self.name} answered {verdict!r}; it must "
                "answer 'done', 'not_done' or 'unknown'"
            )
        return Reconciled(verdict, result)


_ATTR = "__stead_tool__"


F = TypeVar("F", bound=Callable[..., Any])


@overload
def tool(func: F, /) -> F: ...


@overload
def tool(
    *,
    effect: str | Effect = ...,
    name: str | None = ...,
    reconcile: ReconcileHook | None = ...,
    compensate: CompensateHook | None = ...,
    secrets: Sequence[str] = ...,
    env: Sequence[str] = ...,
    schema: Mapping[str, Any] | None = ...,
    untrusted: bool | Sequence[str] = ...,
    trusted: bool = ...,
) -> Callable[[F], F]: ...


def tool(
    func: F | None = None,
    /,
    *,
    effect: str | Effect = Effect.EFFECTFUL,
    name: str | None = None,
    reconcile: ReconcileHook | None = None,
    compensate: CompensateHook | None = None,
    secrets: Sequence[str] = (),
    env: Sequence[str] = (),
    schema: Mapping[str, Any] | None = None,
    untrusted: bool | Sequence[str] = False,
    trusted: bool = False,
) -> F | Callable[[F], F]:
    """Declare a function as a stead tool.

    ``@stead.tool(effect="idempotent")`` or bare ``@stead.tool`` (effectful, the
    safe default). ``secrets`` names the vault secrets the tool needs; only
    those reach it, in ``ctx.secrets``. ``env`` names variables of the
    worker's environment the tool may see, in ``ctx.env`` (commands it runs
    get them too). ``schema`` is the JSON schema of the arguments (an object
    schema), for a tool whose signature cannot say it all (enums, patterns,
    nested objects); without it the schema is read from the signature. The
    function is returned unchanged, with its declaration attached, so it stays
    callable and testable as ordinary Python. ``untrusted`` says its results
    are third-party text (an e-mail, a web page, a chat channel): the data-flow
    rule treats them as untrusted whatever the spec lists; a list of field names
    (``untrusted=["subject", "body"]``) says only the values under those keys
    are, and the rest is system data. ``trusted`` says its results are all
    system data (the company's directory, a price list), which the data-flow
    rule's default would otherwise treat as untrusted.
    """

    def wrap(f: F) -> F:
        setattr(
            f,
            _ATTR,
            make_tool(
                f,
                effect=effect,
                name=name,
                reconcile=reconcile,
                compensate=compensate,
                secrets=secrets,
                env=env,
                schema=schema,
                untrusted=untrusted,
                trusted=trusted,
            ),
        )
        return f

    return wrap(func) if func is not None else wrap


def make_tool(
    func: Callable[..., Any],
    *,
    effect: str | Effect = Effect.EFFECTFUL,
    name: str | None = None,
    reconcile: ReconcileHook | None = None,
    compensate: CompensateHook | None = None,
    secrets: Sequence[str] = (),
    env: Sequence[str] = (),
    schema: Mapping[str, Any] | None = None,
    untrusted: bool | Sequence[str] = False,
    trusted: bool = False,
) -> Tool:
    try:
        eff = Effect(effect)
    except ValueError:
        raise ToolError(
            f"tool {func.__name__}: effect {effect!r} is not one of "
            f"{', '.join(e.value for e in Effect)}"
        ) from None
    params = inspect.signature(func).parameters
    tool_name = name or func.__name__
    if not isinstance(untrusted, bool) and (
        isinstance(untrusted, str) or not all(isinstance(f, str) and f for f in untrusted)
    ):
        raise ToolError(
            f"tool {tool_name}: untrusted must be true, false or a list of field names, "
            f"not {untrusted!r}"
        )
    if trusted and untrusted:
        raise ToolError(f"tool {tool_name}: its results cannot be both trusted and untrusted")
    return Tool(
        name=name or func.__name__,
        func=func,
        effect=eff,
        schema=schema_for(func) if schema is None else _explicit(name or func.__name__, schema),
        description=inspect.getdoc(func) or "",
        wants_ctx="ctx" in params,
        reconcile=reconcile,
        compensate=compensate,
        secrets=tuple(secrets),
        env=tuple(env),
        explicit_schema=schema is not None,
        untrusted=untrusted if isinstance(untrusted, bool) else tuple(untrusted),
        trusted=trusted,
    )


def _explicit(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """A declared argument schema, checked now: an object schema that jsonschema accepts."""
    if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
        raise ToolError(f"tool {name}: its schema must be a JSON object schema")
    try:
        Draft202012Validator.check_schema(dict(schema))
    except SchemaError as exc:
        raise ToolError(
            f"tool {name}: its schema is not a valid JSON schema: {exc.message}"
        ) from None
    return {
        **schema,
        "type": "object",
        "properties": dict(schema.get("properties") or {}),
        "required": list(schema.get("required") or []),
    }


def check_schema_args(t: Tool, args: Mapping[str, Any]) -> None:
    """Refuse arguments the tool's declared schema does not admit, saying where."""
    error = next(iter(Draft202012Validator(dict(t.schema)).iter_errors(dict(args))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "its arguments"
        raise ToolError(f"tool {t.name}: {where}: {error.message}")


def declared_tool(obj: Any) -> Tool | None:
    """The :class:`Tool` ``obj`` is or was declared as with :func:`tool`; else None."""
    if isinstance(obj, Tool):
        return obj
    declared = getattr(obj, _ATTR, None)
    return declared if isinstance(declared, Tool) else None


def as_tool(obj: Any) -> Tool:
    """The :class:`Tool` declared on ``obj`` (or an effectful one if undeclared)."""
    declared = declared_tool(obj)
    if declared is not None:
        return declared
    if callable(obj):
        return make_tool(obj)
    raise ToolError(f"{obj!r} is not a function and cannot be a tool")


_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


def _json_type(annotation: Any) -> dict[str, Any]:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        args = typing.get_args(annotation)
        options = [a for a in args if a is not type(None)]
        inner = _json_type(options[0]) if len(options) == 1 else {}
        if inner and len(options) < len(args):
            return {"type": [inner["type"], "null"]}  # X | None admits null
        return inner
    base = origin or annotation
    if base in _JSON_TYPES:
        return {"type": _JSON_TYPES[base]}
    return {}


def schema_for(func: Callable[..., Any]) -> dict[str, Any]:
    """A JSON schema for a function's parameters (``ctx`` excluded)."""
    hints = typing.get_type_hints(func)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for pname, param in inspect.signature(func).parameters.items():
        if pname == "ctx" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        properties[pname] = _json_type(hints.get(pname, param.annotation))
        if param.default is inspect.Parameter.empty:
            required.append(pname)
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def check_args(t: Tool, args: Mapping[str, Any]) -> None:
    """Refuse arguments the schema does not admit, naming the argument."""
    props = t.schema["properties"]
    for key in args:
        if key not in props:
            raise ToolError(
                f"tool {t.name} has no argument {key!r}; it takes "
                f"{', '.join(props) or 'no arguments'}"
            )
    for key in t.schema["required"]:
        if key not in args:
            raise ToolError(f"tool {t.name} needs argument {key!r}")
    for key, value in args.items():
        declared = props[key].get("type")
        if declared is None:
            continue
        allowed = declared if isinstance(declared, list) else [declared]
        if value is None and "null" in allowed:
            continue
        expected = next(t for t in allowed if t != "null")
        ok = isinstance(value, _PY_TYPES[expected])
        if expected in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            raise ToolError(
                f"tool {t.name}: argument {key!r} must be {expected}, got {type(value).__name__}"
            )


MAX_RESULT_CHARS = 64 * 1024
"""The most of a tool's result, as JSON text, that is journaled."""


def jsonable(value: Any) -> Any:
    """A tool's return value as JSON, cut to a bounded size."""
    try:
        text = dumps(value)
    except (TypeError, ValueError):
        value, text = repr(value), dumps(repr(value))
    if len(text) > MAX_RESULT_CHARS:
        return {"truncated": True, "text": text[:MAX_RESULT_CHARS]}
    return value


def describe_failure(exc: BaseException) -> str:
    """A tool's failure as the model is shown it: a tool's own words stand alone."""
    if isinstance(exc, ToolError | FileNotFoundError | PermissionError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


NOTABLE = ("mcp_tools_listed",)
"""The only kinds of event a tool may journal through ``ToolContext.note``."""


def noted(emit: Callable[..., Any], kind: str, **data: Any) -> Any:
    """``emit(kind, **data)`` if a tool may journal ``kind``: a tool is told what
    happened, it does not write the agent's history (a grant, an upgrade of its
    spec, a person's answer) through its context."""
    if kind not in NOTABLE:
        raise ToolError(
            f"a tool may journal only {', '.join(NOTABLE)} through its context, not {kind!r}: "
            "what an agent may do and what its spec is are a person's to change"
        )
    return emit(kind, **data)
