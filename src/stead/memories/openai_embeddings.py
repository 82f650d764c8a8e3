"""An OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI, Ollama, vLLM...).

Asked through the agent's own provider model (:meth:`ProviderModel.post_beside`):
the same base URL, API key (vault or environment, bound to that host), client,
retries and bounds as its decisions. The answer is checked
(:func:`stead.memories.vectors.checked`): count, order, dimension, numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..errors import ModelError
from .vectors import checked

MAX_BATCH = 64
"""Texts sent in one request."""


class _Poster(Protocol):
    def post_beside(self, path: str, body: Any) -> Any: ...


class OpenAIEmbeddings:
    """Vectors from the provider's embeddings endpoint, for the model named."""

    def __init__(self, poster: _Poster, model: str, base_url: str) -> None:
        self._poster = poster
        self.model = model
        self._where = f"the embeddings endpoint at {base_url} (model {model})"
        # the vector space: the model and the service (another host's model of the
        # same name may not be the same model)
        self._name = f"openai:{model}@{base_url.rstrip('/')}"
        self._dimension: int | None = None

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: Sequence[str]) -> list[bytes]:
        out: list[bytes] = []
        for start in range(0, len(texts), MAX_BATCH):
            batch = list(texts[start : start + MAX_BATCH])
            answer = self._poster.post_beside("/embeddings", {"model": self.model, "input": batch})
            packed = checked(
                _vectors(answer, self._where), len(batch), self._dimension, self._where
            )
            self._dimension = len(packed[0]) // 4
            out += packed
        return out


def _vectors(answer: Any, where: str) -> list[Any]:
    """The vectors of an answer, in the order of the texts sent (by ``index``)."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise ModelError(f"{where} answered no 'data' list; is it an embeddings endpoint?")
    indexed: dict[int, Any] = {}
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or index in indexed:
            raise ModelError(f"{where} answered an item without a distinct 'index'")
        indexed[index] = item.get("embedding")
    if sorted(indexed) != list(range(len(indexed))):
        raise ModelError(f"{where} answered indexes that are not 0..{len(indexed) - 1}")
    return [indexed[i] for i in range(len(indexed))]
