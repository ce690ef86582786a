"""The `pdf` tool reads its file through the world: the same bytes in a docker and a bwrap world."""

from __future__ import annotations

from pathlib import Path

from pytest_nodeval.agent.config import PdfSpec
from pytest_nodeval.agent.tools import PdfTool, ToolContext

from ..pdf_samples import make_pdf
from .conftest import MakeWorld


def test_the_pdf_tool_reads_a_file_written_in_the_world(
    make_world: MakeWorld, backend: str, tmp_path: Path
) -> None:
    seed = tmp_path / "seed"
    (seed / "docs").mkdir(parents=True)
    (seed / "docs" / "seeded.pdf").write_bytes(
        make_pdf(["Seeded first page", "Seeded second page"])
    )
    world = make_world(backend, seed_dir=seed)
    world.write("made/later.pdf", make_pdf(["Written by the agent"]))
    ctx = ToolContext(world=world, call_id="c1", timeout_s=30.0, ask=lambda call_id, question: "")
    tool = PdfTool(PdfSpec())

    seeded = tool.run({"path": "docs/seeded.pdf", "pages": "2"}, ctx)
    later = tool.run({"path": f"{world.workdir}/made/later.pdf"}, ctx)
    missing = tool.run({"path": "docs/absent.pdf"}, ctx)

    assert (
        seeded.ok
        and seeded.result["page_count"] == 2
        and "Seeded second page" in seeded.result["text"]
    )
    assert later.ok and "Written by the agent" in later.result["text"]
    assert not missing.ok and missing.error.startswith("docs/absent.pdf: ")
