"""Server prompt tokens against the intended lengths: a constant offset, a scale error, the rest.

A chat request's prompt gets the chat template's fixed tokens (ChatML's role markers: +9 per
request on real vLLM), which no prompt builder can remove; every chat-API run against vLLM was
marked invalid for "+8.4 prompt tokens per request" (GPU_VLLM defect 2). So the server's count is
read as `server - intended = offset + scale_error * intended + residual`: `offset` is the
template's constant (reported, not warned), `scale_error` a tokenizer that counts differently
(lengths off in proportion), `residual` what neither explains (per-request scatter). Least squares
over the requests, kept as sums so load processes merge exactly. With one prompt length for every
request the scale cannot be told from the offset: scale_error is then 0 and the offset says all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: a constant this large is no chat template: the lengths disagree
MAX_TEMPLATE_TOKENS = 64.0
#: lengths off by this share in proportion are a real mismatch
SCALE_ERROR_LIMIT = 0.02
#: per-request scatter beyond offset and scale: this share of the mean prompt, and this many tokens
RESIDUAL_SHARE_LIMIT = 0.05
RESIDUAL_MIN_TOKENS = 2.0


@dataclass
class PromptFit:
    """Sums of x = intended prompt tokens and y = server minus intended, per request."""

    n: int = 0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    syy: float = 0.0

    def add(self, intended: int, server: int) -> None:
        x, y = float(intended), float(server - intended)
        self.n += 1
        self.sx += x
        self.sy += y
        self.sxx += x * x
        self.sxy += x * y
        self.syy += y * y

    def merge(self, other: PromptFit) -> None:
        self.n += other.n
        self.sx += other.sx
        self.sy += other.sy
        self.sxx += other.sxx
        self.sxy += other.sxy
        self.syy += other.syy

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "sx": self.sx, "sy": self.sy, "sxx": self.sxx, "sxy": self.sxy, "syy": self.syy}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> PromptFit:
        data = data or {}
        return cls(**{k: data.get(k, 0) for k in ("n", "sx", "sy", "sxx", "sxy", "syy")})

    def solve(self) -> dict[str, float] | None:
        """{offset, scale_error, residual_rms, mean_intended} or None without requests."""
        n = self.n
        if n == 0:
            return None
        mx, my = self.sx / n, self.sy / n
        var_x = self.sxx / n - mx * mx
        cov = self.sxy / n - mx * my
        # a spread of lengths too small to tell a scale from the offset (one length for all)
        b = cov / var_x if var_x > max(1.0, 1e-6 * mx * mx) else 0.0
        a = my - b * mx
        # mean squared residual from the sums: E[(y - a - b x)^2]
        msr = self.syy / n - 2 * a * my - 2 * b * self.sxy / n + a * a + 2 * a * b * mx + b * b * self.sxx / n
        rms = math.sqrt(max(0.0, msr))
        # the slope's standard error: with scattered counts over a narrow range of lengths a
        # slope is noise, not a tokenizer that counts differently
        se = rms / math.sqrt(var_x * n) if b and var_x > 0 else 0.0
        return {"offset": a, "scale_error": b, "scale_error_se": se, "residual_rms": rms, "mean_intended": mx}

    def mismatch(self) -> list[str]:
        """Why the server's counts disagree beyond a template's constant (empty: they agree)."""
        fit = self.solve()
        if fit is None:
            return []
        out = []
        if abs(fit["offset"]) > MAX_TEMPLATE_TOKENS:
            out.append(
                f"a constant {fit['offset']:+.1f} tokens per request, more than a chat template adds "
                f"({MAX_TEMPLATE_TOKENS:.0f})"
            )
        if abs(fit["scale_error"]) >= SCALE_ERROR_LIMIT and abs(fit["scale_error"]) > 3 * fit["scale_error_se"]:
            out.append(
                f"lengths off by {100 * fit['scale_error']:+.1f}% in proportion (limit {100 * SCALE_ERROR_LIMIT:.0f}%)"
            )
        limit = max(RESIDUAL_MIN_TOKENS, RESIDUAL_SHARE_LIMIT * fit["mean_intended"])
        if fit["residual_rms"] >= limit:
            out.append(f"per-request scatter of {fit['residual_rms']:.1f} tokens (rms; limit {limit:.1f})")
        return out
