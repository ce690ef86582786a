"""Names shared by the settings, the session and replay (kept import-free on purpose)."""

from __future__ import annotations

from typing import Literal

Mode = Literal["deterministic", "full", "live", "record"]
MODES: tuple[Mode, ...] = ("deterministic", "full", "live", "record")
REPLAY_MODES: tuple[Mode, ...] = ("deterministic", "full")

RecordMode = Literal["all", "missing", "none"]
RECORD_MODES: tuple[RecordMode, ...] = ("all", "missing", "none")
"""Which cases record mode records, as vcrpy's record modes: every one (all), those whose
journal is missing or older than their files (missing), none (cases with a journal replay)."""

MatchLevel = Literal["strict", "default"]
MATCH_LEVELS: tuple[MatchLevel, ...] = ("default", "strict")

MAX_REPEAT = 10_000
"""The most attempts per case a run accepts: beyond it, collection alone would take minutes
and memory without end (a typo such as `repeat: 1000000000` must be an error, not a hang)."""


WORLD_CONCURRENCY = 4
"""World-backed attempts in flight per process by default (nodeval_world_concurrency)."""


def attempt_mode(mode: Mode, record_mode: RecordMode) -> Mode:
    """The mode the attempts run in: the run's, but record mode's `none` records nothing
    and replays the journals (vcrpy's playback only)."""
    if mode == "record" and record_mode == "none":
        return "deterministic"
    return mode
