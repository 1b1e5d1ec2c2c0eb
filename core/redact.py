"""Secrets out of what tfdoctor prints and saves: values of secret-looking environment
variables (HF_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY...) and credentials inside URLs.

Machine-readable output is as private as a report: `check --json`, `envs --json` and
`capture` pass their data through `mask_secrets` unless the user asks for the values.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import platform
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
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
# `Bearer X`, `token=X`, `token: X`; `token X` only when X looks made (a digit, 16+ long):
# "token embeddings" in a model's log is not a secret
_BEARER = re.compile(
    r"(?i)\b(bearer|token)(\s+(?=[A-Za-z0-9._~+/=-]*\d)(?=[A-Za-z0-9._~+/=-]{16})"
    r"|(?<=bearer)\s+|=|:\s*)[A-Za-z0-9._~+/=-]{8,}"
)


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


# Tokens recognisable by their shape alone, wherever they appear (a log line, a command):
# Hugging Face, GitHub, GitLab, OpenAI-style, Slack, AWS access key ids, Google API keys.
_TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|sk-[A-Za-z0-9_-]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,})"
)
# `api_key: "…"`, `password=…` in any case (configs, dicts), and `--token VALUE` flags
_SECRET_KEYS = (
    r"(?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|password|passwd|auth[_-]?token|token"
    r"|credentials?)"
)
_KEY_VALUE = re.compile(
    rf"(?i)(?P<key>\b{_SECRET_KEYS}[\"']?)(?P<sep>\s*[:=]\s*[\"']?)(?P<value>[^\s\"',;}}]{{4,}})"
)
_FLAG_VALUE = re.compile(
    rf"(?i)(?P<key>--{_SECRET_KEYS})(?P<sep>\s+|=)(?P<value>[^\s\"',;}}]{{4,}})"
)
# accounts that name nobody: their home is still replaced, the word itself is not
GENERIC_USERS = frozenset(
    {"root", "user", "admin", "ubuntu", "debian", "jovyan", "ec2-user", "colab", "runner"}
)
GENERIC_HOSTS = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", ""})


def mask_everything(text: str) -> str:
    """`mask_text`, and tokens known by their shape, and `key: value` secrets in any case.

    Only the lines that could hold one are looked at, found by plain substring search (a
    32 MiB log costs a few fast scans, not a regex pass per pattern)."""
    spans = _suspect_lines(text)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end in spans:
        out.append(text[pos:start])
        out.append(_mask_line(text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _suspect_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line holding one of _TRIGGERS, in order, merged."""
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: offsets differ
        return [(0, len(text))]
    starts: set[int] = set()
    for word in _TRIGGERS:
        at = low.find(word)
        while at >= 0:
            line = text.rfind("\n", 0, at) + 1
            starts.add(line)
            nxt = text.find("\n", at)
            if nxt < 0:
                break
            at = low.find(word, nxt)
    spans = []
    for start in sorted(starts):
        end = text.find("\n", start)
        spans.append((start, len(text) if end < 0 else end))
    return spans


# a line any pattern here could match holds one of these (a secret word, keyword or prefix)
_TRIGGERS = (
    "://", "bearer", "token", "secret", "pass", "credential", "auth", "key", "private",
    "cookie", "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-",
    "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "akia", "aiza",
)  # fmt: skip


def _mask_line(text: str) -> str:
    text = mask_text(text)
    text = _TOKEN_SHAPES.sub(MASK, text)
    for pattern in (_FLAG_VALUE, _KEY_VALUE):
        text = pattern.sub(
            lambda m: m.group(0) if m["value"] == MASK else f"{m['key']}{m['sep']}{MASK}", text
        )
    return text


@dataclass(frozen=True)
class Identity:
    """Who and where: the home folders, user names and host names that identify a person
    or a machine (of the machine a file was saved on, and of this one)."""

    homes: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()  # values of secret-looking variables

    @classmethod
    def here(cls, env: Mapping[str, str] | None = None) -> Identity:
        """This machine's: $HOME, the login name, the host name, and the values of this
        process's secret-looking environment variables."""
        env = os.environ if env is None else env
        homes = {str(Path.home())}
        if env.get("HOME"):
            homes.add(env["HOME"])
        users = set()
        with contextlib.suppress(Exception):  # no passwd entry in some containers
            users.add(getpass.getuser())
        for key in ("USER", "LOGNAME", "USERNAME"):
            if env.get(key):
                users.add(env[key])
        hosts = {socket.gethostname(), platform.node()}
        return cls(
            tuple(sorted(homes)),
            tuple(sorted(users)),
            tuple(sorted(hosts)),
            secret_values(env),
        )

    def merged(self, other: Identity) -> Identity:
        def both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(sorted(set(a) | set(b)))

        return Identity(
            both(self.homes, other.homes),
            both(self.users, other.users),
            both(self.hosts, other.hosts),
            both(self.secrets, other.secrets),
        )

    def to_json(self) -> dict[str, list[str]]:
        return {
            "homes": list(self.homes),
            "users": list(self.users),
            "hosts": list(self.hosts),
            "secrets": list(self.secrets),
        }

    @classmethod
    def from_json(cls, data: Any) -> Identity:
        if not isinstance(data, Mapping):
            return cls()

        def strs(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(str(v) for v in value if v) if isinstance(value, list) else ()

        return cls(strs("homes"), strs("users"), strs("hosts"), strs("secrets"))


def secret_values(env: Mapping[str, Any]) -> tuple[str, ...]:
    """The values of the secret-looking variables in `env` (4 characters or more: shorter
    ones would match by chance and say little)."""
    return tuple(
        sorted({str(v) for k, v in env.items() if secret_name(str(k)) and v and len(str(v)) >= 4})
    )


class Redactor:
    """Replaces what identifies people and machines, and secrets, in text and JSON-like data,
    and counts what it replaced (never the values) for the reader to see.

    Replaced: secret variables' values wherever they appear, credentials in URLs, bearer
    tokens, tokens known by their shape, home folders (by `~`), user names (`<user>`) and
    host names (`<host>`)."""

    def __init__(self, identity: Identity) -> None:
        self.identity = identity
        self.counts: dict[str, int] = {}
        rules: list[tuple[re.Pattern[str], str, str]] = []
        for value in sorted(identity.secrets, key=len, reverse=True):
            rules.append((re.compile(re.escape(value)), MASK, "secret values"))
        homes = {h.rstrip("/\\") for h in identity.homes if len(h.rstrip("/\\")) > 1}
        for home in sorted(homes, key=len, reverse=True):  # /home/al before /home/a
            rules.append(
                (
                    re.compile(r"(?<![\w.-])" + re.escape(home) + r"(?=[/\\]|\b|$)"),
                    "~",
                    "home folder",
                )
            )
        for user in sorted(set(identity.users) - GENERIC_USERS, key=len, reverse=True):
            if len(user) >= 2:
                rules.append((_word(user), "<user>", "user name"))
        hosts = {h for h in identity.hosts if h.lower() not in GENERIC_HOSTS}
        for host in sorted(hosts, key=len, reverse=True):
            rules.append((_word(host), "<host>", "host name"))
            short = host.split(".")[0]
            if short != host and len(short) >= 3:
                rules.append((_word(short), "<host>", "host name"))
        self._rules = rules

    def text(self, text: str) -> str:
        for pattern, replacement, kind in self._rules:
            text, n = pattern.subn(replacement, text)
            if n:
                self.counts[kind] = self.counts.get(kind, 0) + n
        masked = mask_everything(text)
        added = masked.count(MASK) - text.count(MASK)
        if added > 0:
            kind = "credentials and tokens"
            self.counts[kind] = self.counts.get(kind, 0) + added
        return masked

    def data(self, data: Any) -> Any:
        """A copy of JSON-like `data` with every string (keys too) redacted, and the values
        of secret-looking keys masked."""
        if isinstance(data, dict):
            out = {}
            for key, value in data.items():
                new_key = self.text(key) if isinstance(key, str) else key
                if isinstance(key, str) and secret_name(key) and isinstance(value, str) and value:
                    out[new_key] = MASK
                    self.counts["secret values"] = self.counts.get("secret values", 0) + 1
                else:
                    out[new_key] = self.data(value)
            return out
        if isinstance(data, (list, tuple)):
            return [self.data(v) for v in data]
        if isinstance(data, str):
            return self.text(data)
        return data

    def summary(self) -> list[str]:
        """What was replaced, in words: 'home folder → ~ (12×)'."""
        shown = {"home folder": "~", "user name": "<user>", "host name": "<host>"}
        return [
            f"{kind} → {shown.get(kind, MASK)} ({n}×)" for kind, n in sorted(self.counts.items())
        ]


def _word(value: str) -> re.Pattern[str]:
    """`value` as a whole word (not inside a longer name), in any case."""
    return re.compile(r"(?<![A-Za-z0-9_.-])" + re.escape(value) + r"(?![A-Za-z0-9_-])", re.I)
