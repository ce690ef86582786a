"""Redactors: secrets and PII go, also inside JSON-encoded text, and consistently."""

from __future__ import annotations

import json

import pytest

from pytest_nodeval.journal.redact import REDACTED, chain, default_redactor, pii_redactor

SECRETS = [
    "sk-ant-api03-abcdefghijkl",
    "sk-proj-abcdefghijklmnopqrstuv",
    "Bearer abcdefghijklmnop",
    "AIzaSyA1234567890abcdefghijklmnopqrstu",
]
PII = ["jane.doe@example.com", "4111 1111 1111 1111", "4111-1111-1111-1111"]


@pytest.mark.parametrize("secret", SECRETS + PII)
@pytest.mark.parametrize("before", [" ", "\n", "\t", "\r\n", ": ", "("])
def test_pii_redactor_removes_secrets_wherever_they_stand(secret: str, before: str) -> None:
    text = f"value{before}{secret} end"
    plain = pii_redactor("io.input", {"text": text})["text"]
    encoded = pii_redactor("io.input", {"text": json.dumps({"s": text})})["text"]
    assert secret not in plain and REDACTED in plain
    assert secret not in encoded and json.loads(encoded)["s"] == plain, (
        "redacting JSON-encoded text gives what encoding the redacted text gives"
    )


@pytest.mark.parametrize("secret", SECRETS)
def test_the_journal_default_removes_credentials_but_keeps_addresses(secret: str) -> None:
    text = f"ask jane.doe@example.com\n{secret}"
    redacted = default_redactor("io.input", {"text": json.dumps(text)})["text"]
    assert secret not in redacted and "jane.doe@example.com" in redacted


@pytest.mark.parametrize(
    "text", ["session 3f2a12345678901234567b", "order ORD-12345", "at 2026-11-30 12:00"]
)
def test_ordinary_identifiers_are_kept(text: str) -> None:
    assert pii_redactor("io.input", {"text": text})["text"] == text


def test_chain_runs_in_order_and_is_named_after_its_parts() -> None:
    def upper(event_type: str, payload: dict) -> dict:
        return {k: v.upper() for k, v in payload.items()}

    chained = chain(pii_redactor, upper)
    assert chained("io.input", {"text": "mail jane@example.com"}) == {"text": "MAIL [REDACTED]"}
    assert chained.__name__ == "pii_redactor+upper"


class _EnvironLosingAKey(dict):  # type: ignore[type-arg]
    """os.environ as another thread changes it: PYTEST_CURRENT_TEST is listed, then gone."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield from [*super().__iter__(), "PYTEST_CURRENT_TEST"]

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        if key == "PYTEST_CURRENT_TEST":
            raise KeyError(key)
        return super().__getitem__(key)

    def keys(self):  # type: ignore[no-untyped-def]
        return list(self)


def test_secret_env_values_survive_a_key_deleted_while_copying(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    from pytest_nodeval.journal.redact import secret_env_values

    monkeypatch.setattr(
        os, "environ", _EnvironLosingAKey({"SERVICE_API_KEY": "k" * 20, "HOME": "/root"})
    )
    assert secret_env_values() == ("k" * 20,)


# --- a known secret in disguise (issue 28): a tool's output printed it reversed ------------

KNOWN = "sk-live-0123456789abcdefXYZ_known"


def _b64(data: str, *, urlsafe: bool = False) -> str:
    import base64

    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(data.encode()).decode()


def _redacted_output(monkeypatch: pytest.MonkeyPatch, stdout: str) -> str:
    """A shell tool's result as the journal writer's redactor leaves it."""
    from pytest_nodeval.journal.redact import secrets_redactor

    monkeypatch.setenv("SERVICE_API_KEY", KNOWN)
    payload = {"tool": "shell", "call_id": "c1", "ok": True, "result": {"stdout": stdout}}
    return json.dumps(secrets_redactor()("tool.result", payload))


@pytest.mark.parametrize(
    "disguised",
    [
        KNOWN[::-1],
        " ".join(KNOWN),
        "\n".join(KNOWN),
        " ".join(KNOWN[::-1]),
        KNOWN[:10] + "\n  " + KNOWN[10:],
        _b64(KNOWN),
        _b64(KNOWN).rstrip("="),
        _b64(KNOWN, urlsafe=True),
    ],
    ids=[
        "reversed",
        "spaced",
        "one-per-line",
        "reversed-spaced",
        "wrapped",
        "b64",
        "b64-nopad",
        "b64-urlsafe",
    ],
)
def test_a_known_secret_is_caught_in_disguise(
    monkeypatch: pytest.MonkeyPatch, disguised: str
) -> None:
    redacted = _redacted_output(monkeypatch, f"here: {disguised} (done)")
    assert REDACTED in redacted
    assert disguised not in redacted and disguised not in json.loads(redacted)["result"]["stdout"]
    assert json.loads(redacted)["result"]["stdout"].endswith(" (done)")


@pytest.mark.parametrize("prefix", ["", "K", "KE", "KEY=", "export SERVICE_API_KEY="])
@pytest.mark.parametrize("urlsafe", [False, True])
def test_a_known_secret_inside_base64_of_longer_text_is_caught_at_any_offset(
    monkeypatch: pytest.MonkeyPatch, prefix: str, urlsafe: bool
) -> None:
    import base64

    encoded = _b64(f"{prefix}{KNOWN}\nPATH=/usr/bin\n", urlsafe=urlsafe)
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))  # as base64(1)
    for text in (encoded, wrapped):
        left = json.loads(_redacted_output(monkeypatch, text))["result"]["stdout"]
        assert REDACTED in left
        # What is left decodes to at most the two bytes at either edge of the secret.
        for piece in left.replace("\n", "").split(REDACTED):
            usable = piece[: len(piece) // 4 * 4] if piece else ""
            decoder = base64.urlsafe_b64decode if urlsafe else base64.b64decode
            decoded = decoder(usable + "=" * (-len(usable) % 4)).decode("latin-1")
            assert not any(KNOWN[i : i + 3] in decoded for i in range(len(KNOWN) - 2))


def test_the_json_encoded_disguise_redacts_as_the_raw_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay compares requests holding tool results as JSON text: both must redact alike."""
    text = "out:\n" + "\n".join(KNOWN) + "\nend"
    raw = json.loads(_redacted_output(monkeypatch, text))["result"]["stdout"]
    encoded = json.loads(_redacted_output(monkeypatch, json.dumps(text)))["result"]["stdout"]
    assert json.loads(encoded) == raw == f"out:\n{REDACTED}\nend"


def test_text_without_the_secret_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "total 3\n" + _b64("an ordinary file, nothing secret\n") + "\nsk-live-0123 partial"
    assert json.loads(_redacted_output(monkeypatch, text))["result"]["stdout"] == text
