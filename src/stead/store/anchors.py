"""A commit's anchor: where the journal ended and what the state row was, as committed.

Every backend stores one anchor per agent and replaces it in the transaction of
every write (creation and each append), so it always describes the last commit:

* ``version`` and ``head_hash``: where the journal ended;
* ``state_hash``: the SHA-256 of the state row written with it
  (:func:`state_digest`), so an edit of the row is seen without refolding the
  journal;
* ``verified``: the seq up to which the writer had checked the chain before it
  appended (0: not checked, as for a creation); the next activation checks only
  the events after it, which keeps resuming flat in the length of the history;
* ``public_key`` and ``signature``: the agent's Ed25519 signature over all of the
  above (:meth:`Anchor.signed_bytes`), when the writer could open the agent's
  identity key from the vault; empty otherwise (the chain is then not anchored).

The store only keeps anchors; signing and checking them is
:mod:`stead.integrity.anchoring`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..canonical import dumps, sha256_hex
from ..state import State

ANCHOR_VERSION = 1


def state_digest(state: State) -> str:
    """The hash of a state row's canonical JSON: what the anchor pins."""
    return sha256_hex(dumps(state.to_json()))


@dataclass(frozen=True, slots=True)
class Anchor:
    """What one commit left: the journal's end, the state row's hash, and a signature."""

    agent_id: str
    version: int
    head_hash: str
    state_hash: str
    verified: int = 0
    public_key: str = ""
    signature: str = ""

    @classmethod
    def of(cls, state: State, verified: int = 0) -> Anchor:
        """The unsigned anchor of a commit that leaves ``state``."""
        return cls(state.agent_id, state.version, state.head_hash, state_digest(state), verified)

    @property
    def signed(self) -> bool:
        return bool(self.signature)

    def signed_bytes(self) -> bytes:
        """The bytes the signature covers (everything but the key and the signature)."""
        return dumps(
            {
                "anchor": ANCHOR_VERSION,
                "agent_id": self.agent_id,
                "version": self.version,
                "head_hash": self.head_hash,
                "state_hash": self.state_hash,
                "verified": self.verified,
            }
        ).encode()

    def to_json(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "version": self.version,
            "head_hash": self.head_hash,
            "state_hash": self.state_hash,
            "verified": self.verified,
            "public_key": self.public_key,
            "signature": self.signature,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Anchor:
        return cls(
            str(obj["agent_id"]),
            int(obj["version"]),
            str(obj["head_hash"]),
            str(obj["state_hash"]),
            int(obj.get("verified", 0)),
            str(obj.get("public_key", "")),
            str(obj.get("signature", "")),
        )
