"""Prices for the shop."""

TAX_RATE = 0.2


def calc_total(prices):
    subtotal = sum(prices)
    return round(subtotal * (1 + TAX_RATE), 2)
