"""Feishu's request protection: AES-256-CBC encrypted bodies and the X-Lark-Signature."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Any

from Crypto.Cipher import AES  # pycryptodome: lark-oapi's own AES dependency
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


def encrypt(encrypt_key: str, plaintext: str) -> str:
    """What Feishu sends (for the fakes of the tests and the bench): AES-256-CBC with the key
    sha256(encrypt key), a random IV first, PKCS7 padding, base64; `decrypt` reverses it."""
    raw = plaintext.encode("utf-8")
    pad = AES.block_size - len(raw) % AES.block_size
    iv = os.urandom(AES.block_size)
    key = hashlib.sha256(encrypt_key.encode("utf-8")).digest()
    sealed = AES.new(key, AES.MODE_CBC, iv).encrypt(raw + bytes([pad]) * pad)
    return base64.b64encode(iv + sealed).decode("ascii")


def signature(timestamp: str, nonce: str, encrypt_key: str, body: bytes) -> str:
    return hashlib.sha256((timestamp + nonce + encrypt_key).encode() + body).hexdigest()


def signature_ok(timestamp: str, nonce: str, encrypt_key: str, body: bytes, given: str) -> bool:
    expected = signature(timestamp, nonce, encrypt_key, body)
    return hmac.compare_digest(expected.encode(), given.encode())
