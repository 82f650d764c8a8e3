"""The SDK, set up from the environment: OTLP over HTTP/protobuf, batched.

Imported only when :mod:`.switch` found a variable asking for telemetry, so a
process that never asks never imports the SDK or the exporter. Everything else
the operator may want to say is said in the standard variables the SDK and
the exporter read themselves: the endpoint (``/v1/traces`` and ``/v1/metrics``
are added to ``OTEL_EXPORTER_OTLP_ENDPOINT``), headers, timeouts,
compression, the batch sizes (``OTEL_BSP_*``), the metrics interval
(``OTEL_METRIC_EXPORT_INTERVAL``) and the resource (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``; the service is ``stead`` unless they name one).

The providers are installed as the process's global ones when nothing is
installed yet, so other instrumented libraries in the process join the same
traces; a provider the program already installed is left in place. Both flush
what they hold when the process exits (the SDK's own exit hook), which is what
lets a short ``stead run`` export its spans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from .live import Live
from .switch import Wanted

log = logging.getLogger(__name__)


def from_environment(env: Mapping[str, str], want: Wanted) -> Live:
    """Providers exporting what ``want`` names, over OTLP/HTTP."""
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    resource = Resource.create({} if named else {"service.name": "stead"})
    return Live(
        _tracer_provider(resource) if want.traces else None,
        _meter_provider(resource) if want.metrics else None,
    )


def _tracer_provider(resource: Resource) -> TracerProvider:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    else:
        log.info("a tracer provider is installed already; stead exports through its own")
    return provider


def _meter_provider(resource: Resource) -> MeterProvider:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    provider = MeterProvider(
        resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())]
    )
    # the API has no public name for "none installed yet"; its placeholder is a proxy
    if type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
        metrics.set_meter_provider(provider)
    return provider
