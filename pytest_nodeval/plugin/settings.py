"""The run's settings, made of `resolve.resolve`'s checked values when first used.

A pytest run that collects no nodeval case never makes them, nor imports this module: creating
this frozen dataclass of 30 fields compiles its generated methods, about 13 M instructions
(issue 33, benchmarks/README.md). `keys.settings_of` makes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..modes import WORLD_CONCURRENCY, MatchLevel, Mode, RecordMode, attempt_mode


@dataclass(frozen=True, slots=True)
class Settings:
    mode: Mode
    repeat: int
    repeat_from_cli: bool
    match: MatchLevel
    world: str
    report_dir: Path
    case_roots: tuple[Path, ...]
    profile: str | None
    baseline: Path | None
    update_baseline: bool
    history: Path | None = None
    judge: Any = None
    """The default judge model (ProviderSpec) from nodeval_judge."""
    judge_reuse: bool = False
    baseline_from_cli: bool = False
    record_force: bool = False
    """Record mode: install recordings that failed their checks too (--nodeval-record-force)."""
    record_mode: RecordMode = "all"
    """Record mode: which cases record (--nodeval-record-mode, ini nodeval_record_mode):
    all; missing (those whose journal is missing or stale, see case/digests.py); none."""
    adaptive: bool = False
    """Adaptive repeats asked for (--nodeval-adaptive, profile or ini); they act only with a
    baseline in a live, full or record run (plugin/adaptive.py says why not otherwise)."""
    gate_policy: dict[str, float] = field(default_factory=dict)
    """Gate thresholds set in ini/pyproject (the rest keep GatePolicy's defaults)."""
    progress: str = "auto"
    """How the controller shows a run's progress: auto, tty (a live line), plain (a line per
    interval) or off."""
    progress_interval_s: float = 30.0
    """Seconds between plain progress lines (nodeval_progress_interval)."""
    prices: dict[str, Any] = field(default_factory=dict)
    """Per-model price overrides (runner.cost.Price) from nodeval_prices, ahead of genai-prices."""
    max_cost: float | None = None
    """--nodeval-max-cost / nodeval_max_cost: USD the run may spend before it stops starting
    attempts."""
    limits: tuple[Any, ...] = ()
    """The rate limits of nodeval_limits (agent.limits.LimitRule), shared by the run's processes."""
    concurrency: int = 1
    """Attempts in flight per process (--nodeval-concurrency): live, record and full attempts
    run ahead of their tests in a pool (plugin/ahead.py); 1 runs each inside its test."""
    world_concurrency: int = WORLD_CONCURRENCY
    """Of those, how many may hold a world at once (nodeval_world_concurrency)."""
    sources: dict[str, str] = field(default_factory=dict)
    """Where each resolved value came from ("--repeat", "profile 'release'", "ini", "default")."""
    unused_repeat: str | None = None
    """Record mode: the run-wide repeat above 1 it did not use, and where it came from."""
    from_turn: int | None = None
    """--nodeval-from-turn / nodeval_from_turn: live and record attempts replay the user turns
    before this one from the case's journal, then go live (preflight.py checks the mode)."""
    from_turn_source: str = "--nodeval-from-turn"
    variants: tuple[Any, ...] = ()
    """--nodeval-matrix / nodeval_matrix: every case runs once per variant
    (case/variants.py `Variant`s; the first is the one the others are compared with)."""

    @property
    def attempt_mode(self) -> Mode:
        """The mode the attempts run in (`modes.attempt_mode`)."""
        return attempt_mode(self.mode, self.record_mode)

    def repeats_for(self, case_repeat: int | None) -> int:
        """Attempts of a case. A recording is one attempt, whose journal the case then replays:
        record mode makes one whatever the case's `repeat:` or the run's repeat says, which
        are about the statistics of the runs that replay or run live."""
        if self.mode == "record":
            return 1
        if self.repeat_from_cli or case_repeat is None:
            return self.repeat
        return case_repeat
