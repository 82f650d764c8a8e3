"""The bytes a SQL store keeps for a JSON text: the text itself, or it compressed.

Events' data (and, in SQLite, an agent's state checkpoint and spec) are JSON
texts whose shapes repeat from row to row and agent to agent: the same keys, the
same kinds, the same ids and hashes in nearby rows. One row alone is too short for
a compressor to find much of that, so rows are compressed with zstandard and a
dictionary trained on the journals stead writes (``journal-1.zdict`` beside this
module; ``python -m bench.codec_dictionary`` rebuilds it from the demo's and the
bench's workloads). A stored value is one of:

* a ``str``: the canonical text itself, as every row was before compression
  existed, and as a row stays when compressing it would not make it smaller;
* ``bytes`` whose first byte names the codec that wrote the rest. ``1`` is a
  zstandard frame (with its content size, without its own checksum) made with
  dictionary 1. A later dictionary takes a new byte, so rows written with an
  older one stay readable for as long as stead ships it.

SQLite also keeps an event's ``hash`` and ``prev_hash`` as their 32 bytes
(:func:`pack_hash`) rather than 64 hex digits: a hash does not compress beyond
its 32 bytes, and its hex is a third of a small event's row.

Only the bytes at rest change: every hash (the event's, the chain's, the state
row's anchor) is taken over the canonical text, before :func:`pack` and after
:func:`unpack`, exactly as it was. A row that does not unpack (an unknown codec
byte, a damaged frame, a frame that claims more than :data:`MAX_TEXT` bytes, or
text that is not UTF-8) is reported as an :class:`~stead.errors.IntegrityError`
naming where it is, never returned as garbage and never allowed to fill memory.
"""

from __future__ import annotations

import threading
from pathlib import Path

import zstandard

from ..errors import IntegrityError

DICTIONARY_1 = 1
"""The codec byte of a zstandard frame made with ``journal-1.zdict``."""
CODECS = {DICTIONARY_1: "journal-1.zdict"}
"""Each codec byte this stead reads, and its dictionary's file beside this module."""
WRITE_CODEC = DICTIONARY_1
"""The codec new rows are written with."""
MAX_TEXT = 64 * 1024 * 1024
"""The most a stored row may unpack to: far above any event or state stead writes
(a tool's result is clipped long before), and small enough that a crafted frame
cannot make a reader allocate without bound."""
AT_REST = 6
"""The level of rows that stay: events, and an agent's checkpoint once it is at rest.
Rows are short; this costs about 3 µs an event and 20 µs a 3 kB state, and stores
them some 15% smaller than level 3 does."""
FAST = 3
"""The level of a running agent's checkpoint, which its next commit replaces: about
6 µs a state. Still compressed, so the row keeps its size from commit to commit
and SQLite's pages do not fragment when the agent comes to rest."""
_MIN = 32
"""Texts shorter than this are kept as they are: the frame's own header eats the gain."""

_dicts: dict[tuple[int, int], zstandard.ZstdCompressionDict] = {}
_dicts_lock = threading.Lock()
_local = threading.local()


def _dictionary(codec: int, level: int = AT_REST) -> zstandard.ZstdCompressionDict:
    found = _dicts.get((codec, level))
    if found is not None:
        return found
    with _dicts_lock:
        if (codec, level) not in _dicts:
            data = (Path(__file__).with_name(CODECS[codec])).read_bytes()
            d = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
            d.precompute_compress(level=level)
            _dicts[(codec, level)] = d
        return _dicts[(codec, level)]


def _compressor(level: int) -> zstandard.ZstdCompressor:
    # a compressor is not safe to share between threads; one each per level, made once
    made: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "c", None)
    if made is None:
        made = _local.c = {}
    c = made.get(level)
    if c is None:
        c = made[level] = zstandard.ZstdCompressor(
            dict_data=_dictionary(WRITE_CODEC, level),
            write_checksum=False,
            write_content_size=True,
            write_dict_id=False,
        )
    return c


def _decompressor(codec: int) -> zstandard.ZstdDecompressor:
    found: dict[int, zstandard.ZstdDecompressor] | None = getattr(_local, "d", None)
    if found is None:
        found = _local.d = {}
    d = found.get(codec)
    if d is None:
        d = found[codec] = zstandard.ZstdDecompressor(
            dict_data=_dictionary(codec), max_window_size=MAX_TEXT
        )
    return d


def pack(text: str, level: int = AT_REST) -> str | bytes:
    """What to store for the JSON ``text``: it compressed, when that is smaller."""
    if len(text) < _MIN:
        return text
    raw = text.encode("utf-8")
    frame = _compressor(level).compress(raw)
    if len(frame) + 1 >= len(raw):
        return text
    return bytes((WRITE_CODEC,)) + frame


def pack_checkpoint(text: str, status: str) -> str | bytes:
    """What to store for an agent's state checkpoint: a running agent's at the fast
    level (its next commit replaces it, moments later), any other at rest's."""
    return pack(text, FAST if status == "running" else AT_REST)


def unpack(
    stored: str | bytes | bytearray | memoryview | None,
    where: str,
    seq: int | None = None,
    *,
    agent_id: str = "",
) -> str:
    """The text :func:`pack` was given; ``where`` (and ``seq``, an event's) names the
    row in the error if it cannot be read back (an IntegrityError: the row was
    damaged or written by a stead that knows a codec this one does not), and
    ``agent_id`` the agent its audit command names."""
    if isinstance(stored, str):
        return stored
    audit = f"`stead audit verify {agent_id}`" if agent_id else "`stead audit verify`"
    body = b"" if stored is None else bytes(stored)
    if not body or body[0] not in CODECS:
        shown = f"codec {body[0]}" if body else "an empty value"
        raise IntegrityError(
            f"{where} cannot be read: it is stored with {shown}, which this stead does not "
            "know (a newer stead wrote it, or the row was damaged); open the store with the "
            f"stead that wrote it, or run {audit}",
            seq=seq,
        )
    frame = body[1:]
    try:
        size = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise _damaged(where, seq, audit, f"not a zstandard frame ({exc})") from exc
    if size < 0 or size > MAX_TEXT:
        raise _damaged(
            where,
            seq,
            audit,
            "its frame does not state its size" if size < 0 else f"it claims {size:,} bytes",
        )
    try:
        raw = _decompressor(body[0]).decompress(frame, max_output_size=MAX_TEXT)
        if len(raw) != size:
            raise _damaged(
                where, seq, audit, f"it unpacked to {len(raw)} bytes, not the {size} it claims"
            )
        return raw.decode("utf-8")
    except (zstandard.ZstdError, UnicodeDecodeError) as exc:
        raise _damaged(where, seq, audit, str(exc)) from exc


def pack_hash(digest: str) -> str | bytes:
    """What to store for a SHA-256 in hex: its 32 bytes, half the text's size.

    Only a digest that reads back as exactly the same text (64 lowercase hex
    digits, as stead writes them) is packed; anything else is kept as it is, for
    the chain check to judge.
    """
    if len(digest) == 64:
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            return digest
        if raw.hex() == digest:
            return raw
    return digest


def unpack_hash(stored: str | bytes) -> str:
    """The hex text :func:`pack_hash` was given."""
    return stored if isinstance(stored, str) else bytes(stored).hex()


def _damaged(where: str, seq: int | None, audit: str, why: str) -> IntegrityError:
    return IntegrityError(
        f"{where} is damaged: its compressed bytes do not unpack ({why}); "
        f"run {audit} and restore the store from a backup",
        seq=seq,
    )
