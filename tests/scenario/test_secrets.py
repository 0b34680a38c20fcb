"""Credential headers: which names count, masked for files, restored from the environment."""

from __future__ import annotations

import json

from harness.scenario.secrets import (
    MASK,
    SECRETS_ENV,
    is_secret_header,
    masked_scenario,
    restored_scenario,
    secrets_env,
)


def test_credential_header_names() -> None:
    for name in (
        "Authorization",
        "proxy-authorization",
        "X-Api-Key",
        "api_key",
        "X-Auth-Token",
        "Cookie",
        "X-Goog-Api-Key",
        "Ocp-Apim-Subscription-Key",
    ):
        assert is_secret_header(name), name
    for name in ("X-Team", "Content-Type", "X-Request-Id", "OpenAI-Organization", "Accept"):
        assert not is_secret_header(name), name


def test_masked_for_files_and_restored_from_the_environment() -> None:
    data = {"name": "s", "target": {"url": "http://h:1", "headers": {"Authorization": "Bearer sk-1", "X-Team": "t"}}}
    masked = masked_scenario(data)
    assert masked["target"]["headers"] == {"Authorization": MASK, "X-Team": "t"}
    assert data["target"]["headers"]["Authorization"] == "Bearer sk-1"  # the input is untouched
    env = secrets_env(data)
    assert json.loads(env[SECRETS_ENV]) == {"Authorization": "Bearer sk-1"}
    assert restored_scenario(masked, env) == data
    assert restored_scenario(masked, {}) == masked  # no value given: stays masked, never invented
    plain = {"name": "s", "target": {"headers": {"X-Team": "t"}}}
    assert masked_scenario(plain) is plain and secrets_env(plain) == {}
