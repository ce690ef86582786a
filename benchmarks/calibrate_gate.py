"""Calibrate the CI gates by simulation: false alarms with no change, detection of real drops.

Each replication simulates one CI run, a baseline run and a current run of the same suite
with independent attempts, and feeds them through ``pytest_nodeval.gate.compare`` exactly as
CI would (default GatePolicy unless overridden). The suite is stats.md 3.4's: 50 scenarios
x 10 repeats, true pass rates drawn once with numpy seed 7 (30 near-solid in [0.95, 1], 20
flaky in [0.5, 0.95]), so the figures compare directly with the spec's (2.8% and 92.1%).
Rows marked "+timing" also draw latencies and tokens (stats.md 3.3's lognormal shapes).

    .venv/bin/python benchmarks/calibrate_gate.py                 # full run, 2 processes
    .venv/bin/python benchmarks/calibrate_gate.py --quick         # 10x fewer replications
    .venv/bin/python benchmarks/calibrate_gate.py --only timing --latency-min-attempts 10

Replications run in fixed chunks with spawned seeds: the figures do not depend on --workers.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from pytest_nodeval.gate import CaseSample, Diff, GateName, GatePolicy, Verdict, compare
from pytest_nodeval.stats.run_stats import wilson_interval

SCENARIOS = 50
REPEATS = 10
CHUNK = 100
SUITE, SCENARIO = GateName.SUITE_PASS_RATE, GateName.SCENARIO_REGRESSION
LATENCY, TOKENS = GateName.LATENCY_P95, GateName.TOKENS


@dataclass(frozen=True)
class Condition:
    """One simulated truth for the current run, and how many CI runs it gets."""

    label: str
    reps: int
    target: str
    timed: bool = False  # also draw latencies and tokens (slower: MW tests + bootstrap)
    slowed_cases: int = 0  # the first N cases get 60% slower in the current run


CONDITIONS = [
    Condition("no change", 3000, "any FAIL <= 3%"),
    Condition("uniform -8 pp", 3000, "any FAIL >= 90%"),
    Condition("2 solid -> 0.50", 1000, "stats.md: 58%"),
    Condition("3 flaky -40 pp", 1000, "stats.md: 42%"),
    Condition("no change +timing", 400, "any FAIL <= 3%", timed=True),
    Condition("5 cases 1.6x slower +timing", 400, "latency flagged", timed=True, slowed_cases=5),
]


def spec_pass_rates() -> np.ndarray:
    """stats.md 3.4's suite: the same draws as worked_example.py (numpy seed 7)."""
    rng = np.random.default_rng(7)
    return np.concatenate([rng.uniform(0.95, 1.0, 30), rng.uniform(0.5, 0.95, 20)])


def current_rates(label: str, rates: np.ndarray) -> np.ndarray:
    changed = rates.copy()
    if label == "uniform -8 pp":
        changed = np.clip(rates - 0.08, 0.0, 1.0)
    elif label == "2 solid -> 0.50":
        changed[[0, 1]] = 0.5
    elif label == "3 flaky -40 pp":
        changed[[30, 31, 32]] = np.maximum(rates[[30, 31, 32]] - 0.4, 0.05)
    return changed


def simulate_run(
    rng: np.random.Generator,
    rates: np.ndarray,
    median_ms: np.ndarray | None,
    token_scale: np.ndarray | None,
) -> list[CaseSample]:
    """One run: REPEATS independent attempts per scenario."""
    passed = rng.random((len(rates), REPEATS)) < rates[:, None]
    samples = []
    for j, outcomes in enumerate(passed):
        latencies: tuple[float, ...] = ()
        tokens: tuple[int, ...] = ()
        if median_ms is not None and token_scale is not None:
            latencies = tuple(float(x) for x in median_ms[j] * rng.lognormal(0, 0.35, REPEATS))
            tokens = tuple(int(x) for x in token_scale[j] * rng.lognormal(0, 0.3, REPEATS))
        samples.append(CaseSample(f"s{j:02d}", tuple(bool(x) for x in outcomes), latencies, tokens))
    return samples


def tally(diff: Diff, slowed_cases: int) -> Counter[str]:
    verdict = {gate.name: gate.verdict for gate in diff.gates}
    counts = Counter({f"{name} {v}": 1 for name, v in verdict.items() if v is not Verdict.OK})
    counts["any FAIL"] = diff.verdict is Verdict.FAIL
    unsure = next(g for g in diff.gates if g.name is SCENARIO).numbers["inconclusive"] or 0
    counts["INC cases"] = int(unsure)
    # Per case, because one INCONCLUSIVE case masks WARN in the gate's overall verdict.
    slower = {
        case.case_id
        for case in diff.cases
        if case.latency and case.latency.verdict in (Verdict.WARN, Verdict.FAIL)
    }
    counts["lat significant"] = bool(slower)
    counts["slowed caught"] = len(slower & {f"s{j:02d}" for j in range(slowed_cases)})
    return counts


def simulate_chunk(
    condition: Condition, policy: GatePolicy, reps: int, seed: np.random.SeedSequence
) -> Counter[str]:
    rng = np.random.default_rng(seed)
    baseline_rates = spec_pass_rates()
    rates = current_rates(condition.label, baseline_rates)
    median_ms = token_scale = slower = None
    if condition.timed:
        median_ms = np.exp(rng.uniform(np.log(1500), np.log(20000), SCENARIOS))
        token_scale = np.exp(rng.uniform(np.log(2e3), np.log(4e4), SCENARIOS))
        slower = median_ms.copy()
        slower[: condition.slowed_cases] *= 1.6
    counts: Counter[str] = Counter()
    for _ in range(reps):
        baseline = simulate_run(rng, baseline_rates, median_ms, token_scale)
        current = simulate_run(rng, rates, slower, token_scale)
        counts.update(tally(compare(baseline, current, policy), condition.slowed_cases))
    return counts


def run_condition(
    pool: ProcessPoolExecutor, condition: Condition, policy: GatePolicy, reps: int, seed: int
) -> Counter[str]:
    chunks = [min(CHUNK, reps - start) for start in range(0, reps, CHUNK)]
    seeds = np.random.SeedSequence(seed).spawn(len(chunks))
    total: Counter[str] = Counter()
    same = len(chunks)
    for counts in pool.map(simulate_chunk, [condition] * same, [policy] * same, chunks, seeds):
        total.update(counts)
    return total


HEADER = (
    f"{'truth':<28} {'runs':>5}  {'any gate FAILs':<20}"
    f" {'suite':>5} {'scen':>5} {'lat':>5} {'tok':>5}  {'any':>5} {'slow':>5}"
    f"  {'suite':>5} {'scen':>5} {'lat':>5} {'cases':>5}"
)
GROUPS = (
    f"{'':<55} {'---------- FAIL ---------':<25}  {'lat signif.':<11}"
    f"  {'---- INCONCLUSIVE ----'}"
)


def row(condition: Condition, reps: int, counts: Counter[str], seconds: float) -> str:
    def share(key: str) -> str:
        return f"{counts[key] / reps:5.1%}"

    low, high = wilson_interval(counts["any FAIL"], reps)
    fails = " ".join(share(f"{name} FAIL") for name in (SUITE, SCENARIO, LATENCY, TOKENS))
    unsure = " ".join(share(f"{name} INCONCLUSIVE") for name in (SUITE, SCENARIO, LATENCY))
    caught = counts["slowed caught"] / (reps * condition.slowed_cases or 1)
    caught_text = f"{caught:5.1%}" if condition.slowed_cases else "    -"
    latency = f"{share('lat significant')} {caught_text}"
    any_fail = f"{counts['any FAIL'] / reps:5.1%} [{low:.1%}, {high:.1%}]"
    return (
        f"{condition.label:<28} {reps:>5}  {any_fail:<20} {fails}  {latency}"
        f"  {unsure} {counts['INC cases'] / reps:5.2f}  {seconds:4.0f}s  {condition.target}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="divide the replications by 10")
    parser.add_argument("--only", default="", help="run this condition (or all containing it)")
    parser.add_argument("--reps", type=int, help="CI runs per condition, instead of its own")
    parser.add_argument("--latency-min-attempts", type=int, help="override the GatePolicy default")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args(argv)
    policy = GatePolicy()
    if args.latency_min_attempts is not None:
        policy = dataclasses.replace(policy, latency_min_attempts=args.latency_min_attempts)
    print(f"{SCENARIOS} scenarios x {REPEATS} repeats per run; {policy}")
    print("share of simulated CI runs per verdict; [95% Wilson interval of the estimate]")
    print(GROUPS)
    print(HEADER)
    exact = [c for c in CONDITIONS if c.label == args.only]
    chosen = exact or [c for c in CONDITIONS if args.only in c.label]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for index, condition in enumerate(CONDITIONS):
            if condition not in chosen:
                continue
            reps = max(CHUNK // 10, (args.reps or condition.reps) // (10 if args.quick else 1))
            begun = time.perf_counter()
            counts = run_condition(pool, condition, policy, reps, args.seed + index)
            print(row(condition, reps, counts, time.perf_counter() - begun), flush=True)
    print(f"wall time {time.perf_counter() - started:.0f} s with {args.workers} worker(s)")
    print("lat signif.: any = runs with a case whose p95 rose materially AND significantly")
    print("  (WARN below latency_min_attempts, else FAIL); slow = share of the slowed cases caught")
    print("cases = mean number of scenarios per run that scenario_regression calls INCONCLUSIVE")


if __name__ == "__main__":
    main()
