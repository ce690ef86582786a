"""LLM-judge rubrics: criteria in plain language, each graded pass/fail with a short reason.

deterministic  rubrics are skipped (never passed)
full           the agent replays; the judge is called live (or a journaled verdict for the
               same transcript is reused, when asked to with --nodeval-judge-reuse)
live, record   graded live

Every grading is journaled as `judge.request` / `judge.response` with a digest of the
transcript it saw. A judge answer that cannot be parsed is retried a bounded number of
times and then reported as "inconclusive" with the raw answer, never as the agent failing.
A judge that never answers (no key, unreachable, down) raises ProviderError: the attempt is
an infrastructure error, not a pass with its rubric "skipped".

The judge's model calls go to a side journal kept in memory, not the attempt's:
`RubricGrader.spent_events()` hands them to the pricing (runner/cost.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..agent.config import ProviderSpec
from ..agent.fake_urls import FAKE_KEY, is_fake, resolve
from ..agent.providers import PROVIDERS, ModelRequest, ToolDef, side_wiring
from ..errors import ProviderError

if TYPE_CHECKING:
    from ..journal.writer import JournalWriter

RETRIES = 2
VERDICT_TOOL = ToolDef(
    "record_verdict",
    "Record whether the transcript meets the criterion.",
    {
        "type": "object",
        "required": ["verdict", "reason"],
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "fail"]},
            "reason": {"type": "string", "description": "One short sentence."},
        },
    },
)
SYSTEM = (
    "You are a strict evaluator of an AI assistant's conversation. You get one criterion and the "
    "transcript. Decide whether the assistant's behaviour meets the criterion. Answer by calling "
    'record_verdict, or with only a JSON object {"verdict": "pass" or "fail", "reason": "..."}.'
)


def parse_judge_spec(text: str, where: str) -> ProviderSpec | None:
    """`nodeval_judge = anthropic claude-sonnet-4-6 [base_url]` (empty: no judge)."""
    from ..errors import ConfigError

    parts = text.split()
    if not parts:
        return None
    if len(parts) not in (2, 3) or parts[0] not in ("anthropic", "openai", "gemini", "mock"):
        raise ConfigError(
            f"nodeval_judge ({where}) must be '<anthropic|openai|gemini> <model> [base_url]', "
            f"got {text!r}"
        )
    fields: dict[str, Any] = {"name": parts[0], "model": parts[1], "label": "judge"}
    if len(parts) == 3:
        fields["base_url"] = parts[2]
    return ProviderSpec.model_validate(fields)


def transcript(events: Sequence[Any]) -> str:
    """What the judge reads: the conversation and the agent's actions, one line each."""
    lines = []
    for event in events:
        payload = event.payload_dict()
        if event.type == "io.input":
            lines.append(f"USER: {payload['text']}")
        elif event.type == "io.output":
            lines.append(f"ASSISTANT: {payload['text']}")
        elif event.type == "io.ask":
            lines.append(f"ASSISTANT ASKS: {payload['question']}")
        elif event.type == "io.ask.response":
            lines.append(f"USER ANSWERS: {payload['text']}")
        elif event.type == "tool.call":
            lines.append(f"TOOL CALL {payload['tool']}: {json.dumps(payload.get('args'))[:2000]}")
        elif event.type == "tool.result":
            outcome = (
                payload.get("result") if payload.get("ok") else f"error: {payload.get('error')}"
            )
            lines.append(f"TOOL RESULT {payload['tool']}: {json.dumps(outcome)[:2000]}")
    return "\n".join(lines)


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def parse_verdict(text: str, tool_args: dict[str, Any] | None) -> dict[str, str] | None:
    candidate = tool_args
    if candidate is None:
        match = re.search(r"\{.*\}", text, re.S)
        try:
            candidate = json.loads(match.group(0)) if match else None
        except ValueError:
            candidate = None
    if isinstance(candidate, dict) and candidate.get("verdict") in ("pass", "fail"):
        return {"verdict": candidate["verdict"], "reason": str(candidate.get("reason", ""))[:500]}
    return None


class Judge:
    def __init__(self, spec: ProviderSpec, llm_url: str | None, *, limits: Any = None) -> None:
        self.spec = resolve(spec, llm_url).model_copy(update={"label": "judge"})
        keys = {"judge": FAKE_KEY} if is_fake(spec) else {}
        self._wiring = side_wiring(keys, limits)
        self._provider: Any = PROVIDERS[self.spec.name](self.spec, self._wiring)

    def spent_events(self) -> list[Any]:
        """The events of its model calls (its side journal's, in memory): what it cost."""
        return self._wiring.journal.events

    @property
    def name(self) -> str:
        return f"{self.spec.name}:{self.spec.model}"

    def grade(self, criterion: str, text: str, reference: str | None) -> dict[str, Any]:
        prompt = f"Criterion: {criterion}\n\nTranscript:\n{text}"
        if reference:
            prompt += f"\n\nA reference answer to compare with:\n{reference}"
        raws = []
        answered = False
        for _ in range(1 + RETRIES):
            try:
                reply = self._provider.complete(
                    ModelRequest(
                        SYSTEM, [{"role": "user", "text": prompt}], (VERDICT_TOOL,), timeout_s=120
                    )
                )
            except self._provider.errors as exc:
                raws.append(f"{type(exc).__name__}: {exc}")
                continue
            answered = True
            call = next((c.args for c in reply.tool_calls if c.name == VERDICT_TOOL.name), None)
            raws.append(reply.text if call is None else json.dumps(call))
            verdict = parse_verdict(reply.text, call)
            if verdict is not None:
                return {**verdict, "raw": raws[-1], "attempts": len(raws)}
        if not answered:
            # Not one reply: the judge is down or unreachable. That is the infrastructure's
            # problem, never a verdict (and never "skipped", which would let the run pass).
            raise ProviderError(
                f"judge {self.name} could not be reached ({len(raws)} tries): {raws[-1]}"
            )
        return {
            "verdict": "inconclusive",
            "reason": f"no parsable verdict after {len(raws)} tries",
            "raw": raws[-1] if raws else "",
            "attempts": len(raws),
        }


def make_grader(
    rubrics: Sequence[Any],
    judge_spec: ProviderSpec | None,
    golden: Sequence[Any] | None,
    reuse: bool,
    *,
    limits: Any = None,
) -> RubricGrader:
    """A grade(journal, llm_url) hook for session.run_case; `limits`: the run's shared rate
    limits."""
    return RubricGrader(rubrics, judge_spec, golden, reuse, limits)


class RubricGrader:
    """Grades the rubrics of one attempt's journal; called as grade(journal, llm_url).

    Keeps the judges of its last grading, so their model calls can be priced after it
    (`spent_events`)."""

    def __init__(
        self,
        rubrics: Sequence[Any],
        judge_spec: ProviderSpec | None,
        golden: Sequence[Any] | None,
        reuse: bool,
        limits: Any = None,
    ) -> None:
        self.rubrics, self.judge_spec, self.golden = rubrics, judge_spec, golden
        self.reuse, self.limits = reuse, limits
        self._judges: dict[str, Judge] = {}

    def spent_events(self) -> list[Any]:
        """The model calls of the last grading's judges (their side journals' events)."""
        return [event for judge in self._judges.values() for event in judge.spent_events()]

    def __call__(self, journal: JournalWriter, llm_url: str | None) -> dict[str, Any]:
        text = transcript(journal.events)
        seen = digest(text)
        recorded = _recorded_verdicts(self.golden or [], seen) if self.reuse else {}
        judged: dict[str, Any] = {}
        judges = self._judges = {}  # a new grading's calls are its own
        for rubric in self.rubrics:
            spec = rubric.judge or self.judge_spec
            for criterion in rubric.rubric:
                if spec is None:
                    judged[criterion] = {
                        "verdict": "skipped",
                        "reason": "no judge configured (nodeval_judge, or `judge:` on the rubric)",
                    }
                    continue
                key = f"{spec.name}:{spec.model}"
                if key not in judges:
                    judges[key] = Judge(spec, llm_url, limits=self.limits)
                judge = judges[key]
                journal.emit(
                    "judge.request",
                    {
                        "judge": judge.name,
                        "criterion": criterion,
                        "body": {"transcript_digest": seen, "reference": rubric.reference},
                    },
                )
                verdict = recorded.get(criterion) or judge.grade(criterion, text, rubric.reference)
                journal.emit(
                    "judge.response",
                    {
                        "judge": judge.name,
                        "criterion": criterion,
                        "transcript_digest": seen,
                        "reused": criterion in recorded,
                        **verdict,
                    },
                )
                judged[criterion] = verdict
        return judged


def _recorded_verdicts(events: Sequence[Any], transcript_digest: str) -> dict[str, dict[str, Any]]:
    verdicts = {}
    for event in events:
        if (
            event.type == "judge.response"
            and event.payload_dict().get("transcript_digest") == transcript_digest
        ):
            payload = event.payload_dict()
            if payload["verdict"] in ("pass", "fail"):
                verdicts[payload["criterion"]] = {
                    "verdict": payload["verdict"],
                    "reason": payload.get("reason", ""),
                    "raw": payload.get("raw"),
                }
    return verdicts
