"""Embedders: what turns texts into the vectors recall compares.

An :class:`Embedder` has a ``name`` (its vector space: memories are searched
only with vectors of the same name, so a change of model never compares apples
with pears) and ``embed``. :class:`HashEmbedder` needs no network: a hashed bag
of words, the same on every machine, for scripted agents, tests and demos.
:func:`embedder_for` picks an agent's: its provider's ``/embeddings`` endpoint
when its model speaks the OpenAI wire format (OpenAI, Ollama, vLLM...), else
the hashed one.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Sequence
from typing import Protocol

from .vectors import pack

EMBEDDING_MODEL_ENV = "STEAD_EMBEDDING_MODEL"
"""The embedding model the operator chose for provider agents (the provider's name
for it); :data:`DEFAULT_EMBEDDING_MODEL` when unset."""
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
_WORD = re.compile(r"\w+", re.UNICODE)


class Embedder(Protocol):
    """Texts to vectors (normalised float32 bytes, :mod:`.vectors`), in order."""

    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> list[bytes]: ...


class HashEmbedder:
    """A hashed bag of words: each word (lowercased) adds ±1 at a place its hash
    picks. Texts sharing words are near; it knows no synonyms. Deterministic and
    offline: for scripted agents, tests and demos, never a provider's stand-in."""

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension

    @property
    def name(self) -> str:
        return f"hash:{self.dimension}"

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> bytes:
        vector = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            (h,) = struct.unpack("<Q", digest)
            vector[h % self.dimension] += 1.0 if (h >> 63) else -1.0
        if not any(vector):  # no words: one fixed place, so it is still a vector
            vector[0] = 1.0
        return pack(vector)


def embedder_for(model: object) -> Embedder:
    """The embedder of an agent whose model is ``model``: its provider's
    ``/embeddings`` (OpenAI wire format) or the hashed bag of words."""
    from ..models.openai import OpenAIModel  # models are loaded with the runtime anyway
    from .openai_embeddings import OpenAIEmbeddings

    if isinstance(model, OpenAIModel):
        name = os.environ.get(EMBEDDING_MODEL_ENV) or DEFAULT_EMBEDDING_MODEL
        return OpenAIEmbeddings(model, name, model.options.base_url)
    return HashEmbedder()
