"""Long-term memories: saved by an agent or a person, recalled by meaning.

:mod:`.vectors` checks and packs what an embedder answers; :mod:`.embedders`
holds the offline embedder and the choice of one for an agent;
:mod:`.openai_embeddings` asks an OpenAI-compatible ``/embeddings`` endpoint;
:mod:`.search` is exact top-k search over an owner's vectors; :mod:`.book` saves,
recalls, corrects and forgets for one agent; :mod:`.tools` are the agent's tools;
:mod:`.person` is what a person does, journaled. Rows live in the store
(:mod:`stead.store.memory_rows`). See docs/guide/memories.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Memories"]


def __getattr__(name: str) -> Any:
    # imported when asked for: the memory tools load this package with the tools,
    # before the runtime's modules that the person's side uses
    if name == "Memories":
        from .person import Memories

        return Memories
    raise AttributeError(name)
