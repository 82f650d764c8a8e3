"""Telling people what waits for them: signed webhooks from the store's outbox.

The outbox rows are written by the store with the events that cause them
(:mod:`stead.store.webhook_rows`, :mod:`stead.notices`); this package delivers
them: :func:`deliver_due` is one pass of a worker loop, :mod:`.addresses`
keeps deliveries off the operator's own network, :mod:`.signing` signs them
the Standard Webhooks way, and :mod:`.hooks` adds, lists and removes webhooks.
"""

from __future__ import annotations

from .deliverer import Deliverer, DeliveryReport, Settings, deliver_due

__all__ = ["Deliverer", "DeliveryReport", "Settings", "deliver_due"]
