"""A real ``stead run`` exports its spans and metrics over OTLP/HTTP to a local receiver.

The receiver is a small HTTP server on 127.0.0.1 that takes what the exporter
posts to ``/v1/traces`` and ``/v1/metrics`` and decodes it with the
protobuf messages of ``opentelemetry-proto``, as a collector would.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


class Receiver:
    """What an OTLP/HTTP collector received, decoded."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()
        self.lock = threading.Lock()

    def spans(self) -> list[Any]:
        with self.lock:
            return [
                span
                for request in self.traces
                for rs in request.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def resources(self) -> list[dict[str, Any]]:
        with self.lock:
            return [
                attributes(rs.resource.attributes)
                for request in self.traces
                for rs in request.resource_spans
            ]

    def metric_names(self) -> set[str]:
        with self.lock:
            return {
                m.name
                for request in self.metrics
                for rm in request.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
            }


def value(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value") or "string_value")


def attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs}


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    got = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            with got.lock:
                got.content_types.add(self.headers.get("content-type", ""))
                if self.path == "/v1/traces":
                    got.traces.append(ExportTraceServiceRequest.FromString(body))
                    answer = ExportTraceServiceResponse().SerializeToString()
                elif self.path == "/v1/metrics":
                    got.metrics.append(ExportMetricsServiceRequest.FromString(body))
                    answer = ExportMetricsServiceResponse().SerializeToString()
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got, f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_stead_run_exports_its_trace_and_metrics_to_the_otlp_endpoint(
    tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    got, endpoint = receiver
    script = [
        {"tool": "write_file", "args": {"path": "notes.txt", "content": "one\n"}},
        {"tool": "read_file", "args": {"path": "notes.txt"}},
        {"finish": "notes written"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))
    spec = {
        "name": "exported",
        "instructions": "Write the notes.",
        "model": "scripted:script.yaml",
        "tools": ["write_file", "read_file"],
    }
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    store = f"sqlite:///{tmp_path / 's.db'}"
    done = subprocess.run(
        [sys.executable, "-m", "stead", "run", str(tmp_path / "agent.yaml"), "--store", store],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr

    # exported before the process ended: nothing is waited for here
    assert got.content_types == {"application/x-protobuf"}
    spans = got.spans()
    names = sorted(s.name for s in spans)
    assert names == sorted(
        [
            "invoke_agent exported",
            "stead.step",
            "stead.step",
            "stead.step",
            "chat scripted",
            "chat scripted",
            "chat scripted",
            "execute_tool write_file",
            "execute_tool read_file",
        ]
    )
    assert len({s.trace_id for s in spans}) == 1
    (activation,) = [s for s in spans if s.name.startswith("invoke_agent")]
    a = attributes(activation.attributes)
    assert a["stead.agent.status"] == "completed"
    assert a["gen_ai.agent.id"].startswith("ag_")
    ids = {s.span_id: s for s in spans}
    for tool in (s for s in spans if s.name.startswith("execute_tool")):
        t = attributes(tool.attributes)
        assert (t["stead.tool.verdict"], t["stead.tool.outcome"]) == ("allow", "ok")
        assert ids[tool.parent_span_id].name == "stead.step"
    assert {r.get("service.name") for r in got.resources()} == {"stead"}
    assert {
        "stead.steps",
        "stead.tool.duration",
        "gen_ai.client.operation.duration",
    } <= got.metric_names()
