"""OpenTelemetry for stead: spans and metrics of agents' activations, off unless asked.

When the standard ``OTEL_*`` variables ask for it (:mod:`.switch`), each
activation is traced (the activation, its steps, each model call with the
GenAI conventions' attributes, each tool call, approvals answered) and its
steps, tool latency, tokens, spend and pending approvals are counted
(:mod:`.instruments`), exported over OTLP/HTTP (:mod:`.setup`). Otherwise
:func:`current` is :data:`~.off.OFF`, every hook is a no-op and no
OpenTelemetry module is imported.

The decision is taken once per process, at the first activation, from the
environment; a program that embeds stead and sets up OpenTelemetry its own
way hands its providers to :func:`configure` instead (tests do the same with
the SDK's in-memory exporters). Telemetry never stops an agent: an SDK that
cannot be set up is logged and left off.

This package is given plain values (names, ids, classes, counts, journaled
events) and imports nothing of the runtime, the store or the sandbox.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from ..errors import MissingExtra
from ..extras import need
from .base import Telemetry, Trace
from .off import NO_TRACE, OFF
from .switch import Wanted, wanted

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

__all__ = ["NO_TRACE", "OFF", "Telemetry", "Trace", "Wanted", "configure", "current", "reset"]

log = logging.getLogger(__name__)
_lock = threading.Lock()
_current: Telemetry | None = None


def current() -> Telemetry:
    """This process's telemetry: decided from the environment the first time."""
    found = _current
    return found if found is not None else _decide()


def _decide() -> Telemetry:
    global _current
    with _lock:
        if _current is None:
            want = wanted(os.environ)
            _current = OFF
            if want:
                try:
                    need("opentelemetry.sdk", "otel", "OpenTelemetry (the OTEL_* variables)")
                    from .setup import from_environment

                    _current = from_environment(os.environ, want)
                except MissingExtra as exc:  # said once, in one line
                    log.warning("%s; running without it", exc)
                except Exception:  # telemetry must never be why an agent cannot run
                    log.exception("OpenTelemetry could not be set up; running without it")
        return _current


def configure(
    tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None
) -> Telemetry:
    """Trace and measure through these providers from now on (the environment is not
    read); a signal given no provider is not recorded."""
    from .live import Live

    global _current
    with _lock:
        _current = Live(tracer_provider, meter_provider)
        return _current


def reset() -> None:
    """Forget the decision: the next activation reads the environment again."""
    global _current
    with _lock:
        _current = None
