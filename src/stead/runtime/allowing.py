"""The ``allow_flow`` action at run time: a flow the user's task asks for, declared
before any untrusted text is in the model's view (see
:mod:`stead.integrity.allowances`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InvalidAnswer
from ..ids import new_id
from ..integrity.allowances import parse
from ..journal import Kind

if TYPE_CHECKING:
    from .activation import Activation


def allow_flow(act: Activation, index: int, action: Mapping[str, Any]) -> None:
    """Journal the allowance, or why it is refused (the model reads either)."""
    asked = {k: action[k] for k in ("from", "to", "args", "uses", "reason") if k in action}
    rule = act.watch.monitors.dataflow() if act.watch is not None else None
    try:
        if rule is None:
            raise InvalidAnswer("allow_flow: no data-flow rule watches this agent; nothing asks")
        allowance = parse(action, act.tools)
        seen = rule.influenced()
        if seen:
            raise InvalidAnswer(
                f"allow_flow: untrusted text (event {', '.join(map(str, seen))}) is in your "
                "view, so the flow may be its wish, not the person's; declare the flows the "
                "person's task names before reading untrusted text, or let a person approve "
                "each call"
            )
    except InvalidAnswer as exc:
        act.emit(Kind.FLOW_ALLOWED, action=index, asked=asked, ok=False, error=str(exc))
        return
    allowance = {"id": new_id("flow", act.clock, act.rng), **allowance, "used": 0}
    act.emit(Kind.FLOW_ALLOWED, action=index, asked=asked, ok=True, allowance=allowance)
