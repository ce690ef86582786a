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
