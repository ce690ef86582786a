"""An xdist scheduler that keeps every test of a case on one worker, in collection order.

Adaptive repeats decide a case's next repeat from its earlier ones, so all of them must run
where those results are known. This is xdist's loadgroup scheduling with each case as a
group: a case.yaml's tests, and Python scenarios bound to the case (their test id ends in
the case's), form one work unit; every other test is its own unit, as with `--dist load`,
and `xdist_group` marks keep working. Imported only under xdist with adaptive repeats on.
"""

from __future__ import annotations

import re
from typing import Any

from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

from .controller import parse_case_nodeid

_REPEAT = re.compile(r"-r\d+$")


class CaseScheduling(LoadGroupScheduling):  # type: ignore[misc]
    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        self._case_ids: list[str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        case_id = self._case_of(nodeid)
        return f"nodeval-case:{case_id}" if case_id is not None else super()._split_scope(nodeid)

    def _case_of(self, nodeid: str) -> str | None:
        parsed = parse_case_nodeid(nodeid)
        if parsed is not None:
            return parsed[0]
        if not nodeid.endswith("]") or "[" not in nodeid:
            return None
        param = "-" + _REPEAT.sub("", nodeid[nodeid.rindex("[") + 1 : -1]) + "-"
        # The longest case id that is a whole dash-separated part of the test's parameters.
        return next((cid for cid in self._known_ids() if f"-{cid}-" in param), None)

    def _known_ids(self) -> list[str]:
        if self._case_ids is None:
            if self.collection is None:
                return []  # not scheduled yet: nothing is known
            parsed = (parse_case_nodeid(nodeid) for nodeid in self.collection or [])
            ids = {found[0] for found in parsed if found is not None}
            self._case_ids = sorted(ids, key=len, reverse=True)
        return self._case_ids
