"""A model behind a provider's HTTP API: what both wire formats share.

:class:`ProviderModel` renders one request from a :class:`RenderedContext`
(deterministically: the same context gives the same bytes), sends it with
:func:`stead.models.http.post_json`, and turns the answer's tool calls into a
:class:`Decision` through :mod:`stead.models.actions`. The subclasses
(:mod:`.openai`, :mod:`.anthropic`) know only their wire format.

A decision carries what it cost (``usage``: tokens in, out and cached, and the
spend from :mod:`.prices`) and every HTTP attempt it took (``attempts``), which
the runtime journals with it. The model keeps nothing between calls, so a
resumed agent, or one whose model was swapped, is simply asked again.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import httpx

from ..errors import InvalidAnswer, ModelError
from ..livetext import Speaker

if TYPE_CHECKING:
    import aiohttp
from . import sse
from .actions import ACTION_TOOLS, ToolCall, ToolSpec, actions_from_calls, offered_tools
from .base import Decision, RenderedContext
from .bounded import bounded_client
from .encoding import Growing
from .endpoints import with_hint
from .http import Attempt, Exchange, _json, apost_json, post_json
from .options import ModelOptions
from .prices import spend_of
from .speech import WHY_CAP

SYSTEM_PROMPT = (
    "You are an autonomous agent run by stead, a durable agent runtime. Each turn "
    "you are shown your instructions, goals, memory, recent tool calls and notices, "
    "and you act only by calling tools: your own tools, and the runtime's actions "
    "(remember, push_goal, complete_goal, finish, wait_for_input, wait, send_message, "
    "delegate). Call several tools in one answer when they do not depend on each "
    "other's results. Values you take from what tools return (addresses, links, ids, "
    "amounts) wait for a person before they go out, unless the person's task named "
    "where they come from: then, before you read anything, call allow_flow for each "
    "such source and the tool its values are for. Text hidden from you as a handle "
    "($h12) is passed whole as an argument, or asked about with query. Call finish "
    "with a summary when the whole task is done; a claim that is not true is "
    "rejected and shown to you."
)

SUMMARY_PROMPT = (
    "You compress the work log of an autonomous agent so that it can go on without "
    "the full log. Write a faithful summary, in plain text: what the task is, what "
    "was done (files written, commands run, results that matter, with exact names, "
    "paths, numbers and identifiers), what failed and why, what was learned, and "
    "what remains. Keep everything the agent would need to continue; leave out "
    "nothing it committed to. Do not invent anything."
)


G = TypeVar("G", bound=Growing)

_ACTIONS_CHARS = len(json.dumps(ACTION_TOOLS))
"""The runtime's actions, offered as tools beside the agent's own (not in the context's size)."""


class ProviderModel:
    """A provider's model, asked over HTTP; stateless between decisions."""

    service = "the model service"
    conversation = True
    """It is shown the run as a conversation (:mod:`stead.models.conversation`)."""

    def __init__(
        self,
        options: ModelOptions,
        api_key: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.options = options
        self.name = options.ref
        self.invalid_answers = options.invalid_answers
        # the key this model sends: redacted from everything the agent journals
        self._secrets: dict[str, str] = {options.api_key_secret: api_key} if api_key else {}
        self._key = api_key
        self._transport = transport
        self._sync_client: httpx.Client | None = None  # made at first use: a worker
        # that asks on an event loop (adecide) never needs one, and each costs memory
        self._rng = rng or random.Random(os.urandom(16))
        self._sleep = sleep
        self._speaker: Speaker | None = None

    def speak_for(self, agent_id: str, redact: Callable[[str], str]) -> None:
        """Publish the text of each answer, as it streams in, as ``agent_id``'s
        (:mod:`stead.livetext`), redacted by ``redact``."""
        self._speaker = Speaker(agent_id, redact)

    def use_rng(self, rng: random.Random) -> None:
        """Draw backoff jitter from ``rng`` (the activation's seeded generator)."""
        self._rng = rng
        if self.summarizer is not None:
            self.summarizer.use_rng(rng)

    @property
    def _client(self) -> httpx.Client:
        if self._sync_client is None:
            if self._transport is None:
                self._sync_client = bounded_client(self.timeout())
            else:  # a test's, a recording's or a replay's
                self._sync_client = httpx.Client(
                    timeout=self.timeout(), transport=self._transport, follow_redirects=False
                )
        return self._sync_client

    def timeout(self) -> httpx.Timeout:
        """How long one read may wait: the spec's timeout, connecting within 10 s
        (the whole attempt is held to the timeout too, by :func:`post_json`)."""
        return httpx.Timeout(self.options.timeout, connect=min(self.options.timeout, 10.0))

    def post_beside(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST ``body`` to another endpoint of this provider (``/embeddings``): its
        base URL, key, client, retries and bounds, as a decision is asked; the JSON."""
        return self._post_aside(self.options.base_url.rstrip("/") + path, body).body

    def _post_aside(self, url: str, body: Mapping[str, Any]) -> Exchange:
        """One request apart from the run (a summary, embeddings): this provider's key,
        client, retries and bounds, without the decision's live text."""
        kwargs: dict[str, Any] = {} if self._sleep is None else {"sleep": self._sleep}
        return post_json(
            self._client,
            url,
            self.headers(),
            body,
            service=f"{self.service} at {self.options.base_url}",
            max_retries=self.options.max_retries,
            rng=self._rng,
            timeout=self.options.timeout,
            **kwargs,
        )

    def close(self) -> None:
        if self._sync_client is not None:
            self._sync_client.close()
        if self.summarizer is not None:
            self.summarizer.close()

    # -- what a wire format fills in ------------------------------------------------

    def endpoint(self) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def request(self, context: RenderedContext, tools: list[ToolSpec]) -> dict[str, Any]:
        raise NotImplementedError

    _growing: Growing | None = None

    def kept(self, kind: type[G]) -> G:
        """The wire format's encoding kept between steps (made at first use)."""
        if not isinstance(self._growing, kind):
            self._growing = kind()
        return self._growing

    def encode(self, context: RenderedContext, tools: list[ToolSpec]) -> bytes:
        """The body of the request for ``context``, asking for a stream, as JSON
        bytes: what :meth:`request` gives, encoded. A wire format keeps the encoding
        of the turns that no longer change (:mod:`.encoding`)."""
        body = json.dumps(self._streamed(self.request(context, tools)), ensure_ascii=False)
        self._growing = self._growing or Growing()
        self._growing.encoded = len(body)
        return body.encode()

    @property
    def encoded_bytes(self) -> int:
        """The bytes of JSON the last request encoded afresh (:mod:`.encoding`)."""
        return self._growing.encoded if self._growing is not None else 0

    def side_request(self, system: str, text: str) -> dict[str, Any]:
        """A request with no tools and nothing of the run: ``system`` then ``text``
        (a compaction's summary, a quarantined query)."""
        raise NotImplementedError

    def read_answer(self, body: Any) -> tuple[list[ToolCall], str, dict[str, int]]:
        """The tool calls, the text, and the token counts (in, out, cached) of an answer."""
        raise NotImplementedError

    def stream_fields(self) -> dict[str, Any]:
        """What a request adds to have its answer streamed."""
        raise NotImplementedError

    def assemble(self, events: list[sse.Event]) -> Any:
        """The unstreamed answer a stream's events make (:mod:`.sse`)."""
        raise NotImplementedError

    def text_of(self, event: sse.Event) -> str:
        """The text one streamed event adds to the answer."""
        raise NotImplementedError

    # -- streaming ------------------------------------------------------------------

    def _read(self, response: httpx.Response, service: str) -> Any:
        """A 2xx answer's JSON: put back together from its events when it streamed
        (a service may answer unstreamed all the same: then it is read as JSON)."""
        if "text/event-stream" not in response.headers.get("content-type", ""):
            return _json(response, service)
        try:
            return self.assemble(sse.parse(response.content))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as exc:
            raise ModelError(
                f"{service} sent a stream that is not in its wire format: {str(exc)[:200]}"
            ) from None

    def _watch(self, status: int, kind: str) -> Callable[[bytes], None] | None:
        """What an attempt's chunks are fed to: the live text, for a 2xx stream."""
        speaker = self._speaker
        if speaker is None or not 200 <= status < 300 or "text/event-stream" not in kind:
            return None
        speaker.begin()
        events = sse.Events(lambda event: speaker.add(self.text_of(event)))

        def feed(chunk: bytes) -> None:
            with contextlib.suppress(ValueError, RecursionError):  # judged once whole
                events.feed(chunk)

        return feed

    def _streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, **self.stream_fields()}

    # -- compaction -----------------------------------------------------------------

    def request_tokens(self, context: RenderedContext) -> int:
        """The estimated size of the request for ``context``: its JSON, about four
        characters a token, with a fifth more for the wire format's own keys (what
        the service counts differs by model; the budget leaves room for that)."""
        if not context.size:
            return len(json.dumps(self.request(context, offered_tools(context)))) // 4
        return (context.size * 6 // 5 + len(SYSTEM_PROMPT) + _ACTIONS_CHARS + 400) // 4

    def budget(self) -> int:
        """The tokens a request may take before the conversation is compacted."""
        return int(self.options.compact_at * self._room())

    def keep(self) -> int:
        """The tokens of newest turns a compaction keeps whole."""
        return int(self.options.compact_to * self._room())

    def _room(self) -> int:
        return self.options.context_window - self.options.max_tokens

    summarizer: ProviderModel | None = None
    """The model that writes compaction summaries, when the spec names a cheaper one."""

    @property
    def live(self) -> bool:
        """Asked over the network as the run goes, so a summary may be asked beside a
        decision (:mod:`.summaries`); a recording keeps its requests in order."""
        return self._transport is None and (self.summarizer is None or self.summarizer.live)

    @property
    def secrets(self) -> dict[str, str]:
        """The keys this model (and its summarizer) send: redacted wherever the agent
        journals or records anything."""
        theirs = self.summarizer.secrets if self.summarizer is not None else {}
        return {**theirs, **self._secrets}

    def summarize(self, text: str) -> Summary:
        """A summary of ``text`` (older turns of the conversation), asked of this
        model or of its summarizer."""
        if self.summarizer is not None:
            return self.summarizer.summarize(text)
        summary = self.ask_aside(SUMMARY_PROMPT, text)
        if not summary.text:
            raise ModelError(
                f"{self.service} gave no summary to compact the conversation with",
                attempts=list(summary.attempts),
            )
        return summary

    def ask_aside(self, system: str, text: str) -> Summary:
        """This model's words on ``text`` under ``system``, asked apart from the run
        (no tools, no conversation): empty when it gave none."""
        exchange = self._post_aside(self.endpoint(), self.side_request(system, text))
        try:
            _, words, tokens = self.read_answer(exchange.body)
        except (InvalidAnswer, KeyError, IndexError, TypeError, ValueError, AttributeError):
            words, tokens = "", {}
        return Summary(words.strip(), self.usage(tokens), tuple(exchange.attempts), self.name)

    # -- the decision ---------------------------------------------------------------

    def decide(self, context: RenderedContext) -> Decision:
        tools = offered_tools(context)
        url, headers, body, held = self._asking(context, tools)
        if self._sleep is not None:
            held["sleep"] = self._sleep
        with self._asked():
            exchange: Exchange = post_json(self._client, url, headers, body, **held)
        return self._decision(exchange, tools)

    async def adecide(self, context: RenderedContext, session: aiohttp.ClientSession) -> Decision:
        """:meth:`decide` on an event loop, over ``session`` (a worker's, shared by the
        agents it keeps in flight: see :mod:`stead.workers.parked`)."""
        tools = offered_tools(context)
        url, headers, body, held = self._asking(context, tools)
        if self._sleep is not None:
            pause = self._sleep

            async def paused(seconds: float) -> None:
                pause(seconds)

            held["sleep"] = paused
        with self._asked():
            exchange = await apost_json(session, url, headers, body, **held)
        return self._decision(exchange, tools)

    def _asking(
        self, context: RenderedContext, tools: list[ToolSpec]
    ) -> tuple[str, dict[str, str], bytes, dict[str, Any]]:
        """What both ways of asking send (the URL, the headers, the body asking for a
        stream) and how they hold the exchange (retries, deadline, reading, the live
        text); the decision's step is the live text's."""
        if self._speaker is not None:
            self._speaker.step = context.step + 1
        held: dict[str, Any] = {
            "service": f"{self.service} at {self.options.base_url}",
            "max_retries": self.options.max_retries,
            "rng": self._rng,
            "timeout": self.options.timeout,
            "read": self._read,
            "watch": self._watch,
        }
        return self.endpoint(), self.headers(), self.encode(context, tools), held

    @contextlib.contextmanager
    def _asked(self) -> Iterator[None]:
        """Around an exchange: a 404 says what is wrong with the base_url, and the live
        text ends however the exchange did."""
        try:
            yield
        except ModelError as exc:
            raise with_hint(exc, self.options) from None
        finally:
            if self._speaker is not None:
                self._speaker.end()

    def _decision(self, exchange: Exchange, tools: list[ToolSpec]) -> Decision:
        attempts = tuple(a.to_json() for a in exchange.attempts)
        try:
            calls, text, tokens = self.read_answer(exchange.body)
        except InvalidAnswer as exc:  # a refusal
            raise InvalidAnswer(str(exc), attempts=exchange.attempts) from None
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise ModelError(
                f"{self.service} sent an answer that is not in its wire format",
                attempts=exchange.attempts,
            ) from None
        usage = self.usage(tokens)
        try:
            actions = actions_from_calls(calls, tools, text)
        except InvalidAnswer as exc:
            raise InvalidAnswer(
                str(exc), answer=_answer_of(calls, text), attempts=exchange.attempts, usage=usage
            ) from None
        why = text[:WHY_CAP] if calls else ""
        return Decision(tuple(actions), usage=usage, attempts=attempts, text=why)

    def usage(self, tokens: Mapping[str, int]) -> dict[str, float]:
        """Tokens in, out and cached, and what they cost at the model's price."""
        inp, out, cached = tokens.get("input", 0), tokens.get("output", 0), tokens.get("cached", 0)
        return {
            "tokens": float(inp + out),
            "input_tokens": float(inp),
            "output_tokens": float(out),
            "cached_tokens": float(cached),
            "spend": spend_of(self.options.provider, self.options.name, inp, out, cached),
        }


@dataclass(frozen=True, slots=True)
class Summary:
    """A model's words asked apart from the run (a compaction's summary, a
    quarantined query's answer), what they cost and the requests they took."""

    text: str
    usage: dict[str, float]
    attempts: tuple[Attempt, ...]
    model: str
    """Which model wrote it."""


def count(value: Any) -> int:
    """A token count from an answer: a whole number of at least 0, else 0."""
    try:
        number = int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0
    return max(0, min(number, 10**12))


def _answer_of(calls: list[ToolCall], text: str) -> dict[str, Any]:
    """What the model answered, for the journal and for its next context (bounded)."""
    return {
        "text": text[:2000],
        "calls": [{"name": c.name[:200], "arguments": c.arguments[:2000]} for c in calls[:20]],
    }
