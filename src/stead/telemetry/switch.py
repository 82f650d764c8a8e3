"""Whether the operator asked for telemetry: the standard ``OTEL_*`` variables, read once.

OpenTelemetry's own default is to export to ``localhost:4318`` whenever an SDK
is set up; stead does not follow it. An agent runtime that starts sending
spans to a port nobody named would surprise an operator, and every activation
would pay for building them. So a signal is on only when a variable says so:
``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` naming ``otlp``, or an
OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, or the signal's own) with no
exporter variable saying otherwise (``none`` turns a signal off even with an
endpoint). ``OTEL_SDK_DISABLED=true`` turns everything off, as the
specification says.

Nothing here imports OpenTelemetry: deciding that telemetry is off must cost a
few dictionary look-ups and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Wanted:
    """The signals the environment asks stead to export."""

    traces: bool
    metrics: bool

    def __bool__(self) -> bool:
        return self.traces or self.metrics


def wanted(env: Mapping[str, str]) -> Wanted:
    """What ``env`` (usually ``os.environ``) asks for."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return Wanted(False, False)
    return Wanted(_asks(env, "TRACES"), _asks(env, "METRICS"))


def _asks(env: Mapping[str, str], signal: str) -> bool:
    chosen = env.get(f"OTEL_{signal}_EXPORTER", "").strip()
    if chosen:
        # a list such as "otlp,console": only the OTLP exporter is offered here
        return "otlp" in {part.strip().lower() for part in chosen.split(",")}
    endpoint = env.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(endpoint and endpoint.strip())
