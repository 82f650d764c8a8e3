"""The checkout."""

from shop.pricing import calc_total


def checkout(prices):
    return {"items": len(prices), "total": calc_total(prices)}
