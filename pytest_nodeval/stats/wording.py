"""How the gates and tables write numbers: percentage points, percents, lists of case ids."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["id_list", "limit_pp", "percent", "pp"]


def pp(fraction: float | None, signed: bool = False) -> str:
    """A fraction as percentage points, "9.2 pp" ("?" when unknown)."""
    if fraction is None:
        return "?"
    return f"{fraction * 100:{'+' if signed else ''}.1f} pp"


def limit_pp(fraction: float) -> str:
    """A threshold as percentage points without trailing zeros, "20 pp"."""
    return f"{fraction * 100:g} pp"


def percent(fraction: float | None) -> str:
    """A rate as a percentage, "80.8%" ("?" when unknown)."""
    return "?" if fraction is None else f"{fraction * 100:.1f}%"


def id_list(case_ids: Sequence[str], limit: int = 5) -> str:
    """The first few case ids, and how many more there are."""
    shown = ", ".join(case_ids[:limit])
    return shown + (f" (+{len(case_ids) - limit} more)" if len(case_ids) > limit else "")
