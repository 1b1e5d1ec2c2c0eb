"""Secrets out of what tfdoctor prints and saves: values of secret-looking environment
variables (HF_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY...) and credentials inside URLs.

Machine-readable output is as private as a report: `check --json`, `envs --json` and
`capture` pass their data through `mask_secrets` unless the user asks for the values.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
# a variable name is secret-looking when one of its words is one of these
SECRET_WORDS = frozenset(
    {
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "KEY",
        "APIKEY",
        "PRIVATE",
        "COOKIE",
    }
)
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/\s:@]*):[^@\s/]*@"
)
_ASSIGNMENT = re.compile(r"\b(?P<name>[A-Z_][A-Z0-9_]*)(?P<sep>=|: )(?P<value>[^\s'\",]+)")
_BEARER = re.compile(r"(?i)\b(bearer|token)(\s+|=|:\s*)[A-Za-z0-9._~+/=-]{8,}")


def secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret."""
    if not _ENV_NAME.match(name):
        return False
    return any(word in SECRET_WORDS for word in name.split("_") if word)


def mask_text(text: str) -> str:
    """Credentials inside a string: the password of `scheme://user:password@host`, the value
    of `SECRET_NAME=value`, and the value after `Bearer` / `token=`."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@", text)
    text = _ASSIGNMENT.sub(
        lambda m: f"{m['name']}{m['sep']}{MASK}" if secret_name(m["name"]) else m.group(0), text
    )
    return _BEARER.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def mask_secrets(data: Any) -> Any:
    """A copy of JSON-like `data` with secret-looking variables' values and credentials in
    strings replaced by ***. Keys, structure and everything else are unchanged."""
    if isinstance(data, dict):
        out = {}
        for key, value in data.items():
            if isinstance(key, str) and secret_name(key) and isinstance(value, str) and value:
                out[key] = MASK
            else:
                out[key] = mask_secrets(value)
        return out
    if isinstance(data, list):
        return [mask_secrets(v) for v in data]
    if isinstance(data, tuple):
        return tuple(mask_secrets(v) for v in data)
    if isinstance(data, str):
        return mask_text(data)
    return data
