"""Every attribute key stead puts on a span or a metric, and where its value comes from.

The GenAI semantic conventions (``gen_ai.*``) name what they cover: the agent,
the model call and the tool call. The rest is stead's own (``stead.*``).

Every value is a name, a class, a count, an id or an outcome, taken from a
field the runtime itself writes: the agent's and the tool's names, the
effect class, the gate's decision word, ids, token counts, the spend, HTTP
status codes. Never a tool's arguments or result, a model's prompt or answer,
an error's text or a reason a person or a policy wrote: those can hold a
secret or personal data, and the journal, not a trace, is where they are
kept (redacted). Both :mod:`.spans` and :mod:`.instruments` use only these
keys, which is what the tests check an exported span against.
"""

from __future__ import annotations

from typing import Any

# the GenAI conventions (both spellings of the provider: gen_ai.system before 1.37)
OPERATION = "gen_ai.operation.name"
SYSTEM = "gen_ai.system"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHED_TOKENS = "gen_ai.usage.cache_read.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
AGENT_ID = "gen_ai.agent.id"
AGENT_NAME = "gen_ai.agent.name"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
ERROR_TYPE = "error.type"

# stead's own
TENANT = "stead.tenant"
STATUS = "stead.agent.status"
WAITING_FOR = "stead.agent.waiting_for"
DECISIONS = "stead.activation.decisions"
STEPS = "stead.activation.steps"
INTERRUPTED = "stead.activation.interrupted"
STEP = "stead.step.number"
STEP_RESUMED = "stead.step.resumed"
STEP_OUTCOME = "stead.step.outcome"
STEP_ACTIONS = "stead.step.actions"
STEP_TOOL_CALLS = "stead.step.tool_calls"
MODEL_ANSWER = "stead.model.answer"
MODEL_ATTEMPTS = "stead.model.attempts"
MODEL_SPEND = "stead.model.spend"
MODEL_TOKENS = "stead.model.tokens"
ATTEMPT_STATUS = "http.response.status_code"
ATTEMPT_LATENCY = "stead.model.attempt.latency_ms"
EFFECT = "stead.tool.effect"
VERDICT = "stead.tool.verdict"
OUTCOME = "stead.tool.outcome"
RERUN = "stead.tool.rerun"
APPROVAL_ID = "stead.approval.id"
APPROVAL_ANSWER = "stead.approval.answer"
POLICY_VERSION = "stead.policy.version"


def model_names(model: Any) -> tuple[str, str]:
    """The provider and the model's own name: from a provider model's options, else
    from its ``provider:name`` (a scripted model is ``scripted:FILE``)."""
    options = getattr(model, "options", None)
    provider, name = getattr(options, "provider", None), getattr(options, "name", None)
    if isinstance(provider, str) and isinstance(name, str):
        return provider, name
    ref = str(getattr(model, "name", "") or "unknown")
    kind, _, rest = ref.partition(":")
    return kind, rest or kind
