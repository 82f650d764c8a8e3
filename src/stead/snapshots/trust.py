"""Which exporters' archives an import trusts.

An archive's signature proves only that the archive matches the public key in
its header: anyone can make a key pair and sign anything. What says *who* made
an archive is an operator's list of the exporter keys they trust. A key is
written as the 64 hex digits of the Ed25519 public key that ``stead export``
prints (``ed25519:`` before it is allowed).

The list comes from ``--trust-key KEY`` (repeated) and from a file of keys,
named by ``--trusted-keys FILE`` or else by :data:`ENV`. In the file, each line
holds one key, optionally followed by a label (``KEY  alice's laptop``); ``#``
starts a comment; blank lines are skipped. When a list is configured, an
archive signed by any other key is refused before anything is written; a list
that is configured but empty refuses every archive (it fails closed, as does a
named file that cannot be read). With no list, an import still works, and says
loudly that its signer is on no list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import GovernanceError, UsageError
from ..yamlsafe import read_text

ENV = "STEAD_TRUSTED_ARCHIVE_KEYS"
"""The environment variable naming a file of trusted archive keys."""

_KEY = re.compile(r"(?:ed25519:)?([0-9a-fA-F]{64})")


def parse_key(text: str, where: str) -> str:
    """The key ``text`` names, as 64 lowercase hex digits; else a UsageError."""
    match = _KEY.fullmatch(text.strip())
    if match is None:
        shown = text if len(text) <= 80 else text[:40] + "..."
        raise UsageError(
            f"{where}: {shown!r} is not an archive key; a key is the 64 hex digits of an "
            "Ed25519 public key, as `stead export` prints it"
        )
    return match.group(1).lower()


def _read_file(path: Path) -> list[str]:
    try:
        # bounded, UTF-8, and a regular file: a fifo named here must not hang an import
        text = read_text(path, "the trusted archive keys file", UsageError)
    except UsageError as exc:
        raise UsageError(
            f"{exc}; name a readable file (--trusted-keys or ${ENV}), or unset it"
        ) from None
    keys = []
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if words:
            keys.append(parse_key(words[0], f"{path} line {n}"))
    return keys


@dataclass(frozen=True, slots=True)
class TrustedKeys:
    """The exporter keys an import accepts, and where the list came from."""

    keys: frozenset[str]
    sources: tuple[str, ...]
    files: tuple[str, ...] = ()

    @classmethod
    def configured(
        cls,
        keys: Iterable[str] = (),
        file: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> TrustedKeys | None:
        """The list given by ``keys`` and ``file`` (else :data:`ENV`); None if none is.

        A variable that is set but empty is an error, not "no list": an operator
        who meant to restrict imports must not get an import that trusts anyone.
        """
        env = os.environ if environ is None else environ
        sources: list[str] = []
        found: set[str] = set()
        given = list(keys)
        for key in given:
            found.add(parse_key(key, "--trust-key"))
        if given:
            sources.append("--trust-key")
        if file is None and ENV in env:
            file = env[ENV]
            if not file.strip():
                raise UsageError(
                    f"${ENV} is set but empty; set it to a file of trusted archive keys, "
                    "or unset it"
                )
        if file is not None:
            found.update(_read_file(Path(file)))
            sources.append(str(file))
        if not sources:
            return None
        return cls(frozenset(found), tuple(sources), (str(file),) if file is not None else ())

    def check(self, path: Path, key: str) -> None:
        """Refuse the archive at ``path``, signed by ``key``, unless the key is trusted."""
        if key in self.keys:
            return
        where = " and ".join(self.sources)
        add = f" or add it to {self.files[0]}" if self.files else ""
        raise GovernanceError(
            f"{path} is signed by key {key}, which is not one of the {len(self.keys)} "
            f"trusted archive keys ({where}); nothing was imported. If you trust whoever "
            f"exported it, import it with --trust-key {key}{add}"
        )
