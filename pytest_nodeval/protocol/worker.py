"""The worker process of `nodeval inspect-mode`: runs one session and answers with one response.

Started by `inspect_mode.run_worker` as `python -m pytest_nodeval.inspect_worker`, with a
`WorkerJob` on stdin; writes one `InspectResponse` line to stdout. It is a process of its
own so that the parent can stop it, and whatever it started, at the request's deadline.
Not a public interface: the protocol is `nodeval inspect-mode`.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .inspect_mode import (
    EXIT_CODES,
    ErrorCode,
    ErrorInfo,
    InspectResponse,
    Usage,
    WorkerJob,
    claim_stdout,
    clip,
    error_response,
    kill_children,
    status_for,
)

logger = logging.getLogger(__name__)

RUN_ID = "inspect-mode"
"""The case id of a run made from config_path (it has no case.yaml to name it)."""


def run_job(job: WorkerJob) -> InspectResponse:
    """Load what the request names, run the session, and describe what it did."""
    from ..errors import NodevalError, ProviderError, ReplayDivergence
    from ..runner.session import AttemptSettings, run_case

    context = {"session_id": job.session_id, "mode": job.mode}
    try:
        case = load_run(job)
        # NODEVAL_WORLD picks the world backend (docker, bwrap, local); default: the best available.
        world = os.environ.get("NODEVAL_WORLD") or None
        settings = AttemptSettings(
            mode=job.mode, session_id=job.session_id, run_id=RUN_ID, world_backend=world
        )
        observed = run_case(case, settings, Path(job.journal_dir))
    except ProviderError as exc:
        return error_response("provider_error", str(exc), **context)
    except ReplayDivergence as exc:
        return error_response("replay_divergence", str(exc), **context)
    except NodevalError as exc:
        return error_response("config_error", str(exc), _field_at_fault(job), **context)
    return response_for(observed, job)


def load_run(job: WorkerJob) -> Any:
    """The case to run: the request's case_dir, or a one-off case around its config_path."""
    from ..agent.config import load_config
    from ..case.directory import Case, CaseSpec, load_case
    from ..people.inputs import InputsSpec, ScriptedUserSpec

    request = job.request
    if request.case_dir is not None:
        return load_case(Path(request.case_dir).absolute())
    assert request.config_path is not None  # check_combination made sure
    config = load_config(Path(request.config_path).absolute())
    inputs = request.inputs if request.inputs is not None else [request.user_input or ""]
    user = ScriptedUserSpec(kind="scripted", inputs=inputs)
    # The scratch directory stands in for the case directory: no journal to compare
    # with, and an empty world seed.
    return Case(
        RUN_ID, Path(job.scratch_dir), CaseSpec(id=RUN_ID), config, InputsSpec(user=user), ()
    )


def _field_at_fault(job: WorkerJob) -> str:
    return "config_path" if job.request.config_path is not None else "case_dir"


def outcome_code(observed: Any) -> ErrorCode | None:
    """The error code for how a session ended (None when it ended ok)."""
    status = observed.status
    if status == "divergence":
        return "replay_divergence"
    if status == "ok":
        return None
    if status == "error" and observed.end.error_kind == "provider":
        return "provider_error"
    if status in ("limit", "error"):
        return "session_failed"
    return "internal_error"  # no session.end: the engine did not finish its own journal


def response_for(observed: Any, job: WorkerJob) -> InspectResponse:
    from ..journal.reader import dump_events

    metrics = observed.metrics()
    code = outcome_code(observed)
    return InspectResponse(
        status=status_for(code),
        exit_code=EXIT_CODES[code or "ok"],
        error=_error_info(code, observed.status, metrics["reason"]),
        session_id=job.session_id,
        mode=job.mode,
        session_status=observed.status,
        output=observed.output,
        usage=Usage(input_tokens=metrics["input_tokens"], output_tokens=metrics["output_tokens"]),
        latency_ms=metrics["latency_ms"],
        turns=metrics["turns"],
        llm_calls=metrics["llm_calls"],
        tool_calls=metrics["tool_calls"],
        journal_dir=job.journal_dir if job.request.journal_dir is not None else None,
        events=dump_events(observed.events) if job.request.include_events else None,
    )


def _error_info(code: ErrorCode | None, status: str, reason: str | None) -> ErrorInfo | None:
    if code is None:
        return None
    message = reason or "no reason given"
    if code == "session_failed":
        message = f"the session ended '{status}': {message}"
    return ErrorInfo(code=code, message=message)


def exit_with_parent(parent_pid: int, scratch_dir: str, poll_s: float = 0.5) -> None:
    """Stop this worker, and the commands its tools started, once inspect-mode is gone.

    The worker runs in a process session of its own (so the deadline can stop its whole
    group), which also means that a harness killing `nodeval inspect-mode` on its own
    timeout does not reach it. Without this watch the session would run on unobserved.
    The scratch directory is the parent's to remove, so it is removed here instead.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        logger.warning("the inspect-mode process is gone; stopping the session")
        from ..world.reaper import end_all

        end_all()  # its worlds: nobody is left to remove them
        kill_children(os.getpid())
        shutil.rmtree(scratch_dir, ignore_errors=True)
        os._exit(EXIT_CODES["internal_error"])

    threading.Thread(target=watch, name="nodeval-parent-watch", daemon=True).start()


def main() -> int:
    out = claim_stdout()
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.WARNING,
        format="nodeval inspect-mode worker: %(levelname)s %(message)s",
    )
    job = WorkerJob.model_validate_json(sys.stdin.buffer.read())
    # Temporary directories of the session (the local world's, say) go inside the scratch
    # directory, which is removed however the worker ends: even when it is killed.
    tempfile.tempdir = job.scratch_dir
    exit_with_parent(job.parent_pid, job.scratch_dir)
    try:
        response = run_job(job)
    except Exception as exc:  # the parent still gets a valid response; the traceback goes to stderr
        logger.exception("the session crashed")
        response = error_response(
            "internal_error",
            f"{type(exc).__name__}: {clip(str(exc))}",
            session_id=job.session_id,
            mode=job.mode,
        )
    out.write(response.to_wire())
    out.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a process by inspect_mode
    sys.exit(main())
