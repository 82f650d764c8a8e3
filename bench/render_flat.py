"""Whether rendering a step costs the same early and late in a long run.

One agent runs ``steps`` steps with its model over HTTP (:mod:`bench.fake_model`)
and a small context window, so its conversation is compacted again and again.
Every render of the context is timed; the medians of the first and last tenth
of the run are compared. Flat means the cost is bounded by the window, not by
the history: a step renders from the journal since the last compaction only.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stead import Runtime
from stead.runtime.context import Renderer

from . import workload
from .fake_model import FakeModelServer
from .stats import median


def measure(workdir: Path, steps: int = 2000, window: int = 16_384) -> dict[str, Any]:
    timings: list[float] = []
    render = Renderer.render

    def timed(self: Renderer, state: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return render(self, state)
        finally:
            timings.append((time.perf_counter() - t0) * 1e3)

    Renderer.render = timed  # type: ignore[method-assign]
    try:
        with FakeModelServer() as url:
            model = {
                "provider": "openai",
                "name": "bench",
                "base_url": url,
                "context_window": window,
                "max_tokens": 512,
            }
            rt = Runtime(f"sqlite:///{workdir / 'render.db'}", data_dir=workdir / "data")
            try:
                agent_id = rt.create(workload.spec(workdir, model=model)).agent_id
                t0 = time.perf_counter()
                outcome = rt.run(agent_id, tools=workload.tools(), max_steps=steps)
                wall = time.perf_counter() - t0
                compactions = sum(
                    1 for e in rt.store.read_events(agent_id) if e.kind == "context_compacted"
                )
            finally:
                rt.close()
    finally:
        Renderer.render = render  # type: ignore[method-assign]
    if outcome.steps != steps:
        raise RuntimeError(f"the agent made {outcome.steps} of {steps} steps")
    tenth = max(1, len(timings) // 10)
    first, last = median(timings[:tenth]), median(timings[-tenth:])
    return {
        "steps": steps,
        "window": window,
        "compactions": compactions,
        "render_ms_first": first,
        "render_ms_last": last,
        "x_last_first": last / first,
        "ms_per_step": wall * 1e3 / steps,
    }
