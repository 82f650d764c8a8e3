"""Rebuild the dictionary rows are compressed with (``src/stead/store/journal-1.zdict``).

    python -m bench.codec_dictionary [--out PATH] [--size BYTES]

Samples are the rows a store writes, gathered from journals stead itself makes: the
demo (a refactoring agent killed mid-step and resumed), the bench's step workload
(tool calls, results, memory writes: the events of a long agent), and the offline
example; each event's data, each agent's state checkpoint and its spec, read back
through the store. The hibernation bench's agents are left out on purpose, so the
disk figure it reports is not measured on the journals the dictionary was made from.

A dictionary that has shipped is never replaced in place: rows written with it must
stay readable. A new one is written under a new name and a new codec byte in
:mod:`stead.store.codec` (``CODECS``), and ``WRITE_CODEC`` moved to it.
"""

from __future__ import annotations

import argparse
import io
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import zstandard

from stead import Runtime
from stead.canonical import dumps
from stead.store.sqlite import SqliteStore

from . import workload

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "src" / "stead" / "store" / "journal-1.zdict"
SIZE = 32 * 1024


def samples_of(db: Path) -> Iterator[str]:
    """Every event's data, state checkpoint and spec in the SQLite store at ``db``."""
    store = SqliteStore(db, create=False)
    try:
        for agent in store.list_agents():
            yield dumps(store.get_record(agent.agent_id).spec)
            yield dumps(store.load_state(agent.agent_id).to_json())
            for event in store.read_events(agent.agent_id):
                yield event.data_json if event.data_json is not None else dumps(dict(event.data))
    finally:
        store.close()


def _demo(work: Path) -> Path:
    from rich.console import Console

    from stead.demo.runner import run_demo

    folder = work / "demo"
    run_demo(folder, Console(file=io.StringIO()))
    return folder / "stead.db"


def _steps(work: Path, agents: int = 2, steps: int = 30) -> Path:
    folder = work / "steps"
    folder.mkdir()
    rt = Runtime(f"sqlite:///{folder / 'stead.db'}", data_dir=folder / "data")
    try:
        for n in range(agents):
            agent = rt.create(workload.spec(folder)).agent_id
            rt.run(agent, model=workload.model(steps + 10 * n))
    finally:
        rt.close()
    return folder / "stead.db"


def _offline(work: Path) -> Path:
    folder = work / "offline"
    shutil.copytree(REPO / "examples" / "offline", folder)
    rt = Runtime(f"sqlite:///{folder / 'stead.db'}", data_dir=folder / "data")
    try:
        from stead import load_spec

        spec = load_spec(folder / "agent.yaml")
        for _ in range(3):
            rt.run(rt.create(spec).agent_id)
    finally:
        rt.close()
    return folder / "stead.db"


def _waiting(work: Path, agents: int = 6) -> Path:
    """Agents that take a note, wait for a person, are hibernated and woken: the rows
    of the hibernation guide's cycle (grants, waits, snapshots), with plain English
    for content."""
    from stead import ScriptedModel, parse_spec
    from stead.snapshots.hibernation import hibernate

    folder = work / "waiting"
    (folder / "seed").mkdir(parents=True)
    (folder / "seed" / "README.md").write_text("# Tasks\n\nKeep notes here.\n", "utf-8")
    (folder / "script.yaml").write_text("- {wait_for_input: 'ready?'}\n", "utf-8")
    spec = parse_spec(
        {
            "name": "notes",
            "instructions": "Take notes of what you are told, then wait for more.",
            "model": "scripted:script.yaml",
            "tools": ["read_file", "write_file", "list_files"],
            "workspace": "seed",
        },
        folder,
    )
    rt = Runtime(f"sqlite:///{folder / 'stead.db'}", data_dir=folder / "data")
    try:
        for n in range(agents):
            agent = rt.create(spec).agent_id
            note = f"Meeting {n}: the team agreed to ship the release on Friday.\n"
            rt.run(
                agent,
                model=ScriptedModel.from_data(
                    [
                        {"tool": "write_file", "args": {"path": "notes.md", "content": note}},
                        {"wait_for_input": "anything else?"},
                        {"tool": "read_file", "args": {"path": "notes.md"}},
                        {"wait_for_input": "anything else?"},
                    ]
                ),
            )
            hibernate(rt, agent)
            rt.send(agent, "Add that the demo moved to Monday.")
            rt.run(agent)
            hibernate(rt, agent)
    finally:
        rt.close()
    return folder / "stead.db"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--size", type=int, default=SIZE)
    args = parser.parse_args(argv)
    texts: list[bytes] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for make in (_demo, _steps, _offline, _waiting):
            before = len(texts)
            texts.extend(t.encode("utf-8") for t in samples_of(make(work)))
            print(f"{make.__name__.strip('_')}: {len(texts) - before} rows")
    trained = zstandard.train_dictionary(args.size, texts, level=6, threads=-1)
    args.out.write_bytes(trained.as_bytes())
    plain = sum(len(t) for t in texts)
    c = zstandard.ZstdCompressor(level=6, dict_data=trained, write_checksum=False)
    packed = sum(min(len(c.compress(t)) + 1, len(t)) for t in texts)
    print(
        f"{args.out}: {len(trained.as_bytes()):,} bytes from {len(texts)} rows; "
        f"the rows {plain:,} -> {packed:,} bytes"
    )


if __name__ == "__main__":
    main()
