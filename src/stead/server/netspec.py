"""What a spec from the network may carry: one allowlist, for every way one comes in.

A spec on the operator's disk is the operator's code: it may name Python to
import, files to read, folders to copy and programs to start. A spec sent to
the server (``POST /v1/agents`` with ``spec``), the spec inside an archive sent
to it (``POST /v1/agents/import``) and a model set over HTTP are data from a
token holder, and hold only what :data:`FIELDS` lists, with the values it
describes. Everything else is refused with a :class:`~stead.errors.SpecError`
(a 400) that names the field and says where such a spec goes instead.

A spec from the network names no host path at all: it has no folder of its
own (``base_dir`` is ``""``), so nothing it names is looked for beside it. And
its model's requests, with the tenant's key, go only to the provider's own
endpoint, or to one an ``admin`` named in the tenant's policy
(``@model_base_url("URL ...")``, see :mod:`stead.governance.policy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SpecError
from ..governance.policy import compile_policy
from ..models.options import DEFAULT_BASE_URLS, PROVIDERS
from ..store.base import Store
from ..tools.builtin import BUILTINS

FIELDS: dict[str, str] = {
    "name": "its name",
    "tenant": "the token's own tenant (or left out)",
    "instructions": "its instructions",
    "model": (
        "a provider's model (openai or anthropic: provider:NAME, or a mapping of its "
        "options), its base_url the provider's own or one the tenant's policy names"
    ),
    "tools": "stead's own tools by name (no secrets, no env)",
    "autonomy": "its autonomy",
    "goals": "goals whose checks are commands, files or sign-offs (no predicate)",
    "limits": "its limits",
    "scope": "its grants",
    "tool_autonomy": "autonomy per tool",
    "out_of_scope": "refuse or ask",
    "on_text": "what a text answer is: wait, finish or refuse",
    "monitors": "the built-in rules, and custom sequence and count rules (no python)",
}
"""Every field a spec from the network may carry, and what it may say."""

RECORD_ONLY: dict[str, Any] = {"model_options": None, "base_dir": "", "script": None,
                               "workspace": None, "mcp": []}  # fmt: skip
"""The fields of a stored spec (an archive's) that a spec from the network never sets,
with the one value they may have there (``model_options`` is checked as the model)."""

TO_SPEC_FOLDER = (
    "put a spec that needs it in the server's spec folder (stead serve --specs DIR) "
    "and make the agent with spec_file"
)
TO_HOST = (
    "an archive whose spec needs it is imported on the server's host by its operator "
    "(stead import FILE)"
)
_WHY = {
    "workspace": "names no host folder to seed a workspace from",
    "mcp": "starts no MCP servers",
    "base_dir": "has no folder of its own",
    "script": "reads no script",
    "model_options": "gives its model as model",
}
_MODEL = (
    "names a provider's model (openai:NAME, anthropic:NAME, or a mapping of its options); "
    "scripted and recorded models are read from files of the host"
)


def _refused(field: str, problem: str, advice: str) -> SpecError:
    return SpecError(f"spec field '{field}': a spec sent to the server {problem}; {advice}")


def endpoints(store: Store, tenant: str) -> frozenset[str]:
    """The model endpoints the tenant's policy lets its specs from the network name."""
    record = store.get_policy(tenant)
    return frozenset() if record is None else compile_policy(record.text).model_base_urls


def check_model(model: Any, allowed: frozenset[str], where: str = "model",
                advice: str = TO_SPEC_FOLDER) -> None:  # fmt: skip
    """A provider's model, sending its requests only where it may (see the module)."""
    if isinstance(model, str):
        provider = model.partition(":")[0]
    elif isinstance(model, Mapping):
        provider = str(model.get("provider"))
    else:
        raise _refused(where, _MODEL, advice)
    if provider not in PROVIDERS:
        raise _refused(where, _MODEL, advice)
    if not isinstance(model, Mapping):
        return
    url = model.get("base_url")
    if isinstance(url, str) and url.rstrip("/") not in {DEFAULT_BASE_URLS[provider], *allowed}:
        raise SpecError(
            f"spec field '{where}.base_url': {url!r} is not {provider}'s own endpoint, and the "
            "tenant's policy does not name it: a spec from the network sends its model's "
            "requests (and the key) only there. An admin names the endpoints the tenant's "
            'specs may use in its policy: @model_base_url("URL ...") on a policy (PUT /v1/policy)'
        )
    if model.get("summarizer") is not None:
        check_model(model["summarizer"], allowed, f"{where}.summarizer", advice)


def check_spec(data: Any, allowed: frozenset[str], advice: str = TO_SPEC_FOLDER) -> None:
    """Refuse a spec from the network that carries more than :data:`FIELDS` allows.

    Only what could reach the host is looked at here; every value is then checked
    as any spec's is (:func:`stead.spec.parse_spec`)."""
    if not isinstance(data, Mapping):
        return  # parse_spec says what a spec is
    for field in data:
        if field not in FIELDS:
            why = _WHY.get(str(field), "names nothing of the host")
            raise _refused(str(field), f"{why} (it may carry only {', '.join(FIELDS)})", advice)
    if "model" in data:
        check_model(data["model"], allowed, "model", advice)
    tools = data.get("tools")
    for i, ref in enumerate(tools if isinstance(tools, list) else []):
        name = ref.get("tool") if isinstance(ref, Mapping) else ref
        if isinstance(ref, Mapping) and ref.get("env"):
            raise _refused(f"tools[{i}].env", "gives a tool none of the host's variables", advice)
        if isinstance(ref, Mapping) and ref.get("secrets"):
            # an admin wrote them; a token that may not read them may not hand them to
            # commands that can send them wherever the agent's grants reach either
            raise _refused(f"tools[{i}].secrets", "gives a tool none of the tenant's secrets",
                           advice)  # fmt: skip
        if not isinstance(name, str) or name not in BUILTINS:
            raise _refused(
                f"tools[{i}]",
                f"names only stead's own tools ({', '.join(sorted(BUILTINS))}), not {name!r}",
                advice,
            )
    goals = data.get("goals")
    for i, goal in enumerate(goals if isinstance(goals, list) else []):
        checks = goal.get("accept") if isinstance(goal, Mapping) else None
        for j, check in enumerate(checks if isinstance(checks, list) else []):
            if isinstance(check, Mapping) and "predicate" in check:
                raise _refused(f"goals[{i}].accept[{j}].predicate",
                               "imports no Python to check a goal", advice)  # fmt: skip
    monitors = data.get("monitors")
    custom = monitors.get("custom") if isinstance(monitors, Mapping) else None
    for i, rule in enumerate(custom if isinstance(custom, list) else []):
        if isinstance(rule, Mapping) and "python" in rule:
            raise _refused(f"monitors.custom[{i}].python", "imports no Python rule", advice)


def check_record(spec: Mapping[str, Any], allowed: frozenset[str]) -> dict[str, Any]:
    """An archive's spec (as stored with its agent), held to :func:`check_spec`; the
    fields only a stored spec has must be as a spec from the network leaves them."""
    options = spec.get("model_options")
    named = (
        f"{options.get('provider')}:{options.get('name')}" if isinstance(options, Mapping) else None
    )
    if options is None or spec.get("model") != named:
        raise _refused("model", _MODEL, TO_HOST)
    check_model(options, allowed, "model", TO_HOST)
    # what could run: as for any spec from the network (its tenant is the importer's)
    check_spec({k: v for k, v in spec.items() if k in FIELDS and k not in ("model", "tenant")},
               allowed, TO_HOST)  # fmt: skip
    for field, value in RECORD_ONLY.items():
        if field != "model_options" and spec.get(field) not in (value, None):
            raise _refused(field, f"{_WHY[field]} (it has {spec[field]!r})", TO_HOST)
    unknown = sorted(set(spec) - set(FIELDS) - set(RECORD_ONLY))
    if unknown:
        raise _refused(unknown[0], "names nothing else", TO_HOST)
    return dict(spec)
