"""The instructor's secret: what ``quiz export --instructor-key`` asks before it writes the key of a
seed a learner is answering.

``quiz instructor-init`` stores a verifier of the secret in the quiz home (``instructor.json``:
a random salt and the scrypt hash of the secret, RFC 7914, never the secret itself); export
asks for the secret and compares hashes in constant time. The verifier is set once, before any
attempt is recorded in that home, so a learner cannot mint one in the middle of an attempt.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path

from ridgeline.errors import ConfigError

SECRET_ENV = "RIDGELINE_QUIZ_SECRET"
VERIFIER_FILE = "instructor.json"
MIN_SECRET_CHARS = 12
# scrypt's interactive-login cost (RFC 7914 §2: N = 2^14, r = 8, p = 1): ~16 MiB, a few ms
SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def _hash(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, dklen=32, **SCRYPT)


def verifier_path(home: Path) -> Path:
    return home / VERIFIER_FILE


def set_secret(home: Path, secret: str, has_attempts: bool) -> Path:
    """Store the verifier of ``secret`` in ``home``.

    Raises:
        ConfigError: a secret under ``MIN_SECRET_CHARS``, a verifier already there, or attempts
            already recorded in this home.
    """
    path = verifier_path(home)
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(f"field secret: at least {MIN_SECRET_CHARS} characters")
    if path.exists():
        raise ConfigError(f"{path}: an instructor secret is already set up here")
    if has_attempts:
        raise ConfigError(
            f"{home}: attempts are already recorded here; an instructor sets the secret up "
            "before any learner starts"
        )
    salt = secrets.token_bytes(16)
    home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"salt": salt.hex(), "scrypt": _hash(secret, salt).hex()}))
    return path


def check_secret(home: Path, secret: str | None) -> None:
    """Pass when ``secret`` matches the verifier in ``home``.

    Raises:
        ConfigError: no verifier, no secret given, or a wrong one.
    """
    path = verifier_path(home)
    if not path.exists():
        raise ConfigError(
            f"option --instructor-key: no instructor secret is set up in {home} "
            "(an instructor runs 'ridgeline quiz instructor-init' first)"
        )
    if not secret:
        raise ConfigError(f"option --instructor-key: give the instructor secret (${SECRET_ENV})")
    try:
        stored = json.loads(path.read_text())
        salt, want = bytes.fromhex(stored["salt"]), bytes.fromhex(stored["scrypt"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a usable instructor verifier: {e}") from None
    if not hmac.compare_digest(_hash(secret, salt), want):
        raise ConfigError("option --instructor-key: wrong instructor secret")
