"""dolsot.ray: live sessions spread over a Ray cluster (the extra dolsot[ray]).

``from dolsot.ray import SessionPool``; Ray is imported on first use, so this
module imports without it and says what to install when it is missing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SessionPool"]


def __getattr__(name: str) -> Any:
    if name in ("SessionPool", "PoolResult", "ActorStats"):
        try:
            from dolsot import ray_pool
        except ImportError as error:
            if error.name != "ray" and not str(error.name).startswith("ray."):
                raise
            raise ImportError(
                "dolsot.ray needs Ray: pip install 'dolsot[ray]' (ray==2.60.0)"
            ) from error
        return getattr(ray_pool, name)
    raise AttributeError(f"module 'dolsot.ray' has no attribute {name!r}")
