"""The portable archive of one agent: a versioned, checksummed, signed file.

An archive is one file, written and read front to back::

    stead-archive 1\n                      magic and format version
    <name> <length>\n<bytes>\n             a member, repeated, in this order:
        stead-archive.json                 the header (plain JSON, below)
        journal.jsonl.zst                  every event of the agent, a JSON object a line
        state.json.zst                     the agent's state at the exported version
        blobs/<sha256>.zst                 the content of each file of its workspace
    sha256 <hex>\n                         the SHA-256 of every byte before this line

Every member but the header is a zstandard frame. The header names the agent
(record and head) and, for every other member, its SHA-256 and size; it is
signed with the agent's Ed25519 key, whose public half is in the header and must
be the one the journal's ``identity_created`` event gives. So a flipped byte
anywhere is caught by the file's checksum, a member swapped for another by the
member checksums, and a header rewritten to match by the signature.

:func:`read_archive` checks all of that, and that the journal's hash chain
holds and folds to the state, before it returns anything: a corrupt,
truncated, tampered or unknown archive raises :class:`~stead.errors.ArchiveError`
naming what is wrong. Nothing in an archive is pickled or executed. A valid
signature proves only that the archive matches the key it carries, so every
name that becomes a file or folder (workspace paths, blob hashes, the tenant)
is checked as well: one that could lead outside its folder raises
:class:`~stead.errors.PathEscape`.

Format versions: 1 (this one). A reader keeps reading every version it ever
wrote; ``tests/golden/`` holds an archive of each.
"""

from __future__ import annotations

import hashlib
import os
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

from .. import storefiles
from ..canonical import dumps, loads
from ..errors import ArchiveError, PathEscape
from ..ids import is_id
from ..journal import Event, Kind, verify_chain
from ..sandbox.paths import check_manifest
from ..state import State, fold

FORMAT = "stead-archive"
VERSION = 1
HEADER = "stead-archive.json"
JOURNAL = "journal.jsonl.zst"
STATE = "state.json.zst"
MAGIC = f"stead-archive {VERSION}\n".encode()
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
    before_publish: Callable[[str], None] | None = None,
) -> str:
    """Write the archive atomically (temporary file, fsync, rename); return its SHA-256.

    ``header`` holds the caller's fields (archive id, agent, move…); the format,
    version, parts and signature are added here. ``before_publish`` is called
    with the archive's SHA-256 once the whole file is durable under its
    temporary name (``.NAME.partial`` beside ``path``) and before it is renamed
    into place; if it raises, nothing is published and the temporary file is
    left for the caller to keep or remove (only it knows whether what it did
    took effect). A move uses it to retire the source in between, so that a
    crash can leave the source retired and the complete archive under its
    temporary name, but never both a runnable source and a published archive.
    """
    storefiles.refuse_held(path, "the archive to write,")  # renamed over it, it would be lost
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
    body = bytearray(MAGIC)
    for name, data in [(HEADER, dumps(full).encode()), *parts.items()]:
        body += f"{name} {len(data)}\n".encode() + data + b"\n"
    body += f"sha256 {_sha(bytes(body))}\n".encode()
    digest = _sha(bytes(body))
    tmp = partial_path(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if before_publish is not None:
        before_publish(digest)
    tmp.replace(path)
    _fsync_dir(path.parent)
    return digest


def partial_path(path: Path) -> Path:
    """Where an archive bound for ``path`` is written before it is renamed there."""
    return path.with_name(f".{path.name}.partial")


def _fsync_dir(folder: Path) -> None:
    # the rename is durable only once the folder's entry is
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    try:
        stored = loads(_unpack(path, STATE, members[STATE]).decode())
    except ValueError as exc:
        raise ArchiveError(f"{path}: its state is not JSON ({exc})") from None
    if not isinstance(stored, dict):
        raise ArchiveError(f"{path}: its state is not a JSON object")
    state = _check_history(path, header, events, stored)
    _check_names(path, header, state)
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


_TAIL = 4096
"""Bytes at the end of a file searched for its checksum line (72 bytes when whole)."""


def _members(path: Path) -> dict[str, bytes]:
    """The archive's members by name, once its whole-file checksum holds.

    The file is read twice, never held whole: its checksum is taken a chunk at a
    time, so a damaged or made-up file (one sent over HTTP, say) costs no memory;
    then each member is read on its own.
    """
    storefiles.refuse_held(path, "the archive")
    try:
        with path.open("rb") as f:
            return _read_members(path, f, os.fstat(f.fileno()).st_size)
    except FileNotFoundError:
        raise ArchiveError(f"no archive at {path}") from None
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror}") from None


def _read_members(path: Path, f: Any, size: int) -> dict[str, bytes]:
    if f.read(len(b"stead-archive ")) != MAGIC.split(b" ")[0] + b" ":
        raise ArchiveError(f"{path} is not a stead archive (it does not start with {MAGIC!r})")
    f.seek(max(0, size - _TAIL))
    tail = f.read()
    cut = tail[:-1].rfind(b"\n")
    trailer = tail[cut + 1 : -1]
    if not tail.endswith(b"\n") or cut < 0 or not trailer.startswith(b"sha256 "):
        raise ArchiveError(f"{path} is truncated: it does not end with its checksum line")
    body_len = size - len(trailer) - 1  # through the newline before the checksum line
    digest = hashlib.sha256()
    f.seek(0)
    left = body_len
    while left > 0:
        chunk = f.read(min(left, 1 << 20))
        if not chunk:
            break
        digest.update(chunk)
        left -= len(chunk)
    if trailer[7:].decode("ascii", "replace") != digest.hexdigest():
        raise ArchiveError(
            f"{path} does not match its checksum: it is damaged, truncated or was changed "
            "after it was written; nothing was imported"
        )
    f.seek(0)
    first_line = f.readline(_TAIL)
    version_word = first_line[len(b"stead-archive ") : -1]
    if version_word != b"1":
        raise ArchiveError(
            f"{path} has archive format version {version_word.decode('ascii', 'replace')}, "
            f"but this stead reads versions up to {VERSION}; upgrade stead to import it"
        )
    found: dict[str, bytes] = {}
    at = len(first_line)
    while at < body_len:
        line = f.readline(_TAIL)
        name, _, count = line[:-1].decode("utf-8", "replace").rpartition(" ")
        valid = line.endswith(b"\n") and count.isascii() and count.isdigit()
        if not valid or not name or name in found:
            raise ArchiveError(f"{path}: a member's framing is not valid at byte {at}")
        start = at + len(line)
        stop = start + int(count)
        data = f.read(int(count)) if stop < body_len else b""
        if stop >= body_len or len(data) != int(count) or f.read(1) != b"\n":
            raise ArchiveError(f"{path}: member {name!r} does not end where its length says")
        found[name] = data
        at = stop + 1
    return found


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
    if not isinstance(header["agent"], dict):
        raise ArchiveError(f"{path}: its header does not describe the agent")


def _check_signature(path: Path, header: Mapping[str, Any]) -> None:
    try:
        key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(header["public_key"]))
        key.verify(bytes.fromhex(header["signature"]), signed_part(header))
    except (InvalidSignature, ValueError, TypeError):
        raise ArchiveError(
            f"{path}: its signature does not verify with the key it names; the header "
            "was changed after it was signed"
        ) from None


def _check_names(path: Path, header: Mapping[str, Any], state: State) -> None:
    """Refuse an archive naming a file or folder outside where it will be written.

    A valid signature proves only that the archive matches the key it carries,
    and anyone can make a key: so every workspace path must be a plain relative
    path, every blob a SHA-256, and the tenant (a folder name) a short id,
    whatever the signature says. :class:`~stead.errors.PathEscape` is bad
    input (exit 2), not damage.
    """
    refused = "; the archive was refused and nothing was imported"
    try:
        check_manifest(state.manifest, f"{path}: its workspace manifest")
    except PathEscape as exc:
        raise PathEscape(f"{exc}{refused}") from None
    tenant = header["agent"].get("tenant")
    if not is_id(tenant):  # the rule every tenant name follows (it names folders)
        raise PathEscape(
            f"{path}: the archive names tenant {tenant!r}, which is not a plain "
            f"folder name (a short id){refused}"
        )


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
    path: Path, header: Mapping[str, Any], events: list[Event], stored: Mapping[str, Any]
) -> State:
    """Check the journal and the archived state against each other; return the fold.

    The state compared is every field the archiving stead wrote: one written
    before a field existed is still read (the journal is the truth, and the
    returned state is its fold by this stead).
    """
    agent = header["agent"]["agent_id"]
    if not events or any(e.agent_id != agent for e in events):
        raise ArchiveError(f"{path}: its journal is empty or not agent {agent}'s")
    chain = verify_chain(events)
    if not chain.ok:
        raise ArchiveError(f"{path}: journal event {chain.bad_seq} does not verify: {chain.reason}")
    if chain.head_hash != header["head_hash"] or stored.get("head_hash") != header["head_hash"]:
        raise ArchiveError(f"{path}: the journal, the state and the header end at different heads")
    state = fold(events)
    folded = state.to_json()
    if any(key not in folded or folded[key] != value for key, value in stored.items()):
        raise ArchiveError(f"{path}: the state is not what its journal folds to")
    keys = [e.data["public_key"] for e in events if e.kind == Kind.IDENTITY_CREATED]
    if not keys or keys[-1] != header["public_key"]:
        raise ArchiveError(
            f"{path}: it is signed with a key that is not agent {agent}'s own (its journal "
            "names another, or none)"
        )
    return state
