"""Adaptive repeats by simulation, through the public gate API (issue 16, docs/statistics.md §6).

Each replication is one CI run: a baseline run made at the cap (a run without a baseline
runs every repeat), and a candidate that draws each case's attempts one at a time and asks
``pytest_nodeval.gate.decide_look`` after each one whether the case is decided, as the plugin
does. The candidate's adaptive samples (``CaseSample(..., adaptive_cap=cap)``) and, for
comparison, the first R attempts of the same draws (fixed repeats) go through
``pytest_nodeval.gate.compare`` with the default GatePolicy (all four gates on: 1% budget).

    .venv/bin/python benchmarks/adaptive_repeats.py            # everything (~15 min, 2 procs)
    .venv/bin/python benchmarks/adaptive_repeats.py --quick    # 10x fewer runs
    .venv/bin/python benchmarks/adaptive_repeats.py --only aa  # sections: agree, collapse, aa

Goals (issue 16): (a) the same verdicts as fixed 10 repeats in >= 95% of runs with at most
half the attempts; (b) two cases collapsing from 0.95 to 0.5 detected in >= 95% of runs
with a cap of 40; (c) unchanged runs FAIL at most 1%.
Truth mixes are those of calibrate_gate.py (numpy seed 7). Replications run in fixed chunks
with spawned seeds, so the figures do not depend on --workers.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from calibrate_gate import true_rates

from pytest_nodeval.gate import (
    AdaptiveStop,
    CaseSample,
    Diff,
    GateName,
    GatePolicy,
    Verdict,
    adaptive_design,
    case_level,
    compare,
    decide_look,
)
from pytest_nodeval.stats.run_stats import wilson_interval

CHUNK = 25
POLICY = GatePolicy()


@dataclass(frozen=True)
class Config:
    """One simulated suite and change, and the designs compared on it."""

    mix: str
    scenarios: int
    cap: int
    runs: int
    change: str = (
        "none"  # none | collapse (two cases 0.95 -> 0.5) | break (0.95 -> 0.1) | uniform (-8 pp)
    )
    fixed: tuple[int, ...] = (10,)  # fixed-repeat designs run on the same draws


def rates_of(config: Config) -> tuple[np.ndarray, np.ndarray]:
    rates = true_rates(config.mix, config.scenarios)
    if config.change in ("collapse", "break"):
        rates = rates.copy()
        rates[:2] = 0.95
        broken = 0.5 if config.change == "collapse" else 0.1
        return rates, np.concatenate([[broken, broken], rates[2:]])
    if config.change == "uniform":
        return rates, np.clip(rates - 0.08, 0.0, 1.0)
    return rates, rates


def adaptive_sample(
    case_id: str, base: CaseSample, draws: list[bool], cap: int, level: float
) -> CaseSample:
    design = adaptive_design(cap)
    taken: list[bool] = []
    while True:
        decision = decide_look(
            base.passed, base.attempts, taken, design, level, POLICY.fail_on_scenario_drop
        )
        if decision.stop is not None:
            decided = decision.stop is not AdaptiveStop.CAP
            return CaseSample(case_id, tuple(taken), adaptive_cap=cap, adaptive_decided=decided)
        taken.append(draws[len(taken)])


def simulate_chunk(config: Config, reps: int, seed: np.random.SeedSequence) -> Counter[str]:
    rng = np.random.default_rng(seed)
    base_rates, cur_rates = rates_of(config)
    level = case_level(POLICY.level(GateName.SCENARIO_REGRESSION), config.scenarios)
    counts: Counter[str] = Counter()
    longest = max((config.cap, *config.fixed))
    for _ in range(reps):
        base_draws = (rng.random((config.scenarios, longest)) < base_rates[:, None]).tolist()
        cur_draws = (rng.random((config.scenarios, longest)) < cur_rates[:, None]).tolist()
        ids = [f"s{j:03d}" for j in range(config.scenarios)]
        baseline = [
            CaseSample(i, tuple(row[: config.cap])) for i, row in zip(ids, base_draws, strict=True)
        ]
        adaptive = [
            adaptive_sample(i, b, row, config.cap, level)
            for i, b, row in zip(ids, baseline, cur_draws, strict=True)
        ]
        diff = compare(baseline, adaptive, POLICY)
        counts.update(tally("adaptive", diff, config))
        counts["adaptive attempts"] += sum(s.attempts for s in adaptive)
        for repeats in config.fixed:
            fixed_base = [
                CaseSample(i, tuple(row[:repeats])) for i, row in zip(ids, base_draws, strict=True)
            ]
            fixed = [
                CaseSample(i, tuple(row[:repeats])) for i, row in zip(ids, cur_draws, strict=True)
            ]
            fixed_diff = compare(fixed_base, fixed, POLICY)
            counts.update(tally(f"fixed{repeats}", fixed_diff, config))
            counts[f"fixed{repeats} attempts"] += repeats * config.scenarios
            agree = fixed_diff.verdict is diff.verdict
            counts[f"agree{repeats}"] += int(agree)
            counts[f"agree{repeats} fail"] += int(
                (fixed_diff.verdict is Verdict.FAIL) == (diff.verdict is Verdict.FAIL)
            )
    return counts


def tally(design: str, diff: Diff, config: Config) -> Counter[str]:
    counts: Counter[str] = Counter({f"{design} {diff.verdict}": 1})
    for gate in diff.gates:
        counts[f"{design} {gate.name} {gate.verdict}"] += 1
    if config.change in ("collapse", "break"):
        named = {
            c.case_id for c in diff.cases if c.pass_rate and c.pass_rate.verdict is Verdict.FAIL
        }
        counts[f"{design} collapsed named"] += len(named & {"s000", "s001"})
    return counts


def run_config(pool: ProcessPoolExecutor, config: Config, seed: int) -> Counter[str]:
    chunks = [min(CHUNK, config.runs - start) for start in range(0, config.runs, CHUNK)]
    seeds = np.random.SeedSequence([seed, config.scenarios, config.cap]).spawn(len(chunks))
    total: Counter[str] = Counter()
    for counts in pool.map(simulate_chunk, [config] * len(chunks), chunks, seeds):
        total.update(counts)
    return total


def share(count: int, runs: int) -> str:
    low, high = wilson_interval(count, runs)
    return f"{count / runs:.2%} [{low:.2%}, {high:.2%}]"


def row(config: Config, counts: Counter[str], seconds: float) -> str:
    n = config.runs
    per_case = counts["adaptive attempts"] / (n * config.scenarios)
    cells = [
        config.mix,
        str(config.scenarios),
        str(config.cap),
        config.change,
        str(n),
        f"**{share(counts['adaptive FAIL'], n)}**",
        f"{per_case:.2f}",
    ]
    for repeats in config.fixed:
        ratio = counts["adaptive attempts"] / counts[f"fixed{repeats} attempts"]
        cells.append(
            f"R={repeats}: FAIL {counts[f'fixed{repeats} FAIL'] / n:.2%}, "
            f"same verdict {share(counts[f'agree{repeats}'], n)}, "
            f"same FAIL/not {counts[f'agree{repeats} fail'] / n:.2%}, attempts x{ratio:.2f}"
        )
    inconclusive = counts["adaptive INCONCLUSIVE"] / n
    gates = ", ".join(f"{g.value} {counts[f'adaptive {g.value} FAIL'] / n:.2%}" for g in GateName)
    cells += [f"INC {inconclusive:.1%}; FAIL by gate: {gates}"]
    if config.change in ("collapse", "break"):
        cells += [
            f"collapsed cases named per run: {counts['adaptive collapsed named'] / n:.2f} of 2"
        ]
    cells.append(f"{seconds:.0f} s")
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| truth | S | cap | change | runs | **adaptive: run FAILs** [95% Wilson] | attempts per case "
    "| against fixed repeats (same draws) | detail | time |\n"
    "|---|---|---|---|---|---|---|---|---|---|"
)


def sections(quick: bool) -> dict[str, list[Config]]:
    runs = 200 if quick else 2000
    agree = [
        Config("mixed", 50, 10, runs, change) for change in ("none", "break", "collapse", "uniform")
    ]
    agree += [Config(mix, 50, 10, runs) for mix in ("mostly-flaky", "all-solid")]
    collapse = [
        Config(mix, 50, 40, runs // 2, "collapse", fixed=(10, 40)) for mix in ("mixed", "all-solid")
    ]
    collapse += [Config("mixed", 20, 40, runs // 2, "collapse", fixed=(10, 40))]
    aa = [
        Config(mix, s, cap, runs, fixed=())
        for mix in ("mixed", "mostly-flaky", "all-solid", "all-half")
        for s, cap in ((20, 10), (50, 10), (50, 40), (200, 10))
    ]
    return {"agree": agree, "collapse": collapse, "aa": aa}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="divide the replications by 10")
    parser.add_argument("--only", default="", help="run these sections (comma-separated)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261201)
    args = parser.parse_args(argv)
    chosen = set(filter(None, args.only.split(","))) or {"agree", "collapse", "aa"}
    print(f"live mode, default {POLICY}")
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for name, configs in sections(args.quick).items():
            if name not in chosen:
                continue
            print(f"\n### {name}\n\n{HEADER}", flush=True)
            for config in configs:
                begun = time.perf_counter()
                counts = run_config(pool, config, args.seed)
                print(row(config, counts, time.perf_counter() - begun), flush=True)
    print(f"\ntotal {time.perf_counter() - started:.0f} s wall")


if __name__ == "__main__":
    main()
