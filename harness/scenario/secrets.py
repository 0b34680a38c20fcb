"""Credentials a scenario carries in its headers: masked in every file, sent as given.

Why: a key given as `--header 'Authorization: Bearer sk-...'` (or in `target.headers`) was written
in clear to the run directory's scenario.yaml and load_plan.json (audit R2), while a key named by
`target.api_key_env` is in no file. Here a header whose name says it holds a credential is written
as `[redacted]`; the load process gets the real values through its environment
(`SECRETS_ENV`, as the api_key_env key reaches it), never through a file.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

MASK = "[redacted]"
#: the load process's environment variable with the masked headers' real values (a JSON object)
SECRETS_ENV = "HARNESS_TARGET_SECRETS"

#: header names that carry a credential (Authorization, Proxy-Authorization, X-Api-Key, Api-Key,
#: X-Auth-Token, Cookie, ...): matched anywhere in the name, case-insensitive
_SECRET_NAME = re.compile(r"(?i)auth|api[-_]?key|token|secret|passw|cookie|credential|session|signature|\bkey\b")


def is_secret_header(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers among `headers` that carry a credential (their real values)."""
    return {k: v for k, v in headers.items() if is_secret_header(k) and v != MASK}


def masked_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_header(k) else v) for k, v in headers.items()}


def masked_scenario(data: dict[str, Any]) -> dict[str, Any]:
    """A scenario as plain data (`Scenario.model_dump(mode="json")`), fit for a file: credential
    headers masked. The input is not changed."""
    target = data.get("target")
    if not isinstance(target, dict) or not secret_headers(target.get("headers") or {}):
        return data
    out = copy.copy(data)
    out["target"] = {**target, "headers": masked_headers(target["headers"])}
    return out


def secrets_env(data: dict[str, Any]) -> dict[str, str]:
    """Environment entries that carry the scenario's credential headers to a load process ({} when none)."""
    target = data.get("target") if isinstance(data.get("target"), dict) else {}
    found = secret_headers((target or {}).get("headers") or {})
    return {SECRETS_ENV: json.dumps(found)} if found else {}


def restored_scenario(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The scenario of a file (masked headers) with the real values from `env`; a masked header
    whose value `env` does not hold stays masked (and is sent as `[redacted]`, which the server
    will refuse: the same as a key whose api_key_env is not set)."""
    raw = env.get(SECRETS_ENV)
    target = data.get("target")
    if not raw or not isinstance(target, dict):
        return data
    try:
        real = json.loads(raw)
    except ValueError:
        return data
    headers = dict(target.get("headers") or {})
    for name, value in headers.items():
        if value == MASK and isinstance(real.get(name), str):
            headers[name] = real[name]
    out = copy.copy(data)
    out["target"] = {**target, "headers": headers}
    return out
