"""Off unless an ``OTEL_*`` variable asks: no provider, no SDK import, no cost but a check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import trace

from stead import telemetry
from stead.telemetry import NO_TRACE, OFF
from stead.telemetry.switch import Wanted, wanted

from .agents import runtime, scripted

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
METRICS = "OTEL_METRICS_EXPORTER"


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, Wanted(False, False)),
        ({"OTEL_SERVICE_NAME": "x", "OTEL_RESOURCE_ATTRIBUTES": "a=b"}, Wanted(False, False)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318"}, Wanted(True, True)),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, Wanted(False, False)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h/v1/traces"}, Wanted(True, False)),
        ({"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://h/v1/metrics"}, Wanted(False, True)),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, Wanted(True, False)),
        ({"OTEL_TRACES_EXPORTER": "console, OTLP", METRICS: "otlp"}, Wanted(True, True)),
        ({ENDPOINT: "http://h", "OTEL_TRACES_EXPORTER": "none"}, Wanted(False, True)),
        ({ENDPOINT: "http://h", "OTEL_SDK_DISABLED": "True"}, Wanted(False, False)),
    ],
)  # fmt: skip
def test_the_variables_that_turn_each_signal_on(env: dict[str, str], want: Wanted) -> None:
    assert wanted(env) == want


def test_without_otel_variables_no_provider_is_installed_and_activations_trace_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    rt = runtime(tmp_path)
    agent_id = scripted(rt, tmp_path, [{"tool": "list_files"}, {"finish": "done"}])
    assert rt.run(agent_id).state.status == "completed"
    assert telemetry.current() is OFF
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    with rt.hold(agent_id) as act:
        assert act.trace is NO_TRACE
    rt.close()


RUN_ONE = """
import json, sys, tempfile
from pathlib import Path
import yaml
from stead import Runtime, parse_spec
SDK = ("opentelemetry.sdk", "opentelemetry.exporter")
folder = Path(tempfile.mkdtemp())
(folder / "script.yaml").write_text(yaml.safe_dump([{"tool": "list_files"}, {"finish": "ok"}]))
spec = {"name": "a", "model": "scripted:script.yaml", "tools": ["list_files"]}
rt = Runtime("memory:", folder / "data")
state = rt.run(rt.create(parse_spec(spec, folder)).agent_id).state
from opentelemetry import trace
print(json.dumps({
    "status": state.status,
    "sdk": sorted(m for m in sys.modules if m.startswith(SDK)),
    "provider": type(trace.get_tracer_provider()).__name__,
}))
"""


def test_a_process_that_is_not_asked_never_imports_the_sdk_or_an_exporter() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen == {"status": "completed", "sdk": [], "provider": "ProxyTracerProvider"}
    # the same program, asked, does set them up (so the check above can fail)
    asked = {
        **env,
        "OTEL_TRACES_EXPORTER": "otlp",
        ENDPOINT: "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",  # nothing listens there: give up soon
    }
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONE], env=asked, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["provider"] == "TracerProvider"
    assert "opentelemetry.sdk.trace" in seen["sdk"]
