"""Names shared by the settings, the session and replay (kept import-free on purpose)."""

from __future__ import annotations

from typing import Literal

Mode = Literal["deterministic", "full", "live", "record"]
MODES: tuple[Mode, ...] = ("deterministic", "full", "live", "record")
REPLAY_MODES: tuple[Mode, ...] = ("deterministic", "full")

MatchLevel = Literal["strict", "default"]
MATCH_LEVELS: tuple[MatchLevel, ...] = ("default", "strict")
