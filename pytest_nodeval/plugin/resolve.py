"""Run settings, resolved once per process from the command line, a profile, ini keys and defaults.

Precedence, highest first (the one place it is decided):

    case.yaml > command line > profile > ini / pyproject > default

A case can only set what is about itself (repeat, min_pass_rate, timeout_s, world);
an explicit `--repeat` on the command line is the one exception to "case first": it
overrides a case's `repeat`, so `pytest -m pr --repeat 1` means one attempt per case.
Record mode makes one attempt per case whatever any repeat says (see
`Settings.repeats_for`). Every error names where the bad value came from.

Every run resolves them in pytest_configure, so a bad value stops a run that collects no case
too; the `Settings` dataclass (settings.py) is made of them only when first needed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from ..modes import (
    MATCH_LEVELS,
    MAX_REPEAT,
    MODES,
    RECORD_MODES,
    WORLD_CONCURRENCY,
    RecordMode,
)

WORLD_BACKENDS = ("auto", "docker", "bwrap", "local")
PROGRESS_MODES = ("auto", "tty", "plain", "off")
PROFILE_KEYS = ("mode", "repeat", "match", "world", "adaptive", "concurrency")
MATRIX_KEY = "matrix"
"""A profile's `matrix=KEY=A,B`, as many as the profile has axes (they make the product)."""
DEFAULTS: dict[str, Any] = {
    "mode": "deterministic",
    "repeat": 1,
    "match": "default",
    "world": "auto",
    "adaptive": "off",
    "concurrency": 1,
}
SWITCH_VALUES = {
    "on": True,
    "true": True,
    "yes": True,
    "1": True,
    "off": False,
    "false": False,
    "no": False,
    "0": False,
}


def parse_profiles(lines: list[str], where: str) -> dict[str, dict[str, Any]]:
    """`nodeval_profiles` lines: `release: mode=live repeat=10 matrix=model=a,b`; a profile's
    `matrix` values are a list (one per axis), every other value a string."""
    profiles: dict[str, dict[str, Any]] = {}
    for line in lines:
        name, sep, rest = line.partition(":")
        if not sep or not name.strip():
            raise pytest.UsageError(
                f"nodeval_profiles ({where}): {line!r} is not 'name: key=value ...'"
            )
        values: dict[str, Any] = {}
        for item in rest.split():
            key, eq, value = item.partition("=")
            if key == MATRIX_KEY and eq:
                values.setdefault(MATRIX_KEY, []).append(value)
            elif not eq or key not in PROFILE_KEYS:
                raise pytest.UsageError(
                    f"nodeval_profiles ({where}): profile {name.strip()!r} has {item!r}; "
                    "expected key=value with key one of "
                    f"{', '.join((*PROFILE_KEYS, MATRIX_KEY))}"
                )
            else:
                values[key] = value
        profiles[name.strip()] = values
    return profiles


def profile_from_markexpr(markexpr: str, profiles: dict[str, Any]) -> str | None:
    """The profile named (not negated) in a `-m` expression, if exactly one is."""
    if not markexpr or not profiles:
        return None  # nor compiles the pattern: most runs have neither (issue 33)
    tokens = re.findall(r"[\w\-.:+]+|[()]", markexpr or "")
    named = [
        t for i, t in enumerate(tokens) if t in profiles and (i == 0 or tokens[i - 1] != "not")
    ]
    unique = sorted(set(named))
    if len(unique) > 1:
        raise pytest.UsageError(
            f"-m {markexpr!r} selects several profiles ({', '.join(unique)}); "
            "choose one with --nodeval-profile"
        )
    return unique[0] if unique else None


def _validate(key: str, raw: Any, source: str) -> Any:
    if key == "mode" and raw not in MODES:
        raise pytest.UsageError(
            f"mode from {source} must be one of {', '.join(MODES)}, got {raw!r}"
        )
    if key == "match" and raw not in MATCH_LEVELS:
        raise pytest.UsageError(
            f"match from {source} must be one of {', '.join(MATCH_LEVELS)}, got {raw!r}"
        )
    if key == "world" and raw not in WORLD_BACKENDS:
        raise pytest.UsageError(
            f"world from {source} must be one of {', '.join(WORLD_BACKENDS)}, got {raw!r}"
        )
    if key == "adaptive":
        if str(raw).lower() not in SWITCH_VALUES:
            raise pytest.UsageError(f"adaptive from {source} must be on or off, got {raw!r}")
        return SWITCH_VALUES[str(raw).lower()]
    if key == "repeat":
        try:
            value = int(raw)
        except (TypeError, ValueError):
            value = 0
        if not 1 <= value <= MAX_REPEAT:
            raise pytest.UsageError(
                f"repeat from {source} must be an integer from 1 to {MAX_REPEAT}, got {raw!r}"
            )
        return value
    if key == "concurrency":
        return _positive(raw, f"{key} from {source}")
    return raw


def _positive(raw: Any, what: str) -> int:
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise pytest.UsageError(f"{what} must be a positive integer, got {raw!r}")
    return value


def resolve(config: pytest.Config) -> dict[str, Any]:
    """The run's settings, checked, as the keyword arguments of `settings.Settings`: every bad
    value is a usage error here, in pytest_configure, whether or not a case is collected."""
    where = str(config.inipath) if config.inipath else "ini"
    profiles = parse_profiles(config.getini("nodeval_profiles"), where)
    profile = config.getoption("nodeval_profile") or profile_from_markexpr(
        config.getoption("markexpr"), profiles
    )
    if profile is not None and profile not in profiles:
        raise pytest.UsageError(
            f"--nodeval-profile {profile!r} is not defined in nodeval_profiles ({where}); "
            f"defined: {', '.join(profiles) or 'none'}"
        )
    layers = [
        (
            "command line",
            {
                "mode": config.getoption("nodeval_mode"),
                "repeat": config.getoption("repeat"),
                "match": config.getoption("nodeval_match"),
                "world": config.getoption("nodeval_world"),
                "adaptive": config.getoption("nodeval_adaptive"),
                "concurrency": config.getoption("nodeval_concurrency"),
            },
        ),
        (f"profile {profile!r} ({where})", profiles.get(profile, {}) if profile else {}),
        (where, {k: config.getini(f"nodeval_{k}") or None for k in PROFILE_KEYS}),
        ("default", DEFAULTS),
    ]
    values, sources = {}, {}
    for key in PROFILE_KEYS:
        source, raw = next(
            (s, layer[key]) for s, layer in layers if layer.get(key) not in (None, "")
        )
        values[key], sources[key] = _validate(key, raw, source), source
    unused_repeat = None
    if values["mode"] == "record" and values["repeat"] > 1:
        unused_repeat = f"{values['repeat']} (from {sources['repeat']})"
        values["repeat"] = 1
    rootpath, here = config.rootpath, config.invocation_params.dir
    # A path on the command line is relative to where pytest was run (as --junitxml's is);
    # one in the ini file, to the rootdir.
    cli_baseline, cli_report_dir = (
        config.getoption("nodeval_baseline"),
        config.getoption("nodeval_report_dir"),
    )
    baseline = (
        here / cli_baseline
        if cli_baseline
        else (
            rootpath / config.getini("nodeval_baseline")
            if config.getini("nodeval_baseline")
            else None
        )
    )
    report_dir = (
        here / cli_report_dir if cli_report_dir else rootpath / config.getini("nodeval_report_dir")
    )
    return dict(
        mode=values["mode"],
        repeat=values["repeat"],
        repeat_from_cli=config.getoption("repeat") is not None,
        match=values["match"],
        world=values["world"],
        report_dir=report_dir,
        case_roots=tuple(rootpath / p for p in config.getini("nodeval_cases")),
        profile=profile,
        baseline=baseline,
        update_baseline=bool(config.getoption("nodeval_update_baseline")),
        sources=sources,
        unused_repeat=unused_repeat,
        history=rootpath / config.getini("nodeval_history")
        if config.getini("nodeval_history")
        else None,
        judge=_judge(config.getini("nodeval_judge"), where),
        judge_reuse=bool(config.getoption("nodeval_judge_reuse")),
        baseline_from_cli=bool(config.getoption("nodeval_baseline")),
        gate_policy=_gate_policy(config, where),
        record_force=bool(config.getoption("nodeval_record_force")),
        from_turn=_from_turn(config, where),
        from_turn_source="--nodeval-from-turn"
        if config.getoption("nodeval_from_turn") is not None
        else f"nodeval_from_turn ({where})",
        record_mode=_record_mode(config, where, values["mode"], sources["mode"]),
        adaptive=values["adaptive"],
        progress=_progress_mode(config, where),
        progress_interval_s=_progress_interval(config, where),
        prices=_prices(config.getini("nodeval_prices"), where),
        max_cost=_max_cost(config, where),
        limits=_limits(config.getini("nodeval_limits"), where, profile, profiles),
        concurrency=values["concurrency"],
        world_concurrency=_positive(
            config.getini("nodeval_world_concurrency") or WORLD_CONCURRENCY,
            f"nodeval_world_concurrency ({where})",
        ),
        variants=_matrix(config, where, profile, profiles.get(profile or "", {})),
    )


def _matrix(
    config: pytest.Config, where: str, profile: str | None, profile_values: dict[str, Any]
) -> tuple[Any, ...]:
    # --nodeval-matrix (repeatable) > the profile's matrix= > ini nodeval_matrix, whole: the
    # one place the variants are decided. A layer's axes are not mixed with another's.
    layers = [
        (config.getoption("nodeval_matrix") or [], "--nodeval-matrix"),
        (profile_values.get(MATRIX_KEY, []), f"profile {profile!r} ({where}) matrix"),
        (config.getini("nodeval_matrix"), f"nodeval_matrix ({where})"),
    ]
    flags, source = next(((f, s) for f, s in layers if f), ([], ""))
    if not flags:
        return ()
    from ..case.variants import parse_matrix

    try:
        return parse_matrix(list(flags), source)
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _record_mode(config: pytest.Config, where: str, mode: str, mode_source: str) -> RecordMode:
    # --nodeval-record-mode (argparse checked its choices) > ini nodeval_record_mode > all.
    # The option is about record mode alone; the ini key is a project's default for the
    # record runs among its runs, so it never stops another mode.
    cli = config.getoption("nodeval_record_mode")
    if cli is not None and mode != "record":
        raise pytest.UsageError(
            f"--nodeval-record-mode is for record mode only (--nodeval-mode record); "
            f"this run's mode is {mode} (from {mode_source})"
        )
    raw: RecordMode = cli or config.getini("nodeval_record_mode").strip() or "all"
    if raw not in RECORD_MODES:
        raise pytest.UsageError(
            f"nodeval_record_mode ({where}) must be one of {', '.join(RECORD_MODES)}, got {raw!r}"
        )
    return raw


def _from_turn(config: pytest.Config, where: str) -> int | None:
    # command line > ini: the one place the turn is decided.
    cli = config.getoption("nodeval_from_turn")
    source, raw = (
        ("--nodeval-from-turn", cli)
        if cli is not None
        else (f"nodeval_from_turn ({where})", config.getini("nodeval_from_turn").strip())
    )
    if raw in (None, ""):
        return None
    return _positive(raw, f"{source} (a user turn, counted from 1)")


def _progress_mode(config: pytest.Config, where: str) -> str:
    # --nodeval-progress (argparse checked its choices) > ini nodeval_progress > auto
    mode = (
        config.getoption("nodeval_progress") or config.getini("nodeval_progress").strip() or "auto"
    )
    if mode not in PROGRESS_MODES:
        raise pytest.UsageError(
            f"nodeval_progress ({where}) must be one of {', '.join(PROGRESS_MODES)}, got {mode!r}"
        )
    return mode


def _progress_interval(config: pytest.Config, where: str) -> float:
    raw = config.getini("nodeval_progress_interval")
    try:
        seconds = float(raw)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds >= 0:  # also refuses nan
        raise pytest.UsageError(
            f"nodeval_progress_interval ({where}) must be a number of seconds >= 0, got {raw!r}"
        )
    return seconds


def _prices(lines: list[str], where: str) -> dict[str, Any]:
    if not any(line.strip() for line in lines):
        return {}
    from ..runner.cost import parse_prices

    try:
        return parse_prices(lines)
    except ValueError as exc:
        raise pytest.UsageError(f"nodeval_prices ({where}): {exc}") from None


def _max_cost(config: pytest.Config, where: str) -> float | None:
    # command line > ini: the one place a max cost is decided.
    cli = config.getoption("nodeval_max_cost")
    source, raw = (
        ("--nodeval-max-cost", cli)
        if cli not in (None, "")
        else (f"nodeval_max_cost ({where})", config.getini("nodeval_max_cost"))
    )
    if raw in (None, ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise pytest.UsageError(
            f"{source} must be a positive amount in USD (e.g. 5 or 0.50), got {raw!r}"
        )
    return value


def _limits(
    lines: list[str], where: str, profile: str | None, profiles: dict[str, Any]
) -> tuple[Any, ...]:
    if not lines:
        return ()
    from ..agent.limits import parse_limits
    from ..errors import ConfigError

    try:
        return parse_limits(lines, where, profile, profiles)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _judge(text: str, where: str) -> Any:
    if not text.strip():
        return None
    from ..errors import ConfigError
    from ..people.judge import parse_judge_spec

    try:
        return parse_judge_spec(text, where)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _gate_policy(config: pytest.Config, where: str) -> dict[str, float]:
    """The gate thresholds set in the ini file, by GatePolicy field (aliases resolved).

    The run records them in report.json, so `nodeval baseline` gates with the same policy.
    """
    from .keys import GATE_INI_ALIASES, GATE_INI_KEYS

    values: dict[str, float] = {}
    for name in GATE_INI_KEYS:
        raw = config.getini(f"nodeval_{name}")
        if raw in ("", None):
            continue
        try:
            number = float(raw)
        except ValueError:
            raise pytest.UsageError(
                f"nodeval_{name} ({where}) must be a number, got {raw!r}"
            ) from None
        if number < 0:
            raise pytest.UsageError(f"nodeval_{name} ({where}) must not be negative, got {raw!r}")
        field_name = GATE_INI_ALIASES.get(name, name)
        if field_name in values and values[field_name] != number:
            raise pytest.UsageError(
                f"nodeval_{name} ({where}) = {raw} contradicts nodeval_{field_name} = "
                f"{values[field_name]:g}: they are one setting; keep one of them"
            )
        integral = field_name in ("latency_min_attempts", "bootstrap_iterations", "bootstrap_seed")
        values[field_name] = int(number) if integral else number
    return values
