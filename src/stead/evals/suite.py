"""An eval suite: tasks, the conditions each runs under, and how many times.

A suite is a YAML file (read as hostile: plain data only, within the spec
reader's limits). Each task names an agent spec, optionally a first message, a
model in place of the spec's, how the eval's person answers approvals, the
environment its workers get, and facts the run is expected to keep to. Each
condition names a boundary (:data:`KINDS`) and where in the run it falls. The
uninterrupted run, ``baseline``, is always run and always first: every other
condition is compared with it.

Everything is checked here, before any agent exists, and every error names the
field and what to write instead.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..canonical import dumps
from ..errors import SpecError
from ..ids import is_id
from ..spec import AgentSpec, parse_spec
from ..yamlsafe import load_yaml, read_text

KINDS = (
    "baseline",
    "kill",
    "hibernate",
    "move",
    "model_swap",
    "compact",
    "grant_lapse",
    "db_restart",
)
"""The boundaries a condition can inject, in the order reports show them."""

MID_STEP = ("kill", "db_restart")
"""Kinds injected while a step's call runs (after its intent is journaled); the
others fall between two steps."""

MAX_RUNS = 100
_FIELDS = ("name", "runs", "seed", "budget", "conditions", "tasks")
_TASK_FIELDS = (
    "id",
    "spec",
    "message",
    "model",
    "approve",
    "resolve",
    "env",
    "expect",
    "conditions",
)
_CONDITION_FIELDS = ("kind", "at", "label", "to", "tool")
_EXPECT_FIELDS = ("never_call", "unchanged", "max_spend_usd", "max_steps", "ignore")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
# what a suite may not set for its workers: it would change what code they run or
# hand them the eval's own key
_ENV_REFUSED = re.compile(r"^(LD_|PYTHON|STEAD_SECRET_KEY|PATH$|HOME$)")
_FILED = ("scripted:", "replay:")


def _fail(where: str, problem: str) -> SpecError:
    return SpecError(f"suite: {where} {problem}")


@dataclass(frozen=True)
class Condition:
    """One boundary and where it falls: decision ``at`` (a number, ``"random"``, or
    None for the middle of the baseline run)."""

    label: str
    kind: str
    at: int | str | None = None
    to: str | None = None
    """model_swap: the model field to swap to (None: the agent's own model again)."""
    tool: str | None = None
    """grant_lapse: the tool whose grants lapse (None: every grant)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kind": self.kind,
            "at": self.at,
            "to": self.to,
            "tool": self.tool,
        }


@dataclass(frozen=True)
class Expect:
    """Facts a task's run should keep to, reported as adherence."""

    never_call: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    max_spend_usd: float | None = None
    max_steps: int | None = None
    ignore: tuple[str, ...] = ()
    """Workspace paths (globs) left out of the outcome: what a tool writes differently
    on every run, such as ``__pycache__/*``."""

    def to_json(self) -> dict[str, Any]:
        return {
            "never_call": list(self.never_call),
            "unchanged": list(self.unchanged),
            "max_spend_usd": self.max_spend_usd,
            "max_steps": self.max_steps,
            "ignore": list(self.ignore),
        }


@dataclass(frozen=True)
class Task:
    """One agent to run: its checked spec and how the eval treats it."""

    id: str
    spec: AgentSpec
    spec_path: Path
    message: str | None = None
    approve: str | tuple[str, ...] = "all"
    """``all``, ``none``, or the tools whose calls are approved (the rest denied)."""
    env: dict[str, str] = field(default_factory=dict)
    expect: Expect = Expect()
    conditions: tuple[str, ...] | None = None
    """The labels of the suite's conditions this task runs under (None: all); the
    baseline always runs."""
    resolve: str = "none"
    """How the eval's person decides a call whose outcome is unknown (an effectful
    call without a reconcile hook, interrupted): ``none`` leaves the run stopped
    there, or ``done``, ``retry``, ``abort`` as ``stead resolve`` takes them."""

    def runs_under(self, condition: Condition) -> bool:
        return (
            condition.kind == "baseline"
            or self.conditions is None
            or (condition.label in self.conditions)
        )

    def approves(self, tool: str) -> bool:
        if self.approve == "all":
            return True
        if self.approve == "none":
            return False
        return tool in self.approve


@dataclass(frozen=True)
class Suite:
    name: str
    path: Path
    runs: int
    seed: int
    budget_usd: float | None
    budget_tokens: int | None
    conditions: tuple[Condition, ...]
    tasks: tuple[Task, ...]
    digest: str
    """What the suite says, specs and scripts included: a resumed eval refuses a
    suite that changed since it started."""

    def condition(self, label: str) -> Condition:
        for c in self.conditions:
            if c.label == label:
                return c
        raise _fail("conditions", f"have no condition labelled {label!r}")


def load_suite(
    path: str | Path,
    *,
    runs: int | None = None,
    model: str | None = None,
    only: tuple[str, ...] = (),
) -> Suite:
    """Read and check a suite file; ``runs``, ``model`` (every task's) and ``only``
    (condition labels to keep, baseline always kept) override what it says."""
    p = Path(path)
    data = load_yaml(read_text(p, "suite", SpecError), f"suite {p}", SpecError)
    return parse_suite(data, p, runs=runs, model=model, only=only)


def parse_suite(
    data: Any,
    path: Path,
    *,
    runs: int | None = None,
    model: str | None = None,
    only: tuple[str, ...] = (),
) -> Suite:
    if not isinstance(data, dict):
        raise _fail("file", f"must be a YAML mapping with fields {', '.join(_FIELDS)}")
    _known(data, _FIELDS, "")
    base = path.parent.resolve()
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        raise _fail("name", "must be a non-empty text")
    runs = runs if runs is not None else _int(data.get("runs", 3), "runs", 1, MAX_RUNS)
    if not 1 <= runs <= MAX_RUNS:
        raise _fail("runs", f"must be between 1 and {MAX_RUNS}; got {runs}")
    seed = _int(data.get("seed", 0), "seed", 0, 2**63 - 1)
    budget_usd, budget_tokens = _budget(data.get("budget"))
    conditions = _conditions(data.get("conditions"), base)
    if only:
        missing = sorted(set(only) - {c.label for c in conditions})
        if missing:
            raise _fail("conditions", f"have no condition labelled {missing[0]!r} (--only)")
        conditions = tuple(c for c in conditions if c.kind == "baseline" or c.label in only)
    tasks = _tasks(data.get("tasks"), base, model)
    labels = {c.label for c in _conditions(data.get("conditions"), base)}
    for t in tasks:
        unknown = sorted(set(t.conditions or ()) - labels)
        if unknown:
            raise _fail(
                f"tasks[{t.id}].conditions",
                f"name {unknown[0]!r}, which the suite's "
                f"conditions do not label; use one of {', '.join(sorted(labels))}",
            )
    digest = hashlib.sha256(
        dumps(
            {
                "suite": data,
                "runs": runs,
                "conditions": [c.to_json() for c in conditions],
                "tasks": [{"id": t.id, "spec": t.spec.to_record()} for t in tasks],
            }
        ).encode()
    ).hexdigest()
    return Suite(
        name.strip(), path, runs, seed, budget_usd, budget_tokens, conditions, tasks, digest
    )


def _known(data: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in set(data) - set(allowed))
    if unknown:
        raise _fail(
            f"{where}{unknown[0]}", f"is not a field here; allowed fields are {', '.join(allowed)}"
        )


def _int(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _fail(where, f"must be a whole number from {low} to {high}; got {value!r}")
    return value


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise _fail(where, f"must be a number of at least 0; got {value!r}")
    return float(value)


def _budget(value: Any) -> tuple[float | None, int | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise _fail("budget", "must be a mapping like {usd: 2.0, tokens: 200000}")
    _known(value, ("usd", "tokens"), "budget.")
    usd = None if value.get("usd") is None else _number(value["usd"], "budget.usd")
    tokens = (
        None if value.get("tokens") is None else _int(value["tokens"], "budget.tokens", 1, 2**53)
    )
    return usd, tokens


def _model_field(value: Any, where: str, base: Path) -> str:
    """A model field given in the suite; a script or recording is found from the suite."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, "must be a model field, e.g. 'openai:gpt-4o-mini' or 'scripted:PATH'")
    for prefix in _FILED:
        if value.startswith(prefix):
            return prefix + str((base / value[len(prefix) :]).resolve())
    return value


def _conditions(value: Any, base: Path) -> tuple[Condition, ...]:
    items = list(KINDS) if value is None else value
    if not isinstance(items, list) or not items:
        raise _fail("conditions", f"must be a non-empty list of kinds ({', '.join(KINDS)})")
    out = [Condition("baseline", "baseline")]
    for i, item in enumerate(items):
        where = f"conditions[{i}]"
        if isinstance(item, str):
            item = {"kind": item}
        if not isinstance(item, dict):
            raise _fail(where, "must be a kind or a mapping like {kind: kill, at: 3}")
        _known(item, _CONDITION_FIELDS, f"{where}.")
        kind = item.get("kind")
        if kind not in KINDS:
            raise _fail(f"{where}.kind", f"must be one of {', '.join(KINDS)}; got {kind!r}")
        if kind == "baseline":
            if set(item) - {"kind"}:
                raise _fail(where, "baseline runs uninterrupted: it takes no other field")
            continue
        at = item.get("at")
        if at is not None and at != "random":
            at = _int(at, f"{where}.at", 1, 1_000_000)
        label = item.get("label", kind)
        if not isinstance(label, str) or not is_id(label):
            raise _fail(f"{where}.label", "must use letters, digits, '_', '-', '.'")
        if any(c.label == label for c in out):
            raise _fail(f"{where}.label", f"{label!r} is used twice; give each condition a label")
        to = item.get("to")
        if to is not None:
            if kind != "model_swap":
                raise _fail(f"{where}.to", "is for model_swap only")
            to = _model_field(to, f"{where}.to", base)
        tool = item.get("tool")
        if tool is not None and (kind != "grant_lapse" or not isinstance(tool, str)):
            raise _fail(f"{where}.tool", "is a tool name, for grant_lapse only")
        out.append(Condition(label, kind, at, to, tool))
    return tuple(out)


def _tasks(value: Any, base: Path, model: str | None) -> tuple[Task, ...]:
    if not isinstance(value, list) or not value:
        raise _fail("tasks", "must be a non-empty list of tasks, each with an id and a spec")
    out: list[Task] = []
    for i, item in enumerate(value):
        where = f"tasks[{i}]"
        if not isinstance(item, dict):
            raise _fail(where, "must be a mapping with an id and a spec")
        _known(item, _TASK_FIELDS, f"{where}.")
        tid = item.get("id")
        if not isinstance(tid, str) or not is_id(tid):
            raise _fail(f"{where}.id", "must use letters, digits, '_', '-', '.'")
        if any(t.id == tid for t in out):
            raise _fail(f"{where}.id", f"{tid!r} is used twice")
        out.append(_task(item, tid, f"tasks[{tid}]", base, model))
    return tuple(out)


def _task(item: dict[str, Any], tid: str, where: str, base: Path, model: str | None) -> Task:
    if not isinstance(item.get("spec"), str):
        raise _fail(f"{where}.spec", "must be the path of an agent spec, relative to the suite")
    spec_path = (base / item["spec"]).resolve()
    data = load_yaml(read_text(spec_path, "spec", SpecError), f"spec {spec_path}", SpecError)
    if not isinstance(data, dict):
        raise _fail(f"{where}.spec", f"{spec_path} is not a spec (a YAML mapping)")
    chosen = model if model is not None else item.get("model")
    if chosen is not None:
        data = {**data, "model": _model_field(chosen, f"{where}.model", base)}
    try:
        spec = parse_spec(data, spec_path.parent)
    except SpecError as exc:
        raise _fail(f"{where}.spec", f"({spec_path}): {exc}") from None
    message = item.get("message")
    if message is not None and (not isinstance(message, str) or not message.strip()):
        raise _fail(f"{where}.message", "must be a non-empty text")
    approve = item.get("approve", "all")
    if isinstance(approve, list) and all(isinstance(t, str) for t in approve):
        approve = tuple(approve)
    elif approve not in ("all", "none"):
        raise _fail(f"{where}.approve", "must be all, none, or a list of tool names")
    env = item.get("env") or {}
    if not isinstance(env, dict):
        raise _fail(f"{where}.env", "must be a mapping of NAME: text")
    for name, text in env.items():
        if not isinstance(name, str) or not _ENV_NAME.match(name) or _ENV_REFUSED.match(name):
            raise _fail(
                f"{where}.env.{name}",
                "is not a name a suite may set (upper-case letters, digits, '_'; not LD_*, "
                "PYTHON*, PATH, HOME or the vault key)",
            )
        if not isinstance(text, str) or "\x00" in text:
            raise _fail(f"{where}.env.{name}", "must be a text without NUL")
    chosen = item.get("conditions")
    if chosen is not None and (
        not isinstance(chosen, list) or not all(isinstance(c, str) for c in chosen)
    ):
        raise _fail(f"{where}.conditions", "must be a list of the suite's condition labels")
    expect = _expect(item.get("expect"), where)
    labels = None if chosen is None else tuple(chosen)
    resolve = item.get("resolve", "none")
    if resolve not in ("none", "done", "retry", "abort"):
        raise _fail(f"{where}.resolve", "must be none, done, retry or abort")
    return Task(tid, spec, spec_path, message, approve, dict(env), expect, labels, resolve)


def _expect(value: Any, where: str) -> Expect:
    if value is None:
        return Expect()
    if not isinstance(value, dict):
        raise _fail(f"{where}.expect", f"must be a mapping with {', '.join(_EXPECT_FIELDS)}")
    _known(value, _EXPECT_FIELDS, f"{where}.expect.")

    def names(key: str) -> tuple[str, ...]:
        got = value.get(key) or []
        if not isinstance(got, list) or not all(isinstance(n, str) and n for n in got):
            raise _fail(f"{where}.expect.{key}", "must be a list of names")
        return tuple(got)

    spend = value.get("max_spend_usd")
    steps = value.get("max_steps")
    return Expect(
        never_call=names("never_call"),
        unchanged=names("unchanged"),
        max_spend_usd=None if spend is None else _number(spend, f"{where}.expect.max_spend_usd"),
        max_steps=None if steps is None else _int(steps, f"{where}.expect.max_steps", 1, 10**9),
        ignore=names("ignore"),
    )
