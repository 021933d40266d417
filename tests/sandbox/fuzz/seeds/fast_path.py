import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class Order:
    id: int
    customer: str
    items: list = field(default_factory=list)
    total: float = 0.0

    def __post_init__(self):
        self.total = round(sum(p * q for p, q in self.items), 2)

    def __repr__(self):
        return f"Order({self.id}, {self.customer!r}, total={self.total:.2f})"


raw = tb.fetch_orders(since="2026-01-01", limit=500)
orders = [Order(r["id"], r["customer"], [(i["price"], i["qty"]) for i in r["items"]])
          for r in raw if r.get("status") != "cancelled"]

by_customer = defaultdict(list)
for order in orders:
    by_customer[order.customer].append(order)

spend = {name: sum(o.total for o in group) for name, group in by_customer.items()}
top = sorted(spend.items(), key=lambda kv: kv[1], reverse=True)[:10]
counts = Counter(len(o.items) for o in orders)


def percentile(values, q):
    ordered = sorted(values)
    if not ordered:
        return math.nan
    k = (len(ordered) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


summary = {
    "orders": len(orders),
    "p50": percentile([o.total for o in orders], 0.5),
    "p90": percentile([o.total for o in orders], 0.9),
    "top": top,
}
print(json.dumps(summary, indent=2, default=str))
summary
