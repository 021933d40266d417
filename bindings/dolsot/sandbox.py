"""The AST gate: reject dangerous cells before they run.

``check_ast(code, policy=None)`` parses a cell with tree-sitter-python and
returns a list of :class:`Finding` (empty means allowed). Pass
``gate=dolsot.sandbox.check_ast`` (or an :class:`AstGate` with your own
:class:`Policy`) to a backend to reject cells before they run.

This raises the bar; it is no guarantee. In-process CPython cannot be
sandboxed: the process boundary and the operating system are the real wall.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from dolsot._dolsot import _sandbox

Finding = _sandbox.Finding
Policy = _sandbox.Policy
check_ast = _sandbox.check_ast

DEFAULT_POLICY = Policy()
DEFAULT_ALLOWED_MODULES: frozenset[str] = DEFAULT_POLICY.allowed_modules
DEFAULT_ALLOWED_DUNDERS: frozenset[str] = DEFAULT_POLICY.allowed_dunders
RULES: dict[str, str] = dict(_sandbox.rules())
"""rule id -> one-line summary, for every rule the gate applies."""


def format_findings(findings: Iterable[Finding]) -> str:
    """One ``line L, col C: [rule] message`` line per finding."""
    return "\n".join(str(f) for f in findings)


class AstGate:
    """A gate callable bound to one policy: ``gate(code) -> list[Finding]``.

    Backends may read ``.policy`` to run the same check without the GIL.
    """

    __slots__ = ("policy",)

    def __init__(
        self,
        policy: Policy | None = None,
        *,
        toolboxes: Mapping[str, object] | Sequence[str] | None = None,
    ) -> None:
        if policy is not None and toolboxes is not None:
            raise TypeError("pass either a policy or toolboxes, not both")
        self.policy = policy if policy is not None else Policy(toolboxes=toolboxes)

    def __call__(self, code: str | bytes) -> list[Finding]:
        return check_ast(code, self.policy)

    def __repr__(self) -> str:
        return f"AstGate({self.policy!r})"


__all__ = [
    "AstGate",
    "DEFAULT_ALLOWED_DUNDERS",
    "DEFAULT_ALLOWED_MODULES",
    "DEFAULT_POLICY",
    "Finding",
    "Policy",
    "RULES",
    "check_ast",
    "format_findings",
]
