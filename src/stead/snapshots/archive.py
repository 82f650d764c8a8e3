"""The portable archive of one agent: a versioned, checksummed, signed file.

An archive is a POSIX tar file whose members are, in this order::

    stead-archive.json        the header (plain JSON, below)
    journal.jsonl.zst         every event of the agent, one JSON object a line
    state.json.zst            the agent's state at the exported version
    blobs/<sha256>.zst        the content of each file of that state's workspace

Every member but the header is a zstandard frame. The header names the format
and its version, the agent (record and head), and, for every other member, its
SHA-256 and size; it is signed with the agent's Ed25519 key, whose public half
is in the header and must be the one the journal's ``identity_created`` event
gives. So a flipped byte anywhere is caught by a checksum, and a header edited
to match is caught by the signature.

:func:`read_archive` checks all of that, and that the journal's hash chain
holds and folds to the state, before it returns anything: a corrupt,
truncated, tampered or unknown archive raises :class:`~stead.errors.ArchiveError`
naming what is wrong. Nothing in an archive is pickled or executed.

Format versions: 1 (this one). A reader keeps reading every version it ever
wrote; ``tests/golden/`` holds an archive of each.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ..canonical import dumps, loads
from ..errors import ArchiveError
from ..journal import Event, Kind, verify_chain
from ..state import State, fold

FORMAT = "stead-archive"
VERSION = 1
HEADER = "stead-archive.json"
JOURNAL = "journal.jsonl.zst"
STATE = "state.json.zst"
MAX_MEMBER_BYTES = 4 * 1024**3
"""No member of an archive stead writes is larger; a bigger one is refused unread."""


@dataclass(frozen=True, slots=True)
class Archive:
    """A verified archive, read into memory."""

    header: dict[str, Any]
    events: list[Event]
    state: State
    blobs: dict[str, bytes]

    @property
    def archive_id(self) -> str:
        return str(self.header["archive_id"])

    @property
    def move(self) -> bool:
        return bool(self.header["move"])


def _pack(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(data)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def signed_part(header: Mapping[str, Any]) -> bytes:
    return dumps({k: v for k, v in header.items() if k != "signature"}).encode()


def write_archive(
    path: Path,
    header: Mapping[str, Any],
    events: Iterable[Event],
    state: State,
    blob: Callable[[str], bytes],
    private_key_hex: str,
) -> str:
    """Write the archive atomically (temporary file, fsync, rename); return its SHA-256.

    ``header`` holds the caller's fields (archive id, agent, move…); the format,
    version, parts and signature are added here.
    """
    parts: dict[str, bytes] = {
        JOURNAL: _pack(b"".join(dumps(e.to_json()).encode() + b"\n" for e in events)),
        STATE: _pack(dumps(state.to_json()).encode()),
    }
    for digest in sorted(set(state.manifest.values())):
        parts[f"blobs/{digest}.zst"] = _pack(blob(digest))
    full = {
        **header,
        "format": FORMAT,
        "version": VERSION,
        "parts": {name: {"sha256": _sha(data), "bytes": len(data)} for name, data in parts.items()},
    }
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(private_key_hex))
    full["signature"] = key.sign(signed_part(full)).hex()
    tmp = path.with_name(f".{path.name}.partial")
    with open(tmp, "wb") as fh:
        with tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
            _add(tar, HEADER, dumps(full).encode())
            for name, data in parts.items():
                _add(tar, name, data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return _sha(path.read_bytes())


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.mtime = 0  # the same content makes the same bytes
    tar.addfile(info, io.BytesIO(data))


def read_archive(path: Path) -> Archive:
    """Read and verify an archive; raise ArchiveError naming the first thing wrong."""
    members = _members(path)
    if HEADER not in members:
        raise ArchiveError(f"{path} is not a stead archive: it has no {HEADER}")
    try:
        header = loads(members[HEADER].decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise ArchiveError(f"{path}: its header is not valid JSON ({exc})") from None
    _check_header(path, header)
    parts: Mapping[str, Mapping[str, Any]] = header["parts"]
    extra = sorted(set(members) - set(parts) - {HEADER})
    if extra:
        raise ArchiveError(f"{path} holds members its header does not list: {', '.join(extra)}")
    for name, expected in parts.items():
        data = members.get(name)
        if data is None:
            raise ArchiveError(f"{path} is missing {name}, which its header lists (truncated?)")
        if len(data) != expected["bytes"] or _sha(data) != expected["sha256"]:
            raise ArchiveError(
                f"{path}: {name} does not match its checksum in the header; the archive "
                "is damaged or was changed after it was written"
            )
    _check_signature(path, header)
    events = _journal(path, _unpack(path, JOURNAL, members[JOURNAL]))
    state = State.from_json(loads(_unpack(path, STATE, members[STATE]).decode()))
    _check_history(path, header, events, state)
    blobs: dict[str, bytes] = {}
    for digest in sorted(set(state.manifest.values())):
        name = f"blobs/{digest}.zst"
        if name not in members:
            raise ArchiveError(f"{path} lacks the content of workspace blob {digest}")
        content = _unpack(path, name, members[name])
        if _sha(content) != digest:
            raise ArchiveError(f"{path}: blob {digest} does not match its hash")
        blobs[digest] = content
    return Archive(header, events, state, blobs)


def _members(path: Path) -> dict[str, bytes]:
    try:
        with tarfile.open(path, mode="r:") as tar:
            found: dict[str, bytes] = {}
            for info in tar:
                if not info.isfile() or info.size > MAX_MEMBER_BYTES:
                    raise ArchiveError(f"{path}: member {info.name!r} is not a plain file")
                if info.name in found:
                    raise ArchiveError(f"{path}: member {info.name!r} appears twice")
                fh = tar.extractfile(info)
                assert fh is not None
                found[info.name] = fh.read()
            return found
    except FileNotFoundError:
        raise ArchiveError(f"no archive at {path}") from None
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(
            f"{path} is truncated or not a stead archive ({exc}); nothing was imported"
        ) from None


def _check_header(path: Path, header: Any) -> None:
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ArchiveError(f"{path} is not a stead archive (its header names no {FORMAT!r})")
    version = header.get("version")
    if not isinstance(version, int) or version < 1:
        raise ArchiveError(f"{path}: its format version {version!r} is not one stead writes")
    if version > VERSION:
        raise ArchiveError(
            f"{path} has archive format version {version}, but this stead reads versions up "
            f"to {VERSION}; upgrade stead to import it"
        )
    missing = [
        k
        for k in ("archive_id", "agent", "head_hash", "parts", "public_key", "signature", "move")
        if k not in header
    ]
    if missing:
        raise ArchiveError(f"{path}: its header lacks {', '.join(missing)}")


def _check_signature(path: Path, header: Mapping[str, Any]) -> None:
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(header["public_key"]))
        key.verify(bytes.fromhex(header["signature"]), signed_part(header))
    except (InvalidSignature, ValueError, TypeError):
        raise ArchiveError(
            f"{path}: its signature does not verify with the key it names; the header "
            "was changed after it was signed"
        ) from None


def _unpack(path: Path, name: str, data: bytes) -> bytes:
    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_MEMBER_BYTES)
    except zstandard.ZstdError as exc:
        raise ArchiveError(f"{path}: {name} does not decompress ({exc})") from None


def _journal(path: Path, text: bytes) -> list[Event]:
    events = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            events.append(Event.from_json(loads(line.decode())))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise ArchiveError(f"{path}: journal line {n} is not an event ({exc})") from None
    return events


def _check_history(
    path: Path, header: Mapping[str, Any], events: list[Event], state: State
) -> None:
    agent = header["agent"]["agent_id"]
    if not events or any(e.agent_id != agent for e in events):
        raise ArchiveError(f"{path}: its journal is empty or not agent {agent}'s")
    chain = verify_chain(events)
    if not chain.ok:
        raise ArchiveError(f"{path}: journal event {chain.bad_seq} does not verify: {chain.reason}")
    if chain.head_hash != header["head_hash"] or state.head_hash != header["head_hash"]:
        raise ArchiveError(f"{path}: the journal, the state and the header end at different heads")
    if fold(events).to_json() != state.to_json():
        raise ArchiveError(f"{path}: the state is not what its journal folds to")
    keys = [e.data["public_key"] for e in events if e.kind == Kind.IDENTITY_CREATED]
    if not keys or keys[-1] != header["public_key"]:
        raise ArchiveError(
            f"{path}: it is signed with a key that is not agent {agent}'s own (its journal "
            "names another, or none)"
        )
