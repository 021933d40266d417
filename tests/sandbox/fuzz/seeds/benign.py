import json
from dataclasses import dataclass

@dataclass
class P:
    x: int
    def __repr__(self):
        return f"P({self.x!r:>{w}})"

rows = [P(i) for i in range(3) if (n := i)]
print("{0.x}".format(rows[0]), tb.fetch(url=1))
