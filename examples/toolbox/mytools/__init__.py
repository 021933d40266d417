"""mytools: a small, well-annotated example toolbox for dolsot.

It follows the toolbox contract: ``__all__`` declares the public surface, a
``help()`` callable documents it, exceptions carry an int ``exit_code``, and
every public function has real annotations (the type gate checks cells
against them). Data is an in-memory orders table, so nothing touches disk.
"""

import inspect
from typing import Any

__all__ = [
    "ToolError",
    "NotFound",
    "add",
    "load",
    "tables",
    "top",
    "total",
    "help",
]


class ToolError(Exception):
    """A toolbox failure: bad input to a mytools function (exit code 3)."""

    exit_code = 3


class NotFound(ToolError):
    """A name that does not exist, e.g. an unknown table (exit code 4)."""

    exit_code = 4


_TABLES: dict[str, list[dict[str, Any]]] = {
    "orders": [
        {"id": 1, "customer": "ana", "item": "kimchi", "qty": 2, "price": 7.5},
        {"id": 2, "customer": "bo", "item": "dolsot", "qty": 1, "price": 39.0},
        {"id": 3, "customer": "ana", "item": "rice", "qty": 5, "price": 3.2},
        {"id": 4, "customer": "cy", "item": "gochujang", "qty": 3, "price": 5.9},
        {"id": 5, "customer": "bo", "item": "sesame oil", "qty": 2, "price": 8.4},
        {"id": 6, "customer": "dee", "item": "dolsot", "qty": 2, "price": 39.0},
    ],
    "customers": [
        {"name": "ana", "city": "Seoul"},
        {"name": "bo", "city": "Busan"},
        {"name": "cy", "city": "Incheon"},
        {"name": "dee", "city": "Daegu"},
    ],
}


def add(a: int, b: int) -> int:
    """Add two ints: add(1, 2) -> 3."""
    return a + b


def tables() -> list[str]:
    """The names of the tables load() knows, sorted."""
    return sorted(_TABLES)


def load(name: str) -> list[dict[str, Any]]:
    """A fresh copy of table `name` as a list of row dicts.

    Raises NotFound (exit code 4) for an unknown table; see tables().
    """
    if not isinstance(name, str):
        raise ToolError(f"load: name must be a str, got {type(name).__name__}")
    if name not in _TABLES:
        raise NotFound(f"no table {name!r}; known tables: {', '.join(tables())}")
    return [dict(row) for row in _TABLES[name]]


def top(rows: list[dict[str, Any]], n: int = 3, key: str = "qty") -> list[dict[str, Any]]:
    """The `n` rows with the largest `key` (default "qty"), largest first.

    Raises ToolError (exit code 3) when n is negative or a row lacks `key`.
    """
    if n < 0:
        raise ToolError(f"top: n must be >= 0, got {n}")
    missing = [i for i, row in enumerate(rows) if key not in row]
    if missing:
        raise ToolError(f"top: row {missing[0]} has no column {key!r}")
    return sorted(rows, key=lambda row: row[key], reverse=True)[:n]


def total(rows: list[dict[str, Any]], column: str = "qty") -> float:
    """The sum of `column` over `rows`; for orders, column="price" sums unit prices.

    Raises ToolError (exit code 3) when a row lacks the column.
    """
    out = 0.0
    for i, row in enumerate(rows):
        if column not in row:
            raise ToolError(f"total: row {i} has no column {column!r}")
        out += float(row[column])
    return out


def help(topic: str | None = None) -> str:  # noqa: A001 - the toolbox contract's name
    """The cheat-sheet, or the signature and doc of one function: help("top")."""
    if topic is None:
        lines = ["mytools: an in-memory orders toolbox. Functions:"]
        for name in __all__:
            obj = globals()[name]
            if inspect.isfunction(obj):
                summary = (inspect.getdoc(obj) or "").splitlines()[0:1]
                lines.append(f"  {name}{inspect.signature(obj)}  {''.join(summary)}")
        lines.append("Errors: ToolError (exit code 3), NotFound (exit code 4).")
        lines.append('help("name") shows one function in full.')
        return "\n".join(lines)
    if topic not in __all__:
        raise NotFound(f"help: no topic {topic!r}; topics: {', '.join(__all__)}")
    obj = globals()[topic]
    if inspect.isclass(obj):
        return f"class {topic}: {inspect.getdoc(obj) or ''}"
    return f"{topic}{inspect.signature(obj)}\n\n{inspect.getdoc(obj) or ''}"
