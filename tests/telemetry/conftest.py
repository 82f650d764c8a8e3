"""Telemetry recorded by the SDK's in-memory exporter and reader, and helpers to read it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stead import telemetry


class Recorded:
    """What stead recorded through :func:`stead.telemetry.configure`."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = list(self.exporter.get_finished_spans())
        return [s for s in found if name is None or (s.name or "").startswith(name)]

    def points(self, metric: str) -> list[Any]:
        """The data points of ``metric``, read now."""
        data = self.reader.get_metrics_data()
        found = []
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        found.extend(m.data.data_points)
        return found

    def total(self, metric: str, **where: Any) -> float:
        """A counter's value, or a histogram's sum, over the points matching ``where``."""
        total = 0.0
        for p in self.points(metric):
            if all(p.attributes.get(k) == v for k, v in where.items()):
                total += p.sum if hasattr(p, "sum") else p.value
        return total

    def every_attribute(self) -> list[tuple[str, Any]]:
        """Every attribute of every span, span event, span resource and metric point."""
        seen: list[tuple[str, Any]] = []

        def add(where: Mapping[str, Any] | None) -> None:
            seen.extend((where or {}).items())

        for s in self.spans():
            add(s.attributes)
            add(s.resource.attributes)
            for e in s.events:
                add(e.attributes)
            seen.append(("name", s.name))
            seen.append(("status", s.status.description))
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.data.data_points:
                        add(p.attributes)
        return seen


@pytest.fixture(autouse=True)
def _decided_afresh() -> Iterator[None]:
    """Each test decides from its own environment; nothing it set up outlives it."""
    telemetry.reset()
    yield
    telemetry.reset()


@pytest.fixture
def otel() -> Iterator[Recorded]:
    recorded = Recorded()
    telemetry.configure(recorded.tracer_provider, recorded.meter_provider)
    yield recorded
    recorded.tracer_provider.shutdown()
    recorded.meter_provider.shutdown()
