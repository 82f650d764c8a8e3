"""The metrics stead records, made once per process from a meter.

- ``stead.steps``: steps completed (a counter), by agent name and tenant;
- ``stead.tool.duration``: each tool call from the gate to its journaled
  result, in seconds, by tool, effect class and outcome;
- ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``: the
  GenAI conventions' histograms of tokens (``gen_ai.token.type`` input or
  output) and of the time the agent waited for each answer;
- ``stead.model.spend``: dollars spent on models (a counter), as the journal
  prices it (:mod:`stead.models.prices`);
- ``stead.approvals.pending``: approvals asked and not yet answered (an
  up-down counter: +1 when a call waits for a person, -1 when a person grants
  or denies it, in whichever process journals each, so the sum over processes
  is what is pending);
- ``stead.approval.wait``: how long each answered approval waited, in seconds.

Attributes are low in cardinality on purpose (names and classes, never ids):
each distinct set is a series a backend keeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter

# the GenAI conventions' advice for their two histograms
TOKEN_BUCKETS = [4.0**k for k in range(14)]
SECOND_BUCKETS = [0.01 * 2**k for k in range(14)]


class Instruments:
    """The instruments of :mod:`stead.telemetry`'s metrics, on one meter."""

    def __init__(self, meter: Meter) -> None:
        self.steps: Counter = meter.create_counter(
            "stead.steps", unit="{step}", description="Steps an agent completed"
        )
        self.tool_duration: Histogram = meter.create_histogram(
            "stead.tool.duration",
            unit="s",
            description="A tool call from the gate to its journaled result",
            explicit_bucket_boundaries_advisory=SECOND_BUCKETS,
        )
        self.tokens: Histogram = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens a model answer used",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.model_duration: Histogram = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="How long the agent waited for a model's answer",
            explicit_bucket_boundaries_advisory=SECOND_BUCKETS,
        )
        self.spend: Counter = meter.create_counter(
            "stead.model.spend", unit="USD", description="What model answers cost"
        )
        self.approvals_pending: UpDownCounter = meter.create_up_down_counter(
            "stead.approvals.pending",
            unit="{approval}",
            description="Calls waiting for a person's approval",
        )
        self.approval_wait: Histogram = meter.create_histogram(
            "stead.approval.wait",
            unit="s",
            description="How long an approval waited for a person's answer",
        )
