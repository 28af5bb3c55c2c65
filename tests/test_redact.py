"""Redaction: secrets never reach a persisted byte (DESIGN §1.5)."""

from __future__ import annotations

import json
import time

import pytest

from ledger.launch.redact import MASK, Redactor, is_secret_name, is_sensitive_key

SECRET = "s3cr3t-Value-0123456789"


@pytest.mark.parametrize("name, secret", [
    ("ANTHROPIC_API_KEY", True), ("GITHUB_TOKEN", True), ("AWS_SECRET_ACCESS_KEY", True),
    ("DB_PASSWORD", True), ("GOOGLE_APPLICATION_CREDENTIALS", True), ("my_token", True),
    ("HOME", False), ("PATH", False), ("LANG", False), ("TERM", False),
])
def test_secret_env_names(name, secret):
    assert is_secret_name(name) is secret


def test_env_values_are_masked_longest_first():
    env = {"A_TOKEN": "abcdefgh", "B_TOKEN": "abcdefgh-longer-value", "HOME": "/home/me-not-secret"}
    r = Redactor.from_env(env)
    assert r.text("x abcdefgh-longer-value y abcdefgh z") == f"x {MASK} y {MASK} z"
    assert r.text("/home/me-not-secret") == "/home/me-not-secret"


def test_short_values_are_not_masked_and_extra_names_are():
    r = Redactor.from_env({"TOKEN_LIMIT": "100", "DEPLOY_SALT": "salty-salty-salt"}, extra_names=["DEPLOY_SALT"])
    assert r.text("limit 100, salt salty-salty-salt") == f"limit 100, salt {MASK}"


def test_json_escaped_form_of_a_secret_is_masked():
    weird = 'pa"ss\\word/with-quotes'
    r = Redactor([weird])
    encoded = json.dumps({"note": weird})
    assert weird not in json.loads(r.text(encoded)).get("note", "")
    assert MASK in r.text(encoded)


@pytest.mark.parametrize("text, leaked", [
    ("key sk-ant-api03-AbCdEf0123456789_xyz", "sk-ant-api03-AbCdEf0123456789_xyz"),
    ("openai sk-proj-abcdefghijklmnop0123456789", "sk-proj-abcdefghijklmnop0123456789"),
    ("gh token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
    ("aws AKIAABCDEFGHIJKLMNOP here", "AKIAABCDEFGHIJKLMNOP"),
    ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "eyJhbGciOiJIUzI1NiJ9.payload.sig"),
    ("curl -H 'authorization: token abcdef123456'", "abcdef123456"),
    ("git clone https://user:hunter2hunter2@example.com/r.git", "hunter2hunter2"),
    ("export OPENAI_API_KEY=abcdefghijklmnop", "abcdefghijklmnop"),
    ('MY_PASSWORD="correct horse"', "correct horse"),
    ("slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
])
def test_token_patterns(text, leaked):
    out = Redactor().text(text)
    assert leaked not in out and MASK in out


@pytest.mark.parametrize("key", ["authorization", "Authorization", "x-api-key", "api_key", "apiKey", "token",
                                 "access_token", "refreshToken", "password", "cookie", "Set-Cookie", "secret",
                                 "client_secret"])
def test_sensitive_json_keys(key):
    r = Redactor()
    assert is_sensitive_key(key)
    text = json.dumps({key: "value-that-must-go", "other": "keep me"})
    out = json.loads(r.text(text))
    assert out[key] == MASK and out["other"] == "keep me"
    # JSON inside a JSON string (a tool input or result quoted in the stream)
    nested = json.dumps({"content": json.dumps({key: "value-that-must-go", "n": 1})})
    assert "value-that-must-go" not in r.text(nested)


@pytest.mark.parametrize("key", ["input_tokens", "output_tokens", "cache_read_input_tokens", "tokenizer",
                                 "attempt_key", "monkey", "key_points"])
def test_ordinary_keys_are_kept(key):
    text = json.dumps({key: "plain-value-kept"})
    assert Redactor().text(text) == text


def test_non_string_values_of_sensitive_keys_are_kept():
    text = '{"token": 12, "password": null, "tokens": "x"}'
    assert Redactor().text(text) == text


def test_ordinary_text_is_untouched():
    text = "task-abcdefghijklmnopqrstuvwxyz, desk-0123456789abcdef, https://example.com/path?a=1"
    assert Redactor().text(text) == text


def test_bytes_keep_invalid_utf8_and_mask_secrets():
    r = Redactor([SECRET])
    data = b"\xff\xfe " + SECRET.encode() + b" \xc3\x28\n"
    out = r.bytes(data)
    assert SECRET.encode() not in out and out.startswith(b"\xff\xfe ") and out.endswith(b" \xc3\x28\n")


def test_value_masks_keys_and_strings_recursively():
    r = Redactor([SECRET])
    obj = {"headers": {"Authorization": "Bearer x"}, "list": [SECRET, 3], "n": 1.5, "api_key": "k"}
    assert r.value(obj) == {"headers": {"Authorization": MASK}, "list": [MASK, 3], "n": 1.5, "api_key": MASK}


def test_eight_mib_stream_redacts_quickly():
    line = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "word " * 40}],
                                                          "usage": {"input_tokens": 3, "output_tokens": 9}}})
    data = ((line + "\n") * (8 * 1024 * 1024 // (len(line) + 1))).encode()
    r = Redactor.from_env({"ANTHROPIC_API_KEY": "sk-ant-" + "x" * 30, "GH_TOKEN": "ghp_" + "y" * 36})
    t = time.perf_counter()
    assert r.bytes(data) == data
    assert time.perf_counter() - t < 5.0  # ~0.2 s here; generous for loaded CI machines
