"""Known secrets in disguise: the forms of a secret value the redactor also removes.

An agent's command that reads a key can print it reversed, base64-encoded or a character per
line, and the plain value is then nowhere in the journal. For each known secret (redact.py's
secret environment values) the redactor looks for the value, its reverse and its base64
(standard and URL-safe), each also split by whitespace. docs/worlds.md says what is not caught.
"""

from __future__ import annotations

import base64
import functools
import re

# Between two characters of a form: whitespace, raw or as a JSON string escape, encoded once or
# more (text often holds JSON-encoded strings, and the fast check reads the payload's JSON,
# which escapes them again). Only what a JSON escape can stand for, so the encoded text redacts
# as the raw text does.
_GAP = r"(?:[ \t\n\r]|\\+[nrt])*"
_SQUEEZED_OUT = str.maketrans("", "", " \t\n\r\\")

MIN_ENCODED_BYTES = 6
"""The shortest run of a secret's bytes whose base64 is looked for (8 characters)."""


def disguises(secret: str) -> list[str]:
    """The forms of one secret that are looked for, longest first: the secret, its reverse,
    and its base64, standard and URL-safe, with and without padding.

    Base64 of longer text holding the secret encodes it differently for each offset (mod 3)
    the secret starts at; for each, the run of the secret's whole 3-byte groups encodes the
    same whatever surrounds it, so those runs are looked for too. The one or two bytes at
    either edge of the secret share a base64 character with their neighbours and are left.
    """
    raw = secret.encode("utf-8")
    forms = {secret, secret[::-1]}
    runs = [raw] + [raw[skip:][: (len(raw) - skip) // 3 * 3] for skip in range(3)]
    for run in runs:
        if len(run) >= MIN_ENCODED_BYTES:
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = encode(run).decode("ascii")
                forms.update({encoded, encoded.rstrip("=")})
    return sorted(forms, key=lambda form: (-len(form), form))


class KnownSecrets:
    """Every form of a set of secrets, prepared once: redaction runs on every journaled event."""

    def __init__(self, forms: list[str]) -> None:
        self.forms = sorted(set(forms), key=_longest_first)
        """Longest first, so in the pattern a whole form wins over a run inside it."""
        self._squeezed = tuple({squeeze(form)[1:] for form in self.forms})

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """Any form, split by whitespace or not. Compiled on first need: it is large (a tenth
        of a second to compile), and most runs never see a secret in disguise."""
        return re.compile("|".join(_GAP.join(map(re.escape, form)) for form in self.forms))

    def might_be_in(self, text: str) -> bool:
        """A fast check, never missing what `pattern` finds (false alarms cost a scrub).

        Substring tests on the text with every gap taken out run several times faster than
        the pattern. The first character is left out of each form: squeezing eats an n, r or
        t right after a backslash that was not an escape (C:\\name).
        """
        squeezed = squeeze(text)
        return any(form in squeezed for form in self._squeezed)

    def sub(self, replacement: str, text: str) -> str:
        """`text` with every form replaced (the fast check first: most strings hold none)."""
        return self.pattern.sub(replacement, text) if self.might_be_in(text) else text


@functools.lru_cache(maxsize=32)
def known_secrets(secrets: tuple[str, ...]) -> KnownSecrets | None:
    """The forms of `secrets` (None for none), prepared once per set of secrets."""
    forms = [form for secret in secrets for form in disguises(secret)]
    return KnownSecrets(forms) if forms else None


def squeeze(text: str) -> str:
    """The text with whitespace and escaped whitespace taken out, and backslashes.

    Runs of backslashes shrink to one first, so each escape left is a backslash and a letter
    preceded by something else, and taking one out never makes another.
    """
    while "\\\\" in text:
        text = text.replace("\\\\", "\\")
    return text.replace("\\n", "").replace("\\r", "").replace("\\t", "").translate(_SQUEEZED_OUT)


def _longest_first(form: str) -> tuple[int, str]:
    return -len(form), form
