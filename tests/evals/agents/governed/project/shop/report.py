"""Daily sales report."""
from shop.pricing import calc_total
def daily_report(orders):
    totals=[calc_total(o) for o in orders]
    return {"orders":len(orders),"revenue":round(sum(totals),2)}
