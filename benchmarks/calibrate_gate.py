"""Calibrate the CI gates by simulation: false alarms under no change, power for real changes.

Each replication is one CI run: a baseline run and a current run of the same suite, with
independent attempts, fed through ``pytest_nodeval.gate.compare`` in live mode with the
default GatePolicy, the same call CI makes. Goals (docs/statistics.md §4.3): at most 1% of
unchanged runs FAIL, all gates together, for any mix of true pass rates, 20-200 scenarios
and 3-20 repeats; a uniform -8 pp drop at 50 x 10 caught in >= 90% of runs on the mixed truth.

Truth mixes (per-scenario true pass rates, drawn once per configuration, numpy seed 7):
  mixed         60% solid in [0.95, 1], 40% flaky in [0.5, 0.95] (docs/statistics.md §4.3)
  mostly-flaky  80% in [0.3, 0.9], 20% solid in [0.95, 1]
  all-solid     every scenario in [0.95, 1]
  all-half      every scenario at 0.5 (the noisiest possible truth)
  at-0.95       every scenario at 0.95 (the small suites of issue 29.1)
  beta-A-B      Beta(A, B) for (1, 1), (2, 2), (5, 2), (8, 1); bimodal: half in [0.9, 1], half
  in [0.1, 0.4]; near-solid: every scenario in [0.85, 0.97] (the families of issue 29.2)

    .venv/bin/python benchmarks/calibrate_gate.py                # everything (~30-40 min, 2 procs)
    .venv/bin/python benchmarks/calibrate_gate.py --quick        # 10x fewer runs
    .venv/bin/python benchmarks/calibrate_gate.py --repeats 3,5  # only the rows at 3 or 5 repeats
    .venv/bin/python benchmarks/calibrate_gate.py --only power   # one section (--only takes aa,
                                  # timing, power, latency, cost, pilot, small, families,
                                  # flaky-power)

The pilot section (issue 29.6) runs the timed configurations twice per replication: as CI does,
where a latency, token or cost bootstrap stops after its 200-resample pilot when the decision is
clear, or later once enough ratios are at or below 1 (the exact stop), and with every one of the
4,000 resamples. It counts the runs where any gate's verdict differs (the goal: none) and the
bounds decided before all 4,000 ("pilot alone": the pilot or the exact stop).

The flaky-power section (issue 29.2) drops every case by 8 pp over the family and the original
mixes at 20-200 cases x 5-20 repeats. Its rows also count, on the same runs, how often the suite
gate's test would FAIL at 0.75% and at 1% (the threshold still required) beside the gate's own
0.5%: the paired-test limit the issue sets is a test at the whole 1% budget.

Replications run in fixed chunks with spawned seeds: the figures do not depend on --workers.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from pytest_nodeval.gate import CaseSample, Diff, GateName, GatePolicy, Verdict, compare
from pytest_nodeval.stats import significance
from pytest_nodeval.stats.gate import _scenario_gate_can_fail
from pytest_nodeval.stats.run_stats import wilson_interval
from pytest_nodeval.stats.significance import weighted_sign_flip_p_value

CHUNK = 50
POLICY = GatePolicy()
GATES = list(GateName)
# Suite levels at which the power rows also count the suite test's FAILs: three quarters and
# all of the default 1% budget (docs/statistics.md §4.3).
WIDER_LEVELS = (0.0075, 0.01)


@dataclass(frozen=True)
class Config:
    """One simulated design and truth, and how many CI runs it gets."""

    mix: str
    scenarios: int
    repeats: int
    runs: int
    drop: float = 0.0  # pass-rate drop in the current run (absolute)
    flaky_only: bool = False  # drop only the scenarios with true rate < 0.95, not every one
    timed: bool = False  # also draw latencies, tokens and costs (every gate sees data)
    slowdown: float = 1.0  # current latencies multiplied by this, every scenario
    dearer: float = 1.0  # current costs multiplied by this, every scenario (tokens unchanged)
    pilot_check: bool = False  # also compare with every bootstrap resample (no early stop)


# The family of truths the suite test is calibrated on (issue 29.2): Beta(a, b) pass rates,
# a bimodal suite and a near-solid one, beside the four mixes above.
BETA_MIXES = {"beta-1-1": (1, 1), "beta-2-2": (2, 2), "beta-5-2": (5, 2), "beta-8-1": (8, 1)}


def true_rates(mix: str, scenarios: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    solid = rng.uniform(0.95, 1.0, scenarios)
    if mix == "all-solid":
        return solid
    if mix == "all-half":
        return np.full(scenarios, 0.5)
    if mix == "at-0.95":
        return np.full(scenarios, 0.95)
    if mix in BETA_MIXES:
        return rng.beta(*BETA_MIXES[mix], scenarios)
    if mix == "bimodal":  # half near-solid, half mostly failing
        half = scenarios // 2
        return np.concatenate(
            [rng.uniform(0.9, 1.0, scenarios - half), rng.uniform(0.1, 0.4, half)]
        )
    if mix == "near-solid":
        return rng.uniform(0.85, 0.97, scenarios)
    flaky_share, low, high = {"mixed": (0.4, 0.5, 0.95), "mostly-flaky": (0.8, 0.3, 0.9)}[mix]
    flaky = round(flaky_share * scenarios)
    return np.concatenate([solid[: scenarios - flaky], rng.uniform(low, high, flaky)])


def dropped_rates(config: Config, rates: np.ndarray) -> np.ndarray:
    dropped = np.clip(rates - config.drop, 0.0, 1.0)
    return np.where(rates < 0.95, dropped, rates) if config.flaky_only else dropped


def simulate_run(
    rng: np.random.Generator,
    rates: np.ndarray,
    repeats: int,
    medians: np.ndarray | None,
    slowdown: float,
    dearer: float = 1.0,
) -> list[CaseSample]:
    passed = (rng.random((len(rates), repeats)) < rates[:, None]).tolist()
    if medians is None:
        return [CaseSample(f"s{j:03d}", tuple(row)) for j, row in enumerate(passed)]
    latencies = (
        slowdown * medians[:, None] * rng.lognormal(0, 0.35, (len(rates), repeats))
    ).tolist()
    drawn = (medians[:, None] * rng.lognormal(0, 0.3, (len(rates), repeats))).astype(int)
    # Cost follows the tokens (USD 5 per million) with the input/output mix as extra noise.
    costs = (dearer * drawn * 5e-6 * rng.lognormal(0, 0.2, drawn.shape)).tolist()
    tokens = drawn.tolist()
    return [
        CaseSample(f"s{j:03d}", tuple(row), tuple(latencies[j]), tuple(tokens[j]), tuple(costs[j]))
        for j, row in enumerate(passed)
    ]


def tally(diff: Diff) -> Counter[str]:
    counts: Counter[str] = Counter({"any FAIL": int(diff.verdict is Verdict.FAIL)})
    # The suite gate FAILs only when the equal-weighted suite fell by its threshold: the share
    # of runs where it did caps the suite gate's power, whatever its test.
    delta = diff.suite.delta
    fell = delta is not None and delta <= -POLICY.fail_on_score_drop + 1e-9
    counts["suite fell by threshold"] = int(fell)
    # The suite test before the stratified permutation, on the same runs.
    counts["suite FAIL before"] = int(
        fell and previous_suite_p(diff) <= POLICY.level(GateName.SUITE_PASS_RATE)
    )
    # Where the power goes (issue 29.2): the same test on the same runs at larger shares of
    # the 1% budget than the suite gate's half, the threshold still required.
    p_value = diff.suite.p_value
    for level in WIDER_LEVELS:
        counts[f"suite FAIL at {level:g}"] = int(fell and p_value is not None and p_value <= level)
    for gate in diff.gates:
        counts[f"{gate.name} {gate.verdict}"] += 1
    return counts


def previous_suite_p(diff: Diff) -> float:
    """The weighted sign flip over scenarios, the suite test before the stratified permutation."""
    tables = [
        (m.baseline_passed, m.baseline_attempts, m.current_passed, m.current_attempts)
        for m in (c.pass_rate for c in diff.cases)
        if m is not None
    ]
    return weighted_sign_flip_p_value(tables) if tables else 1.0


def simulate_chunk(config: Config, reps: int, seed: np.random.SeedSequence) -> Counter[str]:
    rng = np.random.default_rng(seed)
    rates = true_rates(config.mix, config.scenarios)
    current = dropped_rates(config, rates)
    medians = None
    if config.timed:  # docs/statistics.md §4.3: medians 1.5-20 s, lognormal sigma 0.35
        medians = np.exp(
            np.random.default_rng(11).uniform(np.log(1500), np.log(20000), config.scenarios)
        )
    counts: Counter[str] = Counter()
    for _ in range(reps):
        baseline = simulate_run(rng, rates, config.repeats, medians, 1.0)
        candidate = simulate_run(
            rng, current, config.repeats, medians, config.slowdown, config.dearer
        )
        diff = compare(baseline, candidate, POLICY)
        counts.update(tally(diff))
        if config.pilot_check:
            counts.update(pilot_tally(diff, compare_in_full(baseline, candidate)))
    return counts


def compare_in_full(baseline: list[CaseSample], current: list[CaseSample]) -> Diff:
    """compare() with the bootstraps' pilot as long as the whole run: no early decision."""
    pilot = significance._PILOT_RESAMPLES
    significance._PILOT_RESAMPLES = POLICY.bootstrap_iterations
    try:
        return compare(baseline, current, POLICY)
    finally:
        significance._PILOT_RESAMPLES = pilot


def pilot_tally(diff: Diff, full: Diff) -> Counter[str]:
    """Whether stopping after the pilot changed a verdict, and which bounds it decided alone."""
    counts: Counter[str] = Counter()
    verdicts = [(g.name, g.verdict) for g in diff.gates]
    counts["pilot changed a verdict"] = int(verdicts != [(g.name, g.verdict) for g in full.gates])
    for gate, whole in zip(diff.gates, full.gates, strict=True):
        bound, full_bound = gate.numbers.get("lower_bound"), whole.numbers.get("lower_bound")
        if gate.name is not GateName.SUITE_PASS_RATE and bound is not None:
            counts[f"{gate.name} bootstrapped"] += 1
            counts[f"{gate.name} pilot decided"] += int(bound != full_bound)
    return counts


def run_config(pool: ProcessPoolExecutor, config: Config, runs: int, seed: int) -> Counter[str]:
    chunks = [min(CHUNK, runs - start) for start in range(0, runs, CHUNK)]
    seeds = np.random.SeedSequence([seed, config.scenarios, config.repeats]).spawn(len(chunks))
    total: Counter[str] = Counter()
    for counts in pool.map(simulate_chunk, [config] * len(chunks), chunks, seeds):
        total.update(counts)
    return total


def paired_limit(config: Config, honest: bool = False, alpha: float = 0.01) -> float:
    """Paired-test limit: 1 - Phi(z_{1-alpha} - drop / sd_mean), at the whole 1% budget by
    default (docs/statistics.md §4.3).

    Its sd_mean = sqrt(2 mean_j p_j(1-p_j) / (R S)) takes the baseline's noise twice;
    ``honest`` uses the noise of both runs instead (a drop from 0.97 to 0.89 is noisier).
    The drop is the true one, after clipping at 0.
    """
    rates = true_rates(config.mix, config.scenarios)
    current = dropped_rates(config, rates)
    noise = rates * (1 - rates) + (current * (1 - current) if honest else rates * (1 - rates))
    sd_mean = (float(np.mean(noise)) / (config.repeats * config.scenarios)) ** 0.5
    drop = float(np.mean(rates - current))
    return 1.0 - NormalDist().cdf(NormalDist().inv_cdf(1.0 - alpha) - drop / sd_mean)


def suite_level(config: Config) -> float:
    """The level the suite gate runs at in this design: its share, plus the per-case gate's
    when no case could FAIL that gate (docs/statistics.md §4.1)."""
    shape = [(config.repeats, config.repeats, None)] * config.scenarios
    level = POLICY.level(GateName.SUITE_PASS_RATE)
    if _scenario_gate_can_fail(shape, POLICY):
        return level
    return level + POLICY.level(GateName.SCENARIO_REGRESSION)


def pilot_summary(counts: Counter[str], runs: int) -> str:
    decided = ", ".join(
        f"{g}: pilot alone {counts[f'{g} pilot decided']}/{counts[f'{g} bootstrapped']}"
        for g in GATES[2:]
        if counts[f"{g} bootstrapped"]
    )
    changed = counts["pilot changed a verdict"]
    return f"verdict changed by the pilot in {changed}/{runs} runs" + (
        f" ({decided})" if decided else ""
    )


def share(count: int, runs: int) -> str:
    low, high = wilson_interval(count, runs)
    return f"{count / runs:.2%} [{low:.2%}, {high:.2%}]"


def print_row(config: Config, runs: int, counts: Counter[str], seconds: float, goal: str) -> None:
    fails = " | ".join(f"{counts[f'{g} FAIL'] / runs:.2%}" for g in GATES)
    unsure = " | ".join(f"{counts[f'{g} INCONCLUSIVE'] / runs:.1%}" for g in GATES[:3])
    print(
        f"| {config.mix} | {config.scenarios} | {config.repeats} | {runs} "
        f"| **{share(counts['any FAIL'], runs)}** | {fails} | {unsure} | {goal} "
        f"| {seconds:.0f} s |",
        flush=True,
    )


HEADER = (
    "| truth | S | R | runs | **any gate FAILs** [95% Wilson] | suite FAIL | scenario FAIL "
    "| latency FAIL | tokens FAIL | cost FAIL | suite INC | scenario INC | latency INC "
    "| goal | time |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def sections(quick: bool) -> dict[str, list[tuple[Config, str]]]:
    aa_runs = 200 if quick else 2000
    aa = [
        (Config(mix, s, r, aa_runs), "<= 1%")
        for mix in ("mixed", "mostly-flaky", "all-solid")
        for s in (20, 50, 200)
        for r in (3, 10, 20)
    ] + [(Config("all-half", s, r, aa_runs), "<= 1%") for s, r in ((20, 3), (50, 10), (200, 20))]
    timing = [
        (Config("mixed", s, r, aa_runs, timed=True), "<= 1%")
        for s, r in ((20, 3), (50, 10), (200, 20))
    ] + [(Config("mostly-flaky", 50, 10, aa_runs, timed=True), "<= 1%")]
    power_runs = 200 if quick else 2000
    power = [
        (Config(mix, 50, 10, power_runs, drop=0.08), "")
        for mix in ("mixed", "mostly-flaky", "all-half", "all-solid")
    ] + [
        (Config("mixed", 50, 20, power_runs, drop=0.08), ""),
        (Config("mixed", 200, 10, power_runs, drop=0.08), ""),
        # The weighting's cost: -15 pp on the 20 flaky scenarios only (6 pp over the suite).
        (Config("mixed", 50, 10, power_runs, drop=0.15, flaky_only=True), ""),
    ]
    family = ("beta-1-1", "beta-2-2", "beta-5-2", "beta-8-1", "bimodal", "near-solid")
    # Small suites (issue 29.1): the test's floor is set by the attempts, not by 2^-S.
    small = [
        (Config(mix, s, r, aa_runs), "<= 1%")
        for mix in ("mixed", "at-0.95")
        # 3 and 5 repeats: below the per-case floor, where the suite gate runs at 0.75% (§4.1).
        for s, r in ((3, 10), (3, 40), (5, 10), (5, 40), (8, 20), (3, 5), (5, 3), (8, 5))
    ] + [
        (Config("at-0.95", 5, 40, power_runs, drop=0.20), ">= 90%"),
        (Config("at-0.95", 3, 40, power_runs, drop=0.20), ""),
        (Config("mixed", 8, 20, power_runs, drop=0.20), ""),
    ]
    families = [
        (Config(mix, s, r, aa_runs), "<= 1%")
        for mix in family
        for s, r in ((5, 40), (20, 5), (50, 10), (200, 20))
    ] + [
        (Config(mix, s, r, power_runs, drop=0.08), "")
        for mix in (*family, "mostly-flaky")
        for s, r in ((20, 20), (50, 10), (200, 5))
    ]
    # Where the suite gate's power goes on flaky truths (issue 29.2): -8 pp on every case over
    # the family and the original mixes, at 20-200 cases x 5-20 repeats.
    flaky_power = [
        (Config(mix, s, r, power_runs, drop=0.08), "")
        for mix in (*family, "mostly-flaky", "mixed", "all-half")
        for s, r in ((20, 5), (20, 20), (50, 10), (200, 5))
    ]
    latency_runs = 40 if quick else 400
    latency = [
        (Config("mixed", 50, 10, latency_runs, timed=True, slowdown=factor), "")
        for factor in (1.3, 1.5)
    ] + [(Config("mixed", 200, 10, latency_runs // 2, timed=True, slowdown=1.3), "")]
    cost = [
        (Config("mixed", 50, 10, latency_runs, timed=True, dearer=factor), "")
        for factor in (1.2, 1.3)
    ] + [(Config("mixed", 20, 3, latency_runs, timed=True, dearer=1.3), "")]
    # A/A timed rows at a tenth of their runs, slowdown and cost rows at a quarter: each run
    # compares twice, and the full bootstraps are what the pilot saves.
    pilot = [
        (
            replace(
                c, runs=c.runs // (4 if c.slowdown != 1 or c.dearer != 1 else 10), pilot_check=True
            ),
            "",
        )
        for c, _ in timing + latency + cost
    ]
    return {
        "aa": aa,
        "timing": timing,
        "power": power,
        "latency": latency,
        "cost": cost,
        "pilot": pilot,
        "small": small,
        "families": families,
        "flaky-power": flaky_power,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="divide the replications by 10")
    parser.add_argument("--only", default="", help="run these sections (comma-separated)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument(
        "--repeats", default="", help="only the rows with these repeats (comma-separated)"
    )
    args = parser.parse_args(argv)
    chosen = set(filter(None, args.only.split(","))) or set(sections(args.quick))
    print(f"live mode, default {POLICY}")
    started = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for name, configs in sections(args.quick).items():
            if name not in chosen:
                continue
            print(f"\n### {name}\n\n{HEADER}")
            repeats = {int(r) for r in args.repeats.split(",") if r}
            for config, goal in configs:
                if repeats and config.repeats not in repeats:
                    continue
                begun = time.perf_counter()
                counts = run_config(pool, config, config.runs, args.seed)
                if config.drop:
                    level = suite_level(config)
                    limits = (
                        f"paired-test limit {paired_limit(config):.1%}, "
                        f"both runs' noise {paired_limit(config, True):.1%}, "
                        f"at the suite level {paired_limit(config, True, level):.1%}"
                    )
                    ceiling = counts["suite fell by threshold"] / config.runs
                    before = counts["suite FAIL before"] / config.runs
                    wider = ", ".join(
                        f"at {level:.2%} {counts[f'suite FAIL at {level:g}'] / config.runs:.1%}"
                        for level in WIDER_LEVELS
                    )
                    goal = (
                        f"suite fell >= 5 pp in {ceiling:.1%}; weighted sign flip {before:.1%}; "
                        f"suite test {wider}"
                    )
                    if not config.flaky_only:
                        goal = f"{limits}; {goal}"
                elif config.slowdown != 1.0:
                    goal = f"x{config.slowdown:g} p95: FAIL wanted"
                elif config.dearer != 1.0:
                    goal = f"x{config.dearer:g} cost per attempt: cost FAIL wanted"
                if config.pilot_check:
                    goal = "; ".join(filter(None, [goal, pilot_summary(counts, config.runs)]))
                print_row(config, config.runs, counts, time.perf_counter() - begun, goal)
    print(f"\ntotal {time.perf_counter() - started:.0f} s wall")


if __name__ == "__main__":
    main()
