"""``stead serve``: the HTTP API and the web page for people, over one store.

:func:`application` (:mod:`.asgi`) puts the pieces together. The
names here are looked up when first used, so that what needs no web
framework (:mod:`.auth`, which mints tokens for the command line and the
demo) can be imported without the ``server`` extra installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..extras import need

if TYPE_CHECKING:
    from .app import Server
    from .asgi import application, endpoints

__all__ = ["Server", "application", "endpoints"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    need("starlette", "server", "stead serve")
    from . import asgi

    return getattr(asgi, name)
