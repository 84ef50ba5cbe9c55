"""Feishu's request protection: AES-256-CBC encrypted bodies and the X-Lark-Signature."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from lark_oapi.core.utils import AESCipher


class DecryptError(Exception):
    """The body was not encrypted with our key: not from Feishu."""


def decrypt(encrypt_key: str, encrypted: str) -> str:
    """The plaintext of an `{"encrypt": ...}` body."""
    try:
        plain: Any = AESCipher(encrypt_key).decrypt_str(encrypted)
    except Exception as exc:  # bad base64, bad padding, bad key: all "not from Feishu"
        raise DecryptError("cannot decrypt with FEISHU_ENCRYPT_KEY") from exc
    return str(plain)


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def signature_ok(timestamp: str, nonce: str, encrypt_key: str, body: bytes, given: str) -> bool:
    expected = signature(timestamp, nonce, encrypt_key, body)
    return hmac.compare_digest(expected.encode(), given.encode())
