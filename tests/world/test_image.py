"""The world image is built once per content, even when several processes ask at once."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_nodeval.errors import WorldError
from pytest_nodeval.world import image as image_module
from pytest_nodeval.world.image import context_digest, ensure_image

# Asks for the image from a separate process, as an xdist worker would. Imported, it says
# "ready" on stdout and waits for a line on stdin: both start together, so the race is real.
_ASK_FOR_IMAGE = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from pytest_nodeval.world.image import ensure_image
    print("ready", flush=True)
    sys.stdin.readline()
    image = ensure_image(context_dir=Path(sys.argv[1]), lock_dir=Path(sys.argv[2]))
    print(json.dumps({"tag": image.tag, "built": image.built}))
    """
)


def _wait_until_ready(asker: subprocess.Popen[str], deadline: float) -> None:
    """Block until the asker has said "ready" (it has imported and waits for its go)."""
    assert asker.stdout is not None
    ready, _, _ = select.select([asker.stdout], [], [], max(0.0, deadline - time.monotonic()))
    line = asker.stdout.readline() if ready else ""  # "" at EOF: the asker died
    assert line == "ready\n", f"an asker did not get ready in time (it said {line!r})"


@pytest.fixture
def own_context(world_image: str, tmp_path: Path) -> Iterator[Path]:
    """A build context of its own (a unique label), so its tag is new and can be removed."""
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"ARG BASE_IMAGE\nFROM ${{BASE_IMAGE}}\nLABEL nodeval.test={uuid.uuid4().hex}\n"
    )
    yield context
    _remove_images_built_from(context)


def _remove_images_built_from(context: Path) -> None:
    from pytest_nodeval.world.docker import docker_client

    client = docker_client()
    dockerfile = (context / "Dockerfile").read_text()
    for image in client.images.list(filters={"label": "nodeval.managed=true"}):
        label = image.labels.get("nodeval.test")
        if label and label in dockerfile:
            client.images.remove(image.id, force=True)


def test_two_processes_at_once_build_it_once(own_context: Path, tmp_path: Path) -> None:
    askers = [
        subprocess.Popen(
            [sys.executable, "-c", _ASK_FOR_IMAGE, str(own_context), str(tmp_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 120
        for asker in askers:
            _wait_until_ready(asker, deadline)
        for asker in askers:  # both are waiting: let them go at once
            assert asker.stdin is not None
            asker.stdin.write("go\n")
            asker.stdin.flush()
        answers = [json.loads(asker.communicate(timeout=300)[0]) for asker in askers]
    finally:
        for asker in askers:
            if asker.poll() is None:
                asker.kill()
                asker.wait()
    assert [a["built"] for a in answers].count(True) == 1, answers
    assert answers[0]["tag"] == answers[1]["tag"]


def test_a_later_ensure_reuses_the_image(own_context: Path, tmp_path: Path) -> None:
    first = ensure_image(context_dir=own_context, lock_dir=tmp_path)
    image_module._known_ready.clear()  # forget the in-process memo: ask the engine again
    second = ensure_image(context_dir=own_context, lock_dir=tmp_path)
    third = ensure_image(context_dir=own_context, lock_dir=tmp_path)  # from the memo
    assert first.built and not second.built and not third.built
    assert first.tag == second.tag == third.tag and first.tag.startswith("nodeval-world:")


def test_the_tag_follows_the_content(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    before = context_digest(tmp_path, "sha256:base-one")
    assert context_digest(tmp_path, "sha256:base-one") == before
    assert context_digest(tmp_path, "sha256:base-two") != before
    (tmp_path / "Dockerfile").write_text("FROM scratch\nLABEL changed=1\n")
    assert context_digest(tmp_path, "sha256:base-one") != before


def test_the_dockerignore_keeps_unrelated_files_out_of_the_digest(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / ".dockerignore").write_text("*\n!Dockerfile\n")
    before = context_digest(tmp_path, "sha256:base")
    (tmp_path / "unrelated.py").write_text("print('edited')\n")
    assert context_digest(tmp_path, "sha256:base") == before


def test_a_missing_base_image_names_the_offline_script(world_image: str, tmp_path: Path) -> None:
    missing = f"nodeval-missing-base:{uuid.uuid4().hex[:8]}"
    with pytest.raises(WorldError) as caught:
        ensure_image(base_image=missing, lock_dir=tmp_path)
    message = str(caught.value)
    assert missing in message and "scripts/offline-base-image.sh" in message
    assert "NODEVAL_BASE_IMAGE" in message
