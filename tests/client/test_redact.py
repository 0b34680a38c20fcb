"""Credentials a server echoes never reach the run directory (audit Low 14: echo_auth_400)."""

from __future__ import annotations

import pytest

from harness.client.adapters.base import get_adapter
from harness.client.http_stream import StreamResult
from harness.client.redact import MASK, redact
from harness.client.request import RequestSpec, base_headers, finalize
from harness.metrics.record import RequestRecord

KEY = "sk-AUDIT-7f3a9cQ2-SECRET"


@pytest.mark.parametrize(
    "text",
    [
        f"bad request; you sent Authorization: Bearer {KEY}",
        f'{{"headers": {{"authorization": "Bearer {KEY}"}}}}',
        f"api_key={KEY}&x=1",
        f"X-Api-Key: {KEY}",
        f"key {KEY} is invalid",
    ],
)
def test_credentials_are_masked(text: str) -> None:
    out = redact(text)
    assert "7f3a9cQ2" not in out and MASK in out


def test_a_known_secret_is_masked_whatever_its_shape() -> None:
    assert redact("token was abc123xyz", ("abc123xyz",)) == f"token was {MASK}"


def test_plain_error_messages_are_untouched() -> None:
    msg = "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens."
    assert redact(msg) == msg


def test_an_echoed_key_in_an_error_body_is_not_stored() -> None:
    spec = RequestSpec(
        adapter=get_adapter("openai-chat"),
        model="m",
        sampling={},
        stream_options={},
        headers=base_headers("zz-custom-key-123456", {}),
    )
    body = b'{"error": {"message": "bad request; you sent Authorization: Bearer zz-custom-key-123456"}}'
    rec = finalize(RequestRecord(index=0, class_name="a"), StreamResult(status=400, body=body), spec, len)
    assert rec.error_kind == "http_4xx" and "zz-custom-key" not in rec.error_detail and MASK in rec.error_detail
