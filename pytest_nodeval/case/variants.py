"""Matrices: every selected case run once per variant (`--nodeval-matrix=KEY=A,B`).

A variant sets some of these, one value each (the variants are the product of the flags):

- `provider`: the case's first provider, replaced by the entry of that name in config.yaml's
  `variants:` block;
- `model`: the model of the case's first provider (after `provider`, when both are given);
- `system_prompt`: the system prompt, read from a file in the case's `input/` directory;
- any other KEY: the value of `{{ vars.KEY }}` in the case's YAML files.

A variant is a scenario of its own, `<case>@<label>` (`qa@model=mock-2`), with its own journal
under `journal/@<label>/`, so replay needs each variant recorded. `report/variants.py`
compares the variants with the first.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Final

VARIANT_SEPARATOR: Final = "@"
"""Between a scenario's id and its variant's label, in scenario ids, test ids and journal names."""
CASE_KEYS: Final = ("provider", "model", "system_prompt")
"""The keys that set part of input/config.yaml; any other key is a `{{ vars.KEY }}`."""
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE = re.compile(r"^[A-Za-z0-9._:+-]+$")
"""No '/' (a label names a journal directory) nor '@' or ',' (they separate labels)."""


@dataclass(frozen=True, slots=True)
class Variant:
    """One combination of the matrix's values: `(("model", "mock-2"), ("tone", "formal"))`."""

    values: tuple[tuple[str, str], ...]

    @property
    def label(self) -> str:
        """`model=mock-2,tone=formal`: in test ids, scenario ids and journal names."""
        return ",".join(f"{key}={value}" for key, value in self.values)

    def get(self, key: str) -> str | None:
        return next((value for k, value in self.values if k == key), None)

    @property
    def vars(self) -> dict[str, str]:
        """The values of the keys that are `{{ vars.KEY }}` in the case's files."""
        return {key: value for key, value in self.values if key not in CASE_KEYS}


def parse_matrix(flags: list[str], where: str) -> tuple[Variant, ...]:
    """The variants of `KEY=A,B` flags, in order (the first is the one the others are compared
    with); a malformed flag or a key given twice is a ValueError naming it."""
    axes: dict[str, list[str]] = {}
    for flag in flags:
        key, equals, values = flag.partition("=")
        key = key.strip()
        if not equals or not _KEY.fullmatch(key):
            raise ValueError(f"{where}={flag!r}: not KEY=VALUE[,VALUE...] (e.g. model=a,b)")
        if key in axes:
            raise ValueError(f"{where}: {key} is given twice; give its values in one flag")
        choices = [value.strip() for value in values.split(",")]
        bad = next((v for v in choices if not _VALUE.fullmatch(v)), None)
        if bad is not None:
            raise ValueError(
                f"{where}={flag!r}: value {bad!r} (letters, digits and . _ : + - only)"
            )
        if len(set(choices)) != len(choices):
            raise ValueError(f"{where}={flag!r}: a value is given twice")
        axes[key] = choices
    keys = list(axes)
    return tuple(
        Variant(tuple(zip(keys, combination, strict=True)))
        for combination in itertools.product(*axes.values())
    )


def split_variant(scenario_id: str) -> tuple[str, str | None]:
    """(`qa/sum`, `model=a`) from `qa/sum@model=a`; a scenario without a variant: (id, None)."""
    base, separator, label = scenario_id.partition(VARIANT_SEPARATOR)
    return (base, label) if separator else (scenario_id, None)
