"""`nodeval samples`: list the sessions the sampler captured, newest first."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import directory_problem, existing_directory_problem, refuse

if TYPE_CHECKING:  # the command table imports this module for --help: keep it light
    from ..sampling.store import StoredSample


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="The sampler's out_dir (default: ~/.nodeval/samples).",
    )
    parser.add_argument(
        "--reason",
        choices=("sampled", "failed"),
        default=None,
        help="Only samples captured for this reason.",
    )


def run(args: argparse.Namespace) -> int:
    from ..sampling.store import DEFAULT_SAMPLES_DIR, list_samples

    directory = (args.dir or DEFAULT_SAMPLES_DIR).expanduser()
    # The default directory missing is a sampler that never captured yet: no samples, not a
    # mistake. A --dir that does not exist is most likely a typo: say so.
    check = existing_directory_problem if args.dir is not None else directory_problem
    refuse("--dir", check(directory))
    samples = [
        s
        for s in reversed(list_samples(directory))
        if args.reason is None or (s.info is not None and s.info.reason == args.reason)
    ]
    if not samples:
        print(f"no samples in {directory}")
        return 0
    rows = [("ID", "CAPTURED (UTC)", "REASON", "SIZE", "ERROR")] + [_row(s) for s in samples]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        # strict=False: four widths for five cells; the last (ERROR) is printed unpadded.
        cells = zip(row, widths, strict=False)
        print("  ".join(cell.ljust(width) for cell, width in cells) + "  " + row[4])
    total = sum(s.size for s in samples)
    print(f"\n{len(samples)} sample(s), {human_size(total)} in {directory}")
    print(f"make one a case: nodeval promote {directory}/<ID> --id <case-id>")
    return 0


def _row(sample: StoredSample) -> tuple[str, str, str, str, str]:
    info = sample.info
    when = sample.captured_at[:19].replace("T", " ")
    reason = info.reason if info else "?"
    error = (info.error or "") if info else "(sample.json unreadable)"
    error = " ".join(error.split())
    return (
        sample.path.name,
        when,
        reason,
        human_size(sample.size),
        error[:80] + ("..." if len(error) > 80 else ""),
    )


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns
