"""The xdist scheduler of `-n` with --nodeval-concurrency N: tests handed out in chunks of N.

xdist's LoadScheduling keeps only a few tests queued on each worker (it refills a worker
when its queue runs low, often at two), so a worker could start only that many attempts
ahead (plugin/ahead.py). This one keeps more than N queued on every worker while tests
remain: each worker starts with up to 2N consecutive tests (its fair share when the suite
is smaller) and gets N more whenever N or fewer are left, so N attempts stay in flight.
Consecutive tests keep a case's repeats together, as with LoadScheduling.

Used only with `--dist load` (what `-n` means by default); other --dist modes keep
their own scheduler, and a worker then starts ahead what its queue holds.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]  # xdist ships no py.typed


class ChunkedLoadScheduling(LoadScheduling):  # type: ignore[misc]  # untyped base
    collection: list[str] | None
    pending: list[int]

    def __init__(self, config: pytest.Config, log: Any = None, *, chunk: int) -> None:
        super().__init__(config, log)
        self.chunk = max(2, chunk)

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is not None:  # a node joined later
            for node in self.nodes:
                self.check_schedule(node)
            return
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return
        collection: list[str] = next(iter(self.node2collection.values()))
        self.collection = collection
        self.pending[:] = range(len(collection))
        if not collection:
            return
        share = -(-len(self.pending) // len(self.nodes))
        for node in self.nodes:
            self._send_tests(node, min(share, 2 * self.chunk))
        if not self.pending:
            for node in self.nodes:
                node.shutdown()

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        if node.shutting_down:
            return
        if not self.pending:
            node.shutdown()  # it finishes what it holds, then stops
            return
        if len(self.node2pending[node]) <= self.chunk:
            self._send_tests(node, self.chunk)
