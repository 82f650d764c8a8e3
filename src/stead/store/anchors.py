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
* ``spec_hash``: the digest of the agent's spec as its row holds it
  (:func:`spec_digest`), which the writer had checked against what the agent was
  made with; so an edit of the ``spec`` column is seen without reading the journal;
* ``epoch``: the lease epoch the commit was written under, so a lease whose
  epoch was set back (and would hand tools a fencing token already used) is seen;
* ``public_key`` and ``signature``: the agent's Ed25519 signature over all of the
  above (:meth:`Anchor.signed_fields`), when the writer could open the agent's
  identity key from the vault; empty otherwise (the chain is then not anchored).

Anchors stored before ``spec_hash`` and ``epoch`` existed have them empty (and
0); the signature covers each only when it is set, so those still verify.

The store only keeps anchors; signing and checking them is
:mod:`stead.integrity.anchoring`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..canonical import digest, dumps, sha256_hex
from ..state import State

ANCHOR_VERSION = 1
"""The version of an anchor without ``spec_hash`` or ``epoch``: signed as stored before."""
SEALING_VERSION = 2
"""The version of an anchor that also pins the spec and the lease epoch."""
_STORED = (
    "agent_id", "version", "head_hash", "state_hash", "verified", "spec_hash", "epoch",
    "public_key", "signature",
)  # fmt: skip


def state_digest(state: State) -> str:
    """The hash of a state row's canonical JSON: what the anchor pins."""
    return digest(state.to_json())


def spec_digest(spec: Mapping[str, Any]) -> str:
    """The hash of a spec's canonical JSON: what the agent's first event and its
    anchors pin, so that the ``spec`` column cannot be edited unnoticed."""
    return digest(dict(spec))


def state_row(state: State, anchor: Anchor) -> str:
    """The text a backend stores as the state row of the commit ``anchor`` describes.

    The text the anchor's hash was taken over, when it carries it: so the row
    holds exactly the bytes that were hashed, and a commit serialises its
    state once, not twice.
    """
    return anchor.state_json or dumps(state.to_json())


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
    spec_hash: str = ""
    epoch: int = 0
    # the canonical JSON ``state_hash`` was taken over (see :func:`state_row`);
    # carried to the store with the commit, never stored as part of the anchor
    state_json: str = field(default="", repr=False, compare=False)

    @classmethod
    def of(cls, state: State, verified: int = 0, *, spec_hash: str = "", epoch: int = 0) -> Anchor:
        """The unsigned anchor of a commit that leaves ``state``."""
        text = dumps(state.to_json())
        return cls(
            state.agent_id, state.version, state.head_hash, sha256_hex(text), verified,
            spec_hash=spec_hash, epoch=epoch, state_json=text,
        )  # fmt: skip

    @property
    def signed(self) -> bool:
        return bool(self.signature)

    def signed_fields(self) -> dict[str, Any]:
        """What the signature covers (everything but the key and the signature).

        ``spec_hash`` and ``epoch`` only when set: an anchor stored before they
        existed is signed over the fields it had, and one that has them cannot
        lose them without its signature failing.
        """
        fields: dict[str, Any] = {
            "anchor": ANCHOR_VERSION,
            "agent_id": self.agent_id,
            "version": self.version,
            "head_hash": self.head_hash,
            "state_hash": self.state_hash,
            "verified": self.verified,
        }
        if self.spec_hash or self.epoch:
            fields.update(anchor=SEALING_VERSION, spec_hash=self.spec_hash, epoch=self.epoch)
        return fields

    def to_json(self) -> dict[str, Any]:
        """The stored fields (not the state text carried with a commit)."""
        return {k: getattr(self, k) for k in _STORED}
