"""Telemetry switched on: a tracer and the instruments, shared by every activation.

Made from the providers the environment set up (:mod:`.setup`) or from ones a
program or a test hands :func:`stead.telemetry.configure`. A signal the
environment left off gets the API's no-op provider, so the code that records
it does not ask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.trace import NoOpTracerProvider

from .base import Trace
from .instruments import Instruments
from .spans import ActivationTrace

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

SCOPE = "stead"
"""The instrumentation scope every span and metric is recorded under."""


class Live:
    """Telemetry on: each activation gets an :class:`~.spans.ActivationTrace`."""

    enabled = True

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        self.tracer_provider = tracer_provider or NoOpTracerProvider()
        self.meter_provider = meter_provider or NoOpMeterProvider()
        self.tracer = self.tracer_provider.get_tracer(SCOPE)
        self.instruments = Instruments(self.meter_provider.get_meter(SCOPE))

    def trace(self, agent_id: str, agent_name: str, tenant: str) -> Trace:
        return ActivationTrace(self.tracer, self.instruments, agent_id, agent_name, tenant)
