"""Secret-looking variables and credentials in URLs are masked; nothing else changes."""

from __future__ import annotations

import pytest

from tfdoctor.core.redact import MASK, mask_secrets, mask_text, secret_name


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "DB_PASSWORD", "GITHUB_AUTH",
     "GOOGLE_APPLICATION_CREDENTIALS", "OPENAI_APIKEY", "KAGGLE_KEY"],
)  # fmt: skip
def test_secret_looking_names(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["CUDA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH", "XDG_SESSION_TYPE", "XAUTHORITY",
     "KEYBOARD_LAYOUT", "PATH", "hf_token", "TF_GPU_ALLOCATOR"],
)  # fmt: skip
def test_ordinary_names_are_left_alone(name: str) -> None:
    assert not secret_name(name)


def test_mask_secrets_keeps_structure_and_ordinary_values() -> None:
    data = {
        "facts": {"target.env": {"value": {"HF_TOKEN": "hf_abc", "TF_CPP_MIN_LOG_LEVEL": "0"}}},
        "list": ["https://bob:s3cret@example.org/repo.git", 3, None],
        "line": "export WANDB_API_KEY=abc123 and CUDA_VISIBLE_DEVICES=0",
    }
    out = mask_secrets(data)
    assert out["facts"]["target.env"]["value"] == {"HF_TOKEN": MASK, "TF_CPP_MIN_LOG_LEVEL": "0"}
    assert out["list"] == ["https://bob:***@example.org/repo.git", 3, None]
    assert out["line"] == "export WANDB_API_KEY=*** and CUDA_VISIBLE_DEVICES=0"
    assert data["facts"]["target.env"]["value"]["HF_TOKEN"] == "hf_abc"  # a copy, not in place


def test_bearer_tokens_in_logs() -> None:
    text = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig"
    assert mask_text(text) == "Authorization: Bearer ***"
