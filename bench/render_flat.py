"""Whether rendering a step costs the same early and late in a long run, and what
a step that compacts the conversation costs.

One agent runs ``steps`` steps with its model over HTTP (:mod:`bench.fake_model`)
and a small context window, so its conversation is compacted again and again.
Every render of the context is timed; the medians of the first and last tenth
of the run are compared. Flat means the cost is bounded by the window, not by
the history: a step renders from the journal since the last compaction only.

Each step is also timed whole (wall and this process's processor time, from
the first render of one decision to the first of the next), and the steps in
which a compaction was journaled are set apart from the others. The fake
model answers a summary at once, so what a compacting step costs more is the
runtime's own work (the summarizer's text, the journal, the new render) and
one request more, not a model's time to summarize.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stead import Runtime
from stead.runtime import compaction
from stead.runtime.context import Renderer

from . import workload
from .fake_model import FakeModelServer
from .stats import median


def measure(workdir: Path, steps: int = 2000, window: int = 16_384) -> dict[str, Any]:
    timings: list[float] = []
    marks: dict[int, tuple[float, float]] = {}  # decision -> (processor, wall) at its render
    compacting: set[int] = set()
    render, journal = Renderer.render, compaction._journal

    def timed(self: Renderer, state: Any) -> Any:
        marks.setdefault(state.decisions, (time.process_time(), time.perf_counter()))
        t0 = time.perf_counter()
        try:
            return render(self, state)
        finally:
            timings.append((time.perf_counter() - t0) * 1e3)

    def noted(act: Any, *args: Any, **kwargs: Any) -> None:
        # journaled before the step's decision (at the budget) or after it (asked beside)
        compacting.add(act.state.decisions - (1 if act.state.inflight is not None else 0))
        journal(act, *args, **kwargs)

    Renderer.render = timed  # type: ignore[method-assign]
    compaction._journal = noted
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
        compaction._journal = journal
    if outcome.steps != steps:
        raise RuntimeError(f"the agent made {outcome.steps} of {steps} steps")
    tenth = max(1, len(timings) // 10)
    first, last = median(timings[:tenth]), median(timings[-tenth:])
    spans = {d: (marks[d + 1][0] - marks[d][0], marks[d + 1][1] - marks[d][1])
             for d in marks if d + 1 in marks}  # fmt: skip
    plain = [v for d, v in spans.items() if d not in compacting]
    compacted = [v for d, v in spans.items() if d in compacting]
    return {
        "steps": steps,
        "window": window,
        "compactions": compactions,
        "render_ms_first": first,
        "render_ms_last": last,
        "x_last_first": last / first,
        "ms_per_step": wall * 1e3 / steps,
        "step_ms": median([w for _, w in plain]) * 1e3,
        "step_cpu_ms": median([c for c, _ in plain]) * 1e3,
        "compacting_steps": len(compacted),
        "compacting_step_ms": median([w for _, w in compacted]) * 1e3 if compacted else None,
        "compacting_step_cpu_ms": median([c for c, _ in compacted]) * 1e3 if compacted else None,
    }
