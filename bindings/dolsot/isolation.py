"""The Sandbox: kernel-enforced walls around a Repl's worker (docs/sandbox.md).

``Repl(..., sandbox=Sandbox(...))`` runs every session of the Repl inside
user, mount, PID, IPC, UTS and network namespaces, a new root holding only
what Python needs (read-only) plus the policy's ``mounts`` and a size-capped
scratch directory, rlimits, Landlock and seccomp, with a scrubbed
environment. A layer the kernel or the user cannot give is an error naming
it, unless ``best_effort=True``; ``repl.sandbox_report()`` says which layers
are active.

Not the AST gate (``dolsot.sandbox``), which reads a cell's source.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Sequence

_MODES = ("read-only", "read-write", "overlay")


@dataclass(frozen=True)
class Mount:
    """The host directory (or file) ``host_path``, seen by cells at
    ``virtual_path``; ``mode`` is ``"read-only"`` (default), ``"read-write"``
    (writes reach the host) or ``"overlay"`` (a directory: reads from the host,
    writes kept inside the sandbox for the worker's life, never reaching the
    host; capped by ``Sandbox.disk_mb``)."""

    virtual_path: str
    host_path: str
    mode: str = "read-only"

    def __post_init__(self) -> None:
        for name in ("virtual_path", "host_path"):
            value = getattr(self, name)
            if not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"Mount.{name} must be a path, got {type(value).__name__}")
            object.__setattr__(self, name, os.fspath(value))
        if self.mode not in _MODES:
            raise ValueError(f"Mount.mode must be one of {', '.join(_MODES)}; got {self.mode!r}")


@dataclass(frozen=True)
class Sandbox:
    """What a sandboxed Repl walls off. Caps of 0 mean "no cap".

    ``memory_mb`` (address space per process), ``processes`` (per worker),
    ``open_files`` and ``file_size_mb`` (per process), ``disk_mb`` (the
    scratch directory, and /dev/shm), ``cpu_seconds`` (per process, over its
    life). ``env``: variables the cells see besides PATH, LANG, LC_*, TZ,
    TERM, HOME and TMPDIR (both the scratch)."""

    network: bool = False
    mounts: Sequence[Mount] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    memory_mb: int = 4096
    processes: int = 512
    open_files: int = 1024
    file_size_mb: int = 1024
    disk_mb: int = 512
    cpu_seconds: int = 0
    best_effort: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.network, bool) or not isinstance(self.best_effort, bool):
            raise TypeError("Sandbox.network and Sandbox.best_effort must be True or False")
        mounts = tuple(self.mounts)
        for m in mounts:
            if not isinstance(m, Mount):
                raise TypeError(f"Sandbox.mounts holds Mount values, got {type(m).__name__}")
        object.__setattr__(self, "mounts", mounts)
        env = dict(self.env)
        for k, v in env.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("Sandbox.env maps str to str")
        object.__setattr__(self, "env", env)
        for name in ("memory_mb", "processes", "open_files", "file_size_mb", "disk_mb",
                     "cpu_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Sandbox.{name} must be an int >= 0 (0: no cap), got {value!r}")
        # The rest of the rules are the C++ policy's own (sandbox_policy.h):
        # paths, mounts inside a read-write mount, env names, caps' bounds.
        from dolsot._dolsot import _check_sandbox

        _check_sandbox(self)

    def _as_dict(self) -> dict:
        return {
            "network": self.network,
            "mounts": [(m.virtual_path, m.host_path, m.mode) for m in self.mounts],
            "env": dict(self.env),
            "memory_mb": self.memory_mb,
            "processes": self.processes,
            "open_files": self.open_files,
            "file_size_mb": self.file_size_mb,
            "disk_mb": self.disk_mb,
            "cpu_seconds": self.cpu_seconds,
            "best_effort": self.best_effort,
        }


@dataclass(frozen=True)
class SandboxLayer:
    name: str
    active: bool
    detail: str


@dataclass(frozen=True)
class SandboxReport:
    """The layers a sandboxed worker runs under (``repl.sandbox_report()``)."""

    layers: tuple[SandboxLayer, ...]

    def active(self, name: str) -> bool:
        return any(layer.name == name and layer.active for layer in self.layers)

    def __str__(self) -> str:
        return "\n".join(
            f"  [{'on ' if layer.active else 'off'}] {layer.name}: {layer.detail}"
            for layer in self.layers
        )


__all__ = ["Mount", "Sandbox", "SandboxLayer", "SandboxReport"]
