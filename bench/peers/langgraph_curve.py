"""LangGraph's side of the step-cost curve (:mod:`bench.curve`): a graph over a message list.

The graph's state is a message list (``add_messages``), a step count and the
agent's memory. ``model`` POSTs the whole conversation in the OpenAI wire format
(LangChain's ``convert_to_openai_messages``, then ``json.dumps``) with httpx to
the fake model stead's curve talks to, and appends its answer; ``tool`` runs
``lookup`` (its JSON result ``--output-bytes`` long) and ``remember``, appending
a tool message for each. ``SqliteSaver`` with ``durability="sync"`` (synchronous
=FULL, as in W1). The conversation is grown untimed with ``durability="exit"``
(one checkpoint at the end of each growing run); each measured window then runs
one ``invoke`` of ``--window`` + 1 steps (fewer at a short size, as stead's), a
step timed from one ``model`` node's start to the next's (wall and this
process's processor time).

Usage: python -m bench.peers.langgraph_curve --dir D --model-url U --sizes 1000,10000
--output-bytes 100 --window 20. Prints one JSON object: ``{"output_bytes", "points"}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

import httpx
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from ..stats import median
from .common import _FIXED, emit, say, window_at
from .langgraph_peer import connect

SYSTEM = "You are a durable agent. Use the tools to act; remember what matters."
TASK = "Look things up and remember the last one."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Return a record for key (a stand-in for a small API call).",
            "parameters": {
                "type": "object",
                "properties": {"key": {"type": "string"}},
                "required": ["key"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "remember",
            "description": "Write values into the agent's memory.",
            "parameters": {
                "type": "object",
                "properties": {"values": {"type": "object"}},
                "required": ["values"],
            },
        },
    },
]


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    step: int
    limit: int
    memory: dict[str, Any]


class Agent:
    """The graph, its model client, and the marks its ``model`` node leaves."""

    def __init__(self, model_url: str, output_bytes: int) -> None:
        self.url = f"{model_url}/chat/completions"
        self.client = httpx.Client(timeout=60)
        self.value = "x" * max(0, output_bytes - _FIXED)
        self.marks: list[tuple[float, float]] = []
        self.sizes: list[int] = []

    def model(self, state: State) -> dict[str, Any]:
        self.marks.append((time.perf_counter(), time.process_time()))
        body = {
            "model": "bench",
            "messages": [
                {"role": "system", "content": SYSTEM},
                *convert_to_openai_messages(state["messages"]),
            ],
            "tools": TOOLS,
            "max_tokens": 4096,
        }
        raw = json.dumps(body).encode()
        self.sizes.append(len(raw))
        answer = self.client.post(
            self.url, content=raw, headers={"content-type": "application/json"}
        )
        answer.raise_for_status()
        message = answer.json()["choices"][0]["message"]
        calls = [
            {
                "name": c["function"]["name"],
                "args": json.loads(c["function"]["arguments"]),
                "id": c["id"],
                "type": "tool_call",
            }
            for c in message.get("tool_calls") or []
        ]
        return {"messages": [AIMessage(content=message.get("content") or "", tool_calls=calls)]}

    def tool(self, state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        out: list[ToolMessage] = []
        memory = dict(state.get("memory", {}))
        for call in last.tool_calls:
            if call["name"] == "lookup":
                result: Any = {"key": call["args"]["key"], "status": "ok", "value": self.value}
            else:
                memory.update(call["args"]["values"])
                result = {"ok": True}
            out.append(ToolMessage(content=json.dumps(result), tool_call_id=call["id"]))
        return {"messages": out, "memory": memory, "step": state["step"] + 1}

    def graph(self, saver: SqliteSaver) -> Any:
        g: StateGraph[Any] = StateGraph(State)
        g.add_node("model", self.model)
        g.add_node("tool", self.tool)
        g.add_edge(START, "model")
        g.add_edge("model", "tool")
        g.add_conditional_edges(
            "tool", lambda s: "model" if s["step"] < s["limit"] else END, ["model", END]
        )
        return g.compile(checkpointer=saver)


def run(args: argparse.Namespace) -> dict[str, Any]:
    agent = Agent(args.model_url, args.output_bytes)
    conn = connect(args.dir / "curve.db")
    try:
        graph = agent.graph(SqliteSaver(conn))
        done = 0

        def steps(k: int, durability: str) -> None:
            nonlocal done
            start: dict[str, Any] = {"limit": done + k}
            if done == 0:
                start.update(messages=[HumanMessage(TASK)], step=0, memory={})
            config = {"configurable": {"thread_id": "agent"}, "recursion_limit": 2 * k + 10}
            out = graph.invoke(start, config, durability=durability)
            if out["step"] != done + k:
                raise RuntimeError(f"the graph ended at step {out['step']}, wanted {done + k}")
            done += k

        steps(2, "exit")
        last = agent.sizes[-1] / 4
        per_step = max(1.0, (agent.sizes[-1] - agent.sizes[0]) / 4)
        window = args.window
        points = []
        for target in args.sizes:
            n = window_at(target, per_step, window)
            goal = target - per_step * n / 2
            while last < goal:
                agent.sizes.clear()
                steps(max(1, int((goal - last) / per_step)), "exit")
                if len(agent.sizes) >= 2:
                    per_step = max(
                        1.0, (agent.sizes[-1] - agent.sizes[0]) / 4 / (len(agent.sizes) - 1)
                    )
                last = agent.sizes[-1] / 4
            agent.marks.clear()
            agent.sizes.clear()
            # window + 1 model nodes: window steps from one model node's start to the next's
            steps(n + 1, "sync")
            marks, sizes = agent.marks, agent.sizes[:n]
            last = agent.sizes[-1] / 4
            wall = [(b[0] - a[0]) * 1e3 for a, b in itertools.pairwise(marks)]
            cpu = [(b[1] - a[1]) * 1e3 for a, b in itertools.pairwise(marks)]
            points.append(
                {
                    "target_tokens": target,
                    "tokens": median(sizes) / 4,
                    "tokens_range": [min(sizes) / 4, max(sizes) / 4],
                    "steps": len(wall),
                    "wall_ms_per_step": median(wall),
                    "cpu_ms_per_step": median(cpu),
                    "wall_ms": wall,
                    "cpu_ms": cpu,
                }
            )
            say(
                f"curve, LangGraph, {args.output_bytes:,} B results: {points[-1]['tokens']:,.0f} "
                f"tokens, CPU {points[-1]['cpu_ms_per_step']:.2f} ms/step"
            )
    finally:
        conn.close()
        agent.client.close()
    return {"output_bytes": args.output_bytes, "points": points}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.peers.langgraph_curve")
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--model-url", required=True)
    p.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], required=True)
    p.add_argument("--output-bytes", type=int, default=100)
    p.add_argument("--window", type=int, default=20)
    args = p.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    emit(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
