"""Synthetic runs for the HTML report: a RunReport with journals on disk, a gate diff and
a history, at any size, with hostile strings where the report shows run data.

Also used by benchmarks/html_report.py, so it builds realistic sizes quickly and without
the plugin running: by default 17 events per attempt (two LLM calls, one tool call); with
`real_size=True` the session of benchmarks/replay_bench.py at full size (10 user turns, 20
Anthropic-shaped calls whose requests grow to ~40 KB, 10 tool calls: ~400 KB per journal),
with text drawn from a made-up vocabulary so that it compresses like prose, not like a
repeated sentence.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pytest_nodeval.report.models import (
    AssertionRecord,
    AttemptRecord,
    CaseReport,
    RunReport,
    Totals,
)
from pytest_nodeval.stats.run_stats import CaseStats, case_stats, suite_stats

RUN_ID = "20261130-120000-synt"
BROKEN_UTF8 = b"caf\xc3 \xff\xfe half \xe2\x82 done".decode("utf-8", errors="replace")
HOSTILE = [
    "<script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=1">',
    '<svg onload="window.__pwned=1"><circle r=9 /></svg>',
    "javascript:window.__pwned=1",
    '<a href="javascript:window.__pwned=1">click me</a>',
    "</script><script>window.__pwned=1</script>",
    "<!--<script>window.__pwned=1</script>-->",
    '"><iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>',
    "<style>body{display:none}</style>",
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=1">',
    '<base href="https://evil.invalid/">',
    "{{ 7*7 }} {% raw %} ${7*7}",
    "line\u2028separator\u2029paragraph",
    BROKEN_UTF8,
    "NUL \x00 and ANSI \x1b[31mred\x1b[0m",
    "&lt;script&gt; already escaped &amp;",
    "name ‮esrever‬ then the rest",
]
"""Each must appear on the page as the very text it is."""
OUTPUT_SEQ = 16
"""The seq of io.output in the synthetic journals."""
ONE_MB = "A" * 1_000_000 + "<script>window.__pwned=1</script>"


@dataclass
class SyntheticRun:
    report: RunReport
    run_dir: Path
    rootdir: Path
    history: dict[str, list[dict[str, Any]]]


def build_run(
    root: Path,
    *,
    cases: int,
    repeats: int,
    seed: int = 7,
    hostile: bool = False,
    gate: bool = True,
    fail_rate: float = 0.08,
    regressed: int = 3,
    real_size: bool = False,
    text: Literal["prose", "bench"] = "prose",
) -> SyntheticRun:
    """A run of `cases` x `repeats` attempts written under `root` (rootdir/scenarios,
    rootdir/reports)."""
    rng = random.Random(seed)
    rootdir, run_dir = root / "project", root / "project" / "reports" / RUN_ID
    reports = []
    for index in range(cases):
        case_id = _case_id(index, hostile)
        # The first `regressed` cases fail often: they are the regressions the gate catches.
        rate_now = 0.4 if index < regressed else (1.0 - fail_rate)
        if real_size:
            reports.append(
                _real_size_case(rng, index, case_id, repeats, rate_now, rootdir, run_dir, text)
            )
        else:
            reports.append(_case(rng, index, case_id, repeats, rate_now, rootdir, run_dir, hostile))
    report = _report(reports, repeats)
    if gate:
        report.gate = gate_diff(report, regressed)
    return SyntheticRun(report, run_dir, rootdir, history_of(report, rng))


def _case_id(index: int, hostile: bool) -> str:
    if hostile and index < len(HOSTILE):
        return f"case-{index:04d} {HOSTILE[index]}"
    return f"case-{index:04d}"


def _case(
    rng: random.Random,
    index: int,
    case_id: str,
    repeats: int,
    rate: float,
    rootdir: Path,
    run_dir: Path,
    hostile: bool,
) -> CaseReport:
    directory = f"scenarios/c{index:04d}"
    # Passing attempts replay their golden journal exactly: serialise it once.
    golden = _jsonl(
        _events(case_id, passed=True, hostile=hostile and index < len(HOSTILE), index=index)
    )
    _write_journal(rootdir / directory / "journal", golden)
    attempts = []
    for repeat in range(1, repeats + 1):
        passed = rng.random() < rate
        events = (
            golden
            if passed
            else _jsonl(_events(case_id, passed=False, hostile=hostile, index=index))
        )
        journal = f"_sessions/c{index:04d}/r{repeat}/journal"
        _write_journal(run_dir / journal, events)
        attempts.append(
            _attempt(rng, case_id, repeat, passed, journal, hostile and index < len(HOSTILE))
        )
    tags = ["pr", "tools"] if index % 3 == 0 else ["release"]
    if hostile and index < len(HOSTILE):
        tags = [HOSTILE[index][:60], "pr"]
    return CaseReport(
        id=case_id,
        name=HOSTILE[index] if hostile and index < len(HOSTILE) else f"Scenario number {index}",
        tags=tags,
        directory=directory,
        min_pass_rate=0.6 if index % 5 == 0 else None,
        verdict=_verdict(attempts),
        stats=_stats(attempts),
        attempts=attempts,
    )


def _attempt(
    rng: random.Random, case_id: str, repeat: int, passed: bool, journal: str, hostile: bool
) -> AttemptRecord:
    message = (
        HOSTILE[repeat % len(HOSTILE)] if hostile else "expected the final output to contain 'MB'"
    )
    assertions = [
        AssertionRecord(
            kind="tool_called",
            description='tool_called {"tool": "shell"}',
            status="passed",
            seqs=[9],
        ),
        AssertionRecord(
            kind="output_contains",
            description='output_contains {"text": "MB"}',
            status="passed" if passed else "failed",
            message="" if passed else message,
            seqs=[] if passed else [OUTPUT_SEQ],
        ),
    ]
    return AttemptRecord(
        nodeid=f"scenarios/{case_id}/case.yaml::test_scenario[{case_id}-r{repeat}]",
        case_id=case_id,
        repeat=repeat,
        outcome="passed" if passed else "failed",
        reason=None if passed else (message if hostile else assertions[1].description),
        status="ok",
        assertions=assertions,
        latency_ms=round(rng.lognormvariate(7.2, 0.35), 1),
        wall_ms=round(rng.uniform(20, 60), 1),
        input_tokens=rng.randint(800, 1200),
        output_tokens=rng.randint(60, 140),
        turns=2,
        llm_calls=2,
        tool_calls=1,
        journal=journal,
    )


def _verdict(attempts: list[AttemptRecord]) -> Literal["passed", "failed"]:
    failed = sum(1 for a in attempts if a.outcome == "failed")
    return "passed" if failed == 0 else "failed"


def _stats(attempts: list[AttemptRecord]) -> CaseStats:
    """Filled by the statistics module itself (p50/p95, pass^k, tokens)."""
    return case_stats(
        [a.outcome == "passed" for a in attempts],
        [a.latency_ms or 0.0 for a in attempts],
        [a.tokens for a in attempts],
    )


def _report(cases: list[CaseReport], repeats: int) -> RunReport:
    attempts = [a for c in cases for a in c.attempts]
    passed = sum(1 for a in attempts if a.outcome == "passed")
    totals = Totals(
        cases=len(cases), attempts=len(attempts), passed=passed, failed=len(attempts) - passed
    )
    suite = suite_stats([c.stats for c in cases])
    return RunReport(
        run_id=RUN_ID,
        started_at="2026-11-30T12:00:00.000000Z",
        finished_at="2026-11-30T12:04:10.000000Z",
        duration_s=250.0,
        mode="deterministic",
        repeat=repeats,
        exit_status=1,
        pytest_exit_status=1,
        totals=totals,
        suite=suite,
        cases=cases,
        environment={"pytest_nodeval": "0.1.0"},
    )


def gate_diff(report: RunReport, regressed: int) -> dict[str, Any]:
    """A failing gate in the shape of the issue: the first `regressed` cases dropped from 100%."""
    rows = []
    for index, case in enumerate(report.cases):
        now = case.stats.pass_rate or 0.0
        base = 1.0 if index < regressed else now
        drop = index < regressed
        rows.append(
            {
                "case_id": case.id,
                "movement": "regressed" if drop and now < base else "unchanged",
                "baseline_pass_rate": base,
                "current_pass_rate": now,
                "delta": now - base,
                "delta_low": max(-1.0, now - base - 0.3) if drop else -0.2,
                "delta_high": min(1.0, now - base + 0.2) if drop else 0.2,
                "p50_ms_delta": 12.0,
                "p95_ms_delta": 240.0 if drop else -3.0,
                "tokens_delta": 35.0 if drop else 0.0,
                "verdict": "FAIL" if drop else "OK",
            }
        )
    dropped = [r["case_id"] for r in rows if r["verdict"] == "FAIL"]
    suite_now = report.suite.pass_rate or 0.0
    return {
        "schema_version": "1",
        "baseline": "reports/baseline.json",
        "cases": rows,
        "new_cases": [],
        "missing_cases": [],
        "suite": {
            "baseline_pass_rate": suite_now + 0.05,
            "current_pass_rate": suite_now,
            "delta": -0.05,
        },
        "gates": [
            {
                "name": "scenario_regression",
                "verdict": "FAIL",
                "reason": f"{len(dropped)} case(s) dropped by 20 pp or more",
                "cases": dropped,
                "numbers": {"fdr_level": 0.1},
            },
            {
                "name": "suite_pass_rate",
                "verdict": "INCONCLUSIVE",
                "reason": "a 5 pp drop, not significant",
                "cases": [],
                "numbers": {"delta": -0.05, "p_value": 0.2},
            },
            {"name": "latency_p95", "verdict": "OK", "reason": "", "cases": [], "numbers": {}},
        ],
        "breached": ["scenario_regression"],
    }


def history_of(
    report: RunReport, rng: random.Random, runs: int = 8
) -> dict[str, list[dict[str, Any]]]:
    history: dict[str, list[dict[str, Any]]] = {}
    for case in report.cases:
        points = [
            {
                "run_id": f"2026112{day}-run",
                "finished_at": f"2026-11-2{day}T10:00:00Z",
                "pass_rate": min(1.0, max(0.0, 0.95 + rng.uniform(-0.15, 0.05))),
            }
            for day in range(runs)
        ]
        points.append(
            {
                "run_id": report.run_id,
                "finished_at": report.finished_at,
                "pass_rate": case.stats.pass_rate,
            }
        )
        history[case.id] = points
    return history


# -- journals -----------------------------------------------------------------------------


def _events(case_id: str, *, passed: bool, hostile: bool, index: int) -> list[dict[str, Any]]:
    answer = "The workspace uses 12 MB." if passed else "I could not find out."
    tool_output: Any = {"stdout": "12M\t.\n", "exit_code": 0}
    if hostile:
        answer = HOSTILE[index % len(HOSTILE)] + (ONE_MB if index == 0 else "")
        tool_output = {
            "stdout": HOSTILE[(index + 1) % len(HOSTILE)],
            "html": HOSTILE[(index + 5) % len(HOSTILE)],
        }
    question = f"How much space does the workspace of {case_id} use?"
    system = "You are a careful ops assistant. " * 20
    first = [{"role": "user", "content": question}]
    call = {"id": "toolu_01", "name": "shell", "args": {"command": "du -sh ."}}
    second = first + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "call_id": "toolu_01", "content": json.dumps(tool_output)},
    ]
    body = [
        (
            "session.start",
            0,
            {"engine": "pytest-nodeval", "version": "0.1.0", "session_id": "s", "mode": "record"},
        ),
        *[
            (
                "tool.register",
                0,
                {"tool": t, "description": f"The {t} tool.", "parameters": {"type": "object"}},
            )
            for t in ("shell", "file", "ask_user")
        ],
        ("io.input", 1, {"text": question, "source": "scripted"}),
        ("agent.turn.start", 1, {}),
        (
            "llm.request",
            1,
            {
                "provider": "anthropic",
                "api": "anthropic.messages",
                "body": {"model": "claude-sonnet-4-6", "system": system, "messages": first},
            },
        ),
        (
            "llm.response",
            1,
            {
                "provider": "anthropic",
                "status": 200,
                "latency_ms": 812.0,
                "usage": {"input_tokens": 412, "output_tokens": 38},
                "body": {
                    "content": [
                        {"type": "text", "text": "Let me check."},
                        {
                            "type": "tool_use",
                            "id": "toolu_01",
                            "name": "shell",
                            "input": call["args"],
                        },
                    ]
                },
            },
        ),
        ("tool.call", 1, {"tool": "shell", "call_id": "toolu_01", "args": call["args"]}),
        (
            "tool.result",
            1,
            {
                "tool": "shell",
                "call_id": "toolu_01",
                "ok": True,
                "result": tool_output,
                "latency_ms": 14.0,
            },
        ),
        ("agent.turn.end", 1, {"stop_reason": "tool_use"}),
        ("agent.turn.start", 2, {}),
        (
            "llm.request",
            2,
            {
                "provider": "anthropic",
                "api": "anthropic.messages",
                "body": {"model": "claude-sonnet-4-6", "system": system, "messages": second},
            },
        ),
        (
            "llm.response",
            2,
            {
                "provider": "anthropic",
                "status": 200,
                "latency_ms": 640.0,
                "usage": {"input_tokens": 530, "output_tokens": 20},
                "body": {"content": [{"type": "text", "text": answer}]},
            },
        ),
        ("agent.turn.end", 2, {"stop_reason": "end_turn"}),
        ("io.output", 2, {"text": answer}),
        (
            "session.end",
            2,
            {
                "status": "ok",
                "duration_ms": 1500.0,
                "turns": 2,
                "usage": {"input_tokens": 942, "output_tokens": 58},
            },
        ),
    ]
    return [
        {
            "seq": seq,
            "ts": f"2026-11-30T12:00:{seq:02d}.000000Z",
            "type": kind,
            "turn": turn,
            "payload": payload,
        }
        for seq, (kind, turn, payload) in enumerate(body, start=1)
    ]


def _jsonl(events: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def _write_journal(directory: Path, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "header.json").write_text('{"schema_version": 1}\n')
    (directory / "events.jsonl").write_text(text, encoding="utf-8")


# -- real-size sessions ---------------------------------------------------------------------

REAL_TURNS = 10
SYSTEM_PROMPT_WORDS = 600
"""~4 KB of system prompt, the same in every scenario (one agent under test)."""


def _vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    syllables = [
        "ka",
        "lo",
        "mi",
        "ne",
        "ru",
        "sta",
        "tor",
        "ve",
        "qui",
        "dan",
        "pel",
        "gro",
        "fin",
        "ash",
        "ern",
        "ox",
        "ly",
        "tion",
        "ing",
        "al",
        "be",
        "co",
        "de",
        "ex",
        "im",
        "pro",
        "re",
        "sub",
        "un",
        "wa",
    ]
    return [
        "".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        for _ in range(size)
    ]


_WORDS = _vocabulary(random.Random(1))
_SYSTEM = " ".join(random.Random(2).choices(_WORDS, k=SYSTEM_PROMPT_WORDS))
_TOOLS = [
    {
        "name": name,
        "description": " ".join(random.Random(3 + i).choices(_WORDS, k=60)),
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line."},
                "path": {"type": "string", "description": "A file path."},
            },
            "required": ["command"],
        },
    }
    for i, name in enumerate(("shell", "file", "ask_user"))
]


_SENTENCE = "The quick brown fox jumps over the lazy dog."


def _prose(rng: random.Random, words: int) -> str:
    if rng is _BENCH_TEXT:  # replay_bench's padding: one sentence again and again
        return " ".join([_SENTENCE] * (words // 9))
    picked = rng.choices(_WORDS, k=words)
    return " ".join(w + ("." if i % 14 == 13 else "") for i, w in enumerate(picked))


class _Bench(random.Random):
    """Marks replay_bench's text (a repeated sentence) instead of drawn words."""


_BENCH_TEXT = _Bench(0)


def real_size_events(
    case_id: str, seed: int, *, passed: bool, text: str = "prose"
) -> list[dict[str, Any]]:
    """The replay bench's session at full size: per user turn, a tool call then a ~1.4 KB answer.
    A failed attempt goes another way from turn 8 on (other tool output and answers)."""
    rng = _BENCH_TEXT if text == "bench" else random.Random(seed)
    events: list[tuple[str, int, dict[str, Any]]] = [
        (
            "session.start",
            0,
            {"engine": "pytest-nodeval", "version": "0.1.0", "session_id": "s", "mode": "record"},
        ),
        *[
            (
                "tool.register",
                0,
                {
                    "tool": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            )
            for t in _TOOLS
        ],
    ]
    messages: list[dict[str, Any]] = []

    def request(turn: int) -> None:
        events.append(
            (
                "llm.request",
                turn,
                {
                    "provider": "anthropic",
                    "api": "anthropic.messages",
                    "method": "POST",
                    "path": "/v1/messages",
                    "stream": False,
                    "body": {
                        "max_tokens": 1024,
                        "messages": list(messages),
                        "model": "claude-sonnet-4-6",
                        "system": _SYSTEM,
                        "tools": _TOOLS,
                    },
                },
            )
        )

    for turn in range(1, REAL_TURNS + 1):
        if not passed and turn == 8 and text != "bench":
            rng = random.Random(seed + 1_000_003)
        question = f"Step {turn} of {case_id}: " + _prose(rng, 30)
        messages.append({"role": "user", "content": question})
        events += [
            ("io.input", turn, {"text": question, "source": "scripted"}),
            ("agent.turn.start", turn, {}),
        ]
        request(turn)
        call_id, args = (
            f"toolu_{turn:02d}",
            {"command": f"du -sh ./part{turn} && ls -la ./part{turn}"},
        )
        tool_use = [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": call_id, "name": "shell", "input": args},
        ]
        output = {
            "stdout": "\n".join(_prose(rng, 8) for _ in range(12)),
            "stderr": "",
            "exit_code": 0,
        }
        events += [
            (
                "llm.response",
                turn,
                {
                    "provider": "anthropic",
                    "status": 200,
                    "latency_ms": 800.0,
                    "usage": {"input_tokens": 900, "output_tokens": 40},
                    "body": {
                        "id": f"msg_{turn}a",
                        "type": "message",
                        "role": "assistant",
                        "content": tool_use,
                        "stop_reason": "tool_use",
                    },
                },
            ),
            ("tool.call", turn, {"tool": "shell", "call_id": call_id, "args": args}),
            (
                "tool.result",
                turn,
                {
                    "tool": "shell",
                    "call_id": call_id,
                    "ok": True,
                    "result": output,
                    "latency_ms": 14.0,
                },
            ),
            ("agent.turn.end", turn, {"stop_reason": "tool_use"}),
            ("agent.turn.start", turn, {}),
        ]
        messages += [
            {"role": "assistant", "content": tool_use},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": json.dumps(output)}
                ],
            },
        ]
        request(turn)
        answer = f"Step {turn} done: the workspace uses {turn * 3} MB. " + _prose(rng, 200)
        if not passed and turn == REAL_TURNS:
            answer = "I could not find out. " + _prose(rng, 200)
        reply = [{"type": "text", "text": answer}]
        events += [
            (
                "llm.response",
                turn,
                {
                    "provider": "anthropic",
                    "status": 200,
                    "latency_ms": 900.0,
                    "usage": {"input_tokens": 1900, "output_tokens": 320},
                    "body": {
                        "id": f"msg_{turn}b",
                        "type": "message",
                        "role": "assistant",
                        "content": reply,
                        "stop_reason": "end_turn",
                    },
                },
            ),
            ("agent.turn.end", turn, {"stop_reason": "end_turn"}),
            ("io.output", turn, {"text": answer}),
        ]
        messages.append({"role": "assistant", "content": reply})
    events.append(
        (
            "session.end",
            REAL_TURNS,
            {
                "status": "ok",
                "duration_ms": 18000.0,
                "turns": REAL_TURNS,
                "usage": {"input_tokens": 28000, "output_tokens": 3600},
            },
        )
    )
    return [
        {
            "seq": seq,
            "ts": f"2026-11-30T12:00:{seq % 60:02d}.000000Z",
            "type": kind,
            "turn": turn,
            "payload": payload,
        }
        for seq, (kind, turn, payload) in enumerate(events, start=1)
    ]


REAL_OUTPUT_SEQ = 4 + REAL_TURNS * 12
"""The seq of the last io.output of a real-size journal."""


def _real_size_case(
    rng: random.Random,
    index: int,
    case_id: str,
    repeats: int,
    rate: float,
    rootdir: Path,
    run_dir: Path,
    text: str,
) -> CaseReport:
    directory = f"scenarios/c{index:04d}"
    golden = _jsonl(real_size_events(case_id, index, passed=True, text=text))
    _write_journal(rootdir / directory / "journal", golden)
    attempts = []
    for repeat in range(1, repeats + 1):
        passed = rng.random() < rate
        journal = f"_sessions/c{index:04d}/r{repeat}/journal"
        _write_journal(
            run_dir / journal,
            golden if passed else _jsonl(real_size_events(case_id, index, passed=False, text=text)),
        )
        attempt = _attempt(rng, case_id, repeat, passed, journal, False)
        attempt.assertions[1].seqs = [] if passed else [REAL_OUTPUT_SEQ]
        attempt.turns, attempt.llm_calls, attempt.tool_calls = (
            REAL_TURNS,
            2 * REAL_TURNS,
            REAL_TURNS,
        )
        attempts.append(attempt)
    return CaseReport(
        id=case_id,
        name=f"Scenario number {index}",
        tags=["pr"] if index % 3 == 0 else ["release"],
        directory=directory,
        verdict=_verdict(attempts),
        stats=_stats(attempts),
        attempts=attempts,
    )
