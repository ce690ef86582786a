"""`nodeval inspect-mode`: one JSON request on stdin, one JSON response on stdout (schema 1).

External harnesses (Inspect AI, Braintrust, CI tools in any language) drive one run of
the reference engine through this protocol; the wire format is the durable contract and
docs/inspect-mode.md is its reference. This module is the protocol side: parsing,
validation, the error-code and exit-code table, and the deadline. The session itself
runs in a worker process (`worker.py`) so that a deadline really stops it: a
Python thread cannot be killed, so a thread that missed its deadline would keep calling
providers and running tools after the answer was sent, while a process (and the process
groups of the commands it started) can be stopped for certain.

`handle(raw)` never raises and writes nothing to stdout; `serve_stdio()` is the command's
shell around it, and the only place that touches the real stdout.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, BinaryIO, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..case import CASE_FILE
from ..world.processes import kill, kill_group

SCHEMA = 1
"""The protocol version this module speaks; a change of layout needs a new one."""
MAX_REQUEST_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_S = 600.0
MAX_TIMEOUT_S = 86_400.0

ErrorCode = Literal[
    "session_failed",
    "malformed_json",
    "unknown_schema",
    "invalid_request",
    "config_error",
    "provider_error",
    "timeout",
    "replay_divergence",
    "internal_error",
]

EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "session_failed": 1,
    "malformed_json": 10,
    "unknown_schema": 11,
    "invalid_request": 12,
    "config_error": 13,
    "provider_error": 14,
    "timeout": 15,
    "replay_divergence": 16,
    "internal_error": 17,
}
"""Exit status of the command per outcome. 1 alone means "the agent ran and did not
succeed"; protocol and infrastructure errors have codes of their own (4, a usage error as
for pytest, stays the "bad command line", which happens before any JSON is read)."""

InspectMode = Literal["live", "deterministic", "record"]
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
PATH_LIMIT = 500
"""Paths are quoted whole in messages up to this length (a request's other values, 60)."""
MAX_PROBLEMS = 5
"""An invalid request's message names this many problems at most."""

logger = logging.getLogger(__name__)


class InspectRequest(BaseModel):
    """One request: which engine run to do. Unknown fields are errors, so a typo never
    silently drops a setting."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True
    )

    schema_version: Literal[1] = Field(alias="schema")
    """Protocol version; must be 1."""
    config_path: str | None = None
    """An engine config (the format of a case's input/config.yaml) to run live with the
    given inputs. Relative paths are relative to the command's working directory."""
    case_dir: str | None = None
    """A case directory to run instead: replayed from its journal by default."""
    user_input: str | None = None
    """The one message the scripted user sends (with config_path)."""
    inputs: list[str] | None = Field(default=None, min_length=1)
    """Several messages, one per conversation turn, in order (with config_path)."""
    mode: InspectMode | None = None
    """"live" (the only mode for config_path, and its default), "deterministic" (replay
    case_dir's journal offline; the default for case_dir) or "record" (run case_dir live
    and replace its journal when the session ends ok)."""
    session_id: str | None = Field(default=None, pattern=SESSION_ID_PATTERN)
    """The journal's session id, echoed in the response (default: a new random one)."""
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    """Wall-time budget for the whole request, worker start-up included (default 600)."""
    journal_dir: str | None = None
    """Keep the observed journal in this new or empty directory (default: a temporary
    directory, removed after the response)."""
    include_events: bool = True
    """Put the observed events in the response; false leaves `events` null."""


class ErrorInfo(BaseModel):
    """Why a request did not end "ok"."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    code: ErrorCode
    """A stable code from the table in docs/inspect-mode.md."""
    message: str
    """What went wrong, for people: names the field, file or value at fault."""
    field: str | None = None
    """The request field at fault (dotted, e.g. "inputs.2"), when there is one."""


class Usage(BaseModel):
    """Tokens the session's model calls used, as the providers reported them."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    input_tokens: int
    output_tokens: int


class InspectResponse(BaseModel):
    """One response. Fields that only a session can fill are null when none ran."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    schema_version: Literal[1] = Field(default=1, alias="schema")
    """Protocol version of this response: 1."""
    status: Literal["ok", "failed", "error"]
    """"ok": the session ended ok. "failed": the session ran and ended without success
    (a limit, or an error that is not the provider's). "error": the request could not be
    served (see `error.code`)."""
    exit_code: int
    """The command's exit status for this response (see EXIT_CODES)."""
    error: ErrorInfo | None = None
    """Set unless status is "ok"."""
    session_id: str | None = None
    """The session's id (the request's, or a new one)."""
    mode: InspectMode | None = None
    """The mode the session ran in."""
    session_status: str | None = None
    """What the journal's session.end says: "ok", "limit", "error", or "divergence"."""
    output: str | None = None
    """The agent's final answer (its last io.output), if it gave one."""
    usage: Usage | None = None
    """Tokens over the whole session."""
    latency_ms: float | None = None
    """How long the session took; in deterministic replay, the recorded session's time."""
    wall_ms: float = 0.0
    """How long this request took to serve, worker start-up included."""
    turns: int | None = None
    """Agent steps (a model call and the tools it asked for)."""
    llm_calls: int | None = None
    tool_calls: int | None = None
    journal_dir: str | None = None
    """Absolute path of the kept journal, when the request named a journal_dir."""
    events: list[dict[str, Any]] | None = None
    """The observed journal events ({"seq", "ts", "type", "turn", "payload"}), unless the
    request said include_events: false."""

    def to_wire(self) -> bytes:
        """The response as written to stdout: one compact JSON document and a newline."""
        return self.model_dump_json(by_alias=True).encode("utf-8") + b"\n"


class WorkerJob(BaseModel):
    """What the parent hands the worker process (internal; not part of the protocol)."""

    request: InspectRequest
    mode: InspectMode
    session_id: str
    journal_dir: str
    scratch_dir: str
    parent_pid: int
    """The inspect-mode process; the worker stops when it is gone (see inspect_worker)."""


class ProtocolError(Exception):
    """A request that cannot be served; becomes an error response, never a traceback."""

    def __init__(self, code: ErrorCode, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.field = code, message, field


def status_for(code: ErrorCode | None) -> Literal["ok", "failed", "error"]:
    if code is None:
        return "ok"
    return "failed" if code == "session_failed" else "error"


def error_response(
    code: ErrorCode, message: str, field: str | None = None, **context: Any
) -> InspectResponse:
    return InspectResponse(
        status=status_for(code),
        exit_code=EXIT_CODES[code],
        error=ErrorInfo(code=code, message=message, field=field),
        **context,
    )


# -- the pure core ------------------------------------------------------------------------


def handle(raw: bytes) -> tuple[InspectResponse, int]:
    """Serve one request given as raw bytes; return the response and the exit status.

    Never raises (an unexpected exception becomes an internal_error response) and never
    writes to stdout; a valid request runs its session in a worker process.
    """
    start = time.perf_counter()
    try:
        response = _serve(raw)
    except ProtocolError as exc:
        response = error_response(exc.code, exc.message, exc.field)
    except Exception as exc:  # a bug must still yield a valid response
        logger.exception("internal error while serving a request")
        response = error_response("internal_error", f"{type(exc).__name__}: {clip(str(exc))}")
    response = response.model_copy(
        update={"wall_ms": round((time.perf_counter() - start) * 1000, 3)}
    )
    if response.error is not None:
        logger.warning("%s: %s", response.error.code, clip(response.error.message, 2000))
    logger.info(
        "answered %s (exit status %d) in %.0f ms",
        response.status,
        response.exit_code,
        response.wall_ms,
    )
    return response, response.exit_code


def _serve(raw: bytes) -> InspectResponse:
    request = parse_request(raw)
    return run_request(request)


def parse_request(raw: bytes) -> InspectRequest:
    """Bytes to a validated request, or a ProtocolError with the matching code."""
    data = parse_json(raw)
    check_schema(data)
    request = validate_request(data)
    check_combination(request)
    return request


def parse_json(raw: bytes) -> Any:
    if len(raw) > MAX_REQUEST_BYTES:
        raise ProtocolError(
            "malformed_json",
            f"the request is larger than the {MAX_REQUEST_BYTES // 2**20} MiB "
            "limit; pass big inputs by file (config_path, case_dir)",
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            "malformed_json", f"the request is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    if not text.strip():
        raise ProtocolError(
            "malformed_json",
            "the request is empty; send one JSON object, e.g. "
            '{"schema": 1, "config_path": "config.yaml", "user_input": "hello"}',
        )
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ProtocolError(
            "malformed_json",
            f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg} "
            "(the request must be exactly one JSON document)",
        ) from None
    except ValueError as exc:  # e.g. an integer longer than Python converts (4300 digits)
        raise ProtocolError(
            "malformed_json", f"unreadable JSON value: {clip(str(exc), 200)}"
        ) from None
    except RecursionError:
        raise ProtocolError("malformed_json", "the JSON is nested too deeply to read") from None
    _require_valid_unicode(text, data)
    return data


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ProtocolError(
                "malformed_json", f"the key {_short(key)} appears twice in one JSON object"
            )
        data[key] = value
    return data


def _reject_constant(name: str) -> NoReturn:
    raise ProtocolError("malformed_json", f"{name} is not a JSON value (use a number or null)")


def _require_valid_unicode(text: str, data: Any) -> None:
    # JSON may spell an unpaired UTF-16 surrogate ("\ud800"); such a string cannot be
    # written to a journal or a response, so it is refused here rather than crashing later.
    if "\\u" not in text:
        return
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ProtocolError(
            "malformed_json",
            "a string holds an unpaired UTF-16 surrogate escape "
            "(e.g. \\ud800), which is not Unicode text",
        ) from None
    except RecursionError:
        raise ProtocolError("malformed_json", "the JSON is nested too deeply to read") from None


def check_schema(data: Any) -> None:
    if not isinstance(data, dict):
        raise ProtocolError(
            "invalid_request", f"the request must be a JSON object, not {_kind(data)}"
        )
    if "schema" not in data:
        raise ProtocolError(
            "unknown_schema",
            f'the request has no "schema"; this nodeval speaks schema {SCHEMA}: '
            f'add "schema": {SCHEMA}',
            "schema",
        )
    version = data["schema"]
    if type(version) is not int or version != SCHEMA:
        raise ProtocolError(
            "unknown_schema",
            f"schema {_short(version)} is not supported; this nodeval speaks "
            f"schema {SCHEMA} only (upgrade pytest-nodeval for newer schemas)",
            "schema",
        )


def validate_request(data: dict[str, Any]) -> InspectRequest:
    try:
        return InspectRequest.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(err) for err in exc.errors(include_url=False)]
        texts = list(dict.fromkeys(text for _, text in problems))
        more = (
            f"; and {len(texts) - MAX_PROBLEMS} more problems" if len(texts) > MAX_PROBLEMS else ""
        )
        raise ProtocolError(
            "invalid_request", "; ".join(texts[:MAX_PROBLEMS]) + more, problems[0][0]
        ) from None


def _describe(err: Any) -> tuple[str | None, str]:
    field = clip(".".join(str(part) for part in err["loc"]), PATH_LIMIT) if err["loc"] else None
    if err["type"] == "extra_forbidden":
        valid = ", ".join(f.alias or name for name, f in InspectRequest.model_fields.items())
        return field, f"{field}: unknown field (valid fields: {valid})"
    if err["type"] == "missing":
        return field, f"{field}: required field is missing"
    got = f" (got {_kind(err['input'])})" if err["type"].endswith("_type") else ""
    return field, f"{field}: {err['msg']}{got}"


def check_combination(request: InspectRequest) -> None:
    """Rules across fields: what to run, where its inputs come from, and in which mode."""
    if (request.config_path is None) == (request.case_dir is None):
        both = request.config_path is not None
        raise ProtocolError(
            "invalid_request",
            "give config_path (an engine config to run live) or case_dir "
            f"(a case to replay){', not both' if both else ''}",
            "case_dir" if both else "config_path",
        )
    if request.config_path is not None:
        _check_config_run(request)
    else:
        _check_case_run(request)


def _check_config_run(request: InspectRequest) -> None:
    if (request.user_input is None) == (request.inputs is None):
        both = request.user_input is not None
        raise ProtocolError(
            "invalid_request",
            "a run from config_path needs user_input (one message) or inputs "
            f"(a list of messages){', not both' if both else ''}",
            "inputs" if both else "user_input",
        )
    if request.mode not in (None, "live"):
        raise ProtocolError(
            "invalid_request",
            f"mode {request.mode!r} needs a recorded case (case_dir); "
            "a run from config_path is always live",
            "mode",
        )


def _check_case_run(request: InspectRequest) -> None:
    for name in ("user_input", "inputs"):
        if getattr(request, name) is not None:
            raise ProtocolError(
                "invalid_request",
                f"{name}: a case brings its own inputs (input/inputs.yaml, or its "
                "journal in replay); remove this field",
                name,
            )


def effective_mode(request: InspectRequest) -> InspectMode:
    if request.mode is not None:
        return request.mode
    return "live" if request.config_path is not None else "deterministic"


# -- running one request ------------------------------------------------------------------


def run_request(request: InspectRequest) -> InspectResponse:
    """Check the paths the request names, then run its session in a worker with a deadline."""
    # A new id has the journal's own shape (journal.new_session_id), without importing it here.
    session_id, mode = request.session_id or uuid.uuid4().hex, effective_mode(request)
    try:
        check_paths(request)
        journal_dir = prepare_journal_dir(request)
    except ProtocolError as exc:
        return error_response(exc.code, exc.message, exc.field, session_id=session_id, mode=mode)
    scratch = Path(tempfile.mkdtemp(prefix="nodeval-inspect-"))
    job = WorkerJob(
        request=request,
        mode=mode,
        session_id=session_id,
        journal_dir=str(journal_dir or scratch / "journal"),
        scratch_dir=str(scratch),
        parent_pid=os.getpid(),
    )
    try:
        return run_worker(job, request.timeout_s or DEFAULT_TIMEOUT_S)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_paths(request: InspectRequest) -> None:
    """Missing files are found here, cheaply, before any worker is started."""
    if request.config_path is not None and _probe(_absolute(request.config_path)) != "file":
        raise ProtocolError(
            "config_error",
            f"config_path {_short(request.config_path, PATH_LIMIT)}: not a file "
            f"(relative paths start at the working directory, {os.getcwd()})",
            "config_path",
        )
    if request.case_dir is not None and _probe(_absolute(request.case_dir) / CASE_FILE) != "file":
        raise ProtocolError(
            "config_error",
            f"case_dir {_short(request.case_dir, PATH_LIMIT)}: not a case directory (no case.yaml)",
            "case_dir",
        )
    if request.journal_dir is not None and _probe(_absolute(request.journal_dir)) not in (
        "missing",
        "empty dir",
    ):
        raise ProtocolError(
            "invalid_request",
            f"journal_dir {_short(request.journal_dir, PATH_LIMIT)}: exists and is not an "
            "empty directory, or cannot be used; name a new directory",
            "journal_dir",
        )


def prepare_journal_dir(request: InspectRequest) -> Path | None:
    """Create the requested journal directory now, so a bad one is the request's error."""
    if request.journal_dir is None:
        return None
    target = _absolute(request.journal_dir)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        raise ProtocolError(
            "invalid_request",
            f"journal_dir {_short(request.journal_dir, PATH_LIMIT)}: cannot be created "
            f"({type(exc).__name__}: {clip(str(exc), 200)})",
            "journal_dir",
        ) from None
    return target


def _probe(path: Path) -> str:
    """ "file", "empty dir", "dir", "missing" or "unusable" (a NUL byte, a name too long...)."""
    try:
        if path.is_file():
            return "file"
        if path.is_dir():
            return "dir" if any(path.iterdir()) else "empty dir"
        return "unusable" if path.exists() or path.is_symlink() else "missing"
    except (OSError, ValueError):
        return "unusable"


def _absolute(path: str) -> Path:
    return Path(path).absolute()


WORKER_COMMAND = (sys.executable, "-m", "pytest_nodeval.protocol.worker")


def run_worker(job: WorkerJob, timeout_s: float) -> InspectResponse:
    """Run the job in a fresh process in its own session; stop it at the deadline."""
    context = {
        "session_id": job.session_id,
        "mode": job.mode,
        # a kept journal holds what the session did before it was stopped
        "journal_dir": job.journal_dir if job.request.journal_dir is not None else None,
    }
    logger.info(
        "running session %s (%s) in a worker, deadline %gs", job.session_id, job.mode, timeout_s
    )
    # stderr is inherited: the worker's logs go where ours go, never to stdout.
    from ..world import reaper

    worker = subprocess.Popen(
        WORKER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    # Killed by the harness (SIGTERM), we stop the worker and its worlds before we go.
    reaper.track(worker, lambda: stop_worker(worker))
    try:
        out, _ = worker.communicate(
            job.model_dump_json(by_alias=True).encode("utf-8"), timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        stop_worker(worker)
        return error_response(
            "timeout",
            f"the session did not finish within timeout_s={timeout_s:g}s; "
            "it was stopped (raise timeout_s, or lower the config's limits)",
            "timeout_s",
            **context,
        )
    except BaseException:
        stop_worker(worker)
        raise
    finally:
        reaper.forget(worker)
    return read_worker_response(out, worker.returncode, context)


def read_worker_response(out: bytes, returncode: int, context: dict[str, Any]) -> InspectResponse:
    try:
        return InspectResponse.model_validate_json(out)
    except ValidationError:
        detail = (
            f"exit status {returncode}" if returncode >= 0 else f"killed by signal {-returncode}"
        )
        return error_response(
            "internal_error",
            f"the worker process ended without a valid response ({detail}); its log is on stderr",
            **context,
        )


def stop_worker(worker: subprocess.Popen[bytes]) -> None:
    """Kill the worker, its process group and the commands its tools started.

    The local world starts each command in a session of its own (so a tool timeout can
    kill the whole command), which puts them outside the worker's group: they are found
    as the worker's children and their groups are killed too. The worker is frozen first
    so it cannot start another command meanwhile. SIGKILL gives the worker no chance to
    close its world, so what it left (a Docker container, a bwrap cgroup, a local
    world's detached commands) is found by its owner labels and marks and removed here.
    """
    from ..world.leftovers import remove_left_by
    from ..world.processes import process_start

    start = process_start(worker.pid) or ""
    kill_group(worker.pid, signal.SIGSTOP)
    kill_children(worker.pid)
    kill_group(worker.pid, signal.SIGKILL)
    # wait, not communicate: this may run from a signal handler while communicate is under way.
    worker.wait()
    removed = remove_left_by(worker.pid, start)
    if removed:
        logger.info("removed what the stopped worker left: %s", ", ".join(removed))


def kill_children(pid: int) -> None:
    """Kill a process's direct children, with the process groups they lead."""
    for child in _children(pid):
        kill_group(child, signal.SIGKILL)
        kill(child, signal.SIGKILL)  # a child that leads no group of its own


def _children(pid: int) -> list[int]:
    """Direct children of a process (Linux /proc; elsewhere none are found)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(p) for p in children.read_text().split()]
        except OSError:
            continue
    return found


# -- the command's stdin/stdout shell -----------------------------------------------------


def serve_stdio(stdin: BinaryIO | None = None) -> int:
    """Read one request from stdin, write one response line to stdout, return the exit status."""
    out = claim_stdout()
    raw = read_request(stdin)
    response, exit_code = handle(raw)
    write_response(out, response)
    return exit_code


def claim_stdout() -> BinaryIO:
    """Keep the real stdout for the response and point fd 1 at stderr.

    Anything else that writes to stdout (a stray print, a C library, a warning filter set
    to print) then lands on stderr, so stdout carries exactly one JSON document.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
        os.dup2(2, 1)
    except OSError:
        return sys.stdout.buffer
    return os.fdopen(saved, "wb")


def read_request(stdin: BinaryIO | None = None) -> bytes:
    stream = stdin if stdin is not None else getattr(sys.stdin, "buffer", None)
    if stream is None:
        return b""  # no stdin at all: answered as an empty request
    if getattr(stream, "isatty", lambda: False)():
        print(
            "nodeval inspect-mode: reading one JSON request from stdin (end it with Ctrl-D)",
            file=sys.stderr,
        )
    # One byte past the limit is enough to know the request is too large.
    return stream.read(MAX_REQUEST_BYTES + 1) or b""


def write_response(out: BinaryIO, response: InspectResponse) -> None:
    try:
        out.write(response.to_wire())
        out.flush()
    except BrokenPipeError:
        logger.warning("stdout was closed before the response could be written")


# -- small helpers ------------------------------------------------------------------------


def _kind(value: Any) -> str:
    """A short, safe description of a JSON value (never its whole, possibly huge, text)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {_short(value)}"
    return f"the number {_short(value)}"


def _short(value: Any, limit: int = 60) -> str:
    text = (
        repr(value) if isinstance(value, (str, int, float, bool)) or value is None else _kind(value)
    )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = 4000) -> str:
    return (
        text if len(text) <= limit else text[:limit] + f" [... {len(text) - limit} more characters]"
    )
