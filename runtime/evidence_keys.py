"""The keys that make clawgate's evidence tamper-evident: the audit chain's links, its signed
checkpoints and tool receipts are HMAC-SHA256 under one of them.

A key ring holds every key still needed to *verify* (old entries keep the key id they were
made with) and names the one new entries are made with: the last one listed. Rotating is
appending a key: new entries use it, old ones still verify. Keys come from
`CLAWGATE_AUDIT_KEY` (`kid:secret[,kid:secret…]`) or `CLAWGATE_AUDIT_KEY_FILE` (one
`kid secret` pair per line, `#` comments), never from Redis: whoever can write Redis must not
be able to rebuild a consistent chain.

With no key configured the ring is *unkeyed* (key id `none`, empty secret): the chain still
catches accidents and careless edits, but anyone who reads this code can rebuild it;
`clawgate audit verify` and `clawgate doctor` say so.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

UNKEYED = "none"
MIN_SECRET_CHARS = 16
_KID = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")


class AuditKeyError(ValueError):
    """A key setting that cannot be used: what is wrong, never the secret."""


@dataclass(frozen=True)
class KeyRing:
    """`keys`: key id -> secret, in the order given; `current`: the id new MACs are made with."""

    keys: dict[str, bytes] = field(default_factory=lambda: {UNKEYED: b""}, repr=False)
    current: str = UNKEYED

    @property
    def keyed(self) -> bool:
        return self.current != UNKEYED

    def mac(self, message: bytes, kid: str | None = None) -> str:
        """HMAC-SHA256 (hex) of `message` under key `kid` (the current key when None).
        Raises LookupError for a key id the ring does not hold."""
        kid = self.current if kid is None else kid
        if kid not in self.keys:
            raise LookupError(f"unknown audit key id {kid!r}")
        return hmac.new(self.keys[kid], message, hashlib.sha256).hexdigest()

    def check(self, message: bytes, mac: str, kid: str) -> bool:
        """Whether `mac` is the MAC of `message` under `kid` (False for an unknown key id)."""
        if kid not in self.keys:
            return False
        return hmac.compare_digest(self.mac(message, kid), mac)


def encode(*parts: str) -> bytes:
    """The parts as one unambiguous message: each length-prefixed, so no two different lists
    of parts give the same bytes (`"ab","c"` vs `"a","bc"`)."""
    out = bytearray()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        out += str(len(data)).encode() + b":" + data
    return bytes(out)


def _pairs(entries: Iterable[tuple[str, str]], where: str) -> dict[str, bytes]:
    keys: dict[str, bytes] = {}
    for kid, secret in entries:
        if not _KID.match(kid) or kid == UNKEYED:
            raise AuditKeyError(
                f"{where}: bad key id {kid!r} (1-32 of A-Z a-z 0-9 _ . -, not 'none')"
            )
        if len(secret) < MIN_SECRET_CHARS:
            raise AuditKeyError(
                f"{where}: the secret of key {kid!r} is shorter than {MIN_SECRET_CHARS} characters"
            )
        if kid in keys:
            raise AuditKeyError(f"{where}: key id {kid!r} is listed twice")
        keys[kid] = secret.encode()
    return keys


def parse_env(value: str) -> dict[str, bytes]:
    """`kid:secret[,kid:secret…]`; a lone secret (no colon) gets the key id `k1`."""
    entries: list[tuple[str, str]] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        kid, sep, secret = item.partition(":")
        entries.append((kid, secret) if sep else ("k1", item))
    return _pairs(entries, "CLAWGATE_AUDIT_KEY")


def parse_file(path: Path) -> dict[str, bytes]:
    """One `kid secret` pair per line; blank lines and `#` comments are skipped."""
    entries: list[tuple[str, str]] = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        why = exc.strerror
        raise AuditKeyError(f"CLAWGATE_AUDIT_KEY_FILE: cannot read {path}: {why}") from None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise AuditKeyError(f"CLAWGATE_AUDIT_KEY_FILE line {number}: expected 'key-id secret'")
        entries.append((parts[0], parts[1]))
    return _pairs(entries, f"CLAWGATE_AUDIT_KEY_FILE ({path})")


def load(env_value: str | None = None, file: Path | None = None) -> KeyRing:
    """The ring from the settings: the file's keys, then the environment's (the last listed is
    current); unkeyed when neither is set."""
    keys: dict[str, bytes] = {}
    if file is not None:
        keys.update(parse_file(file))
    if env_value:
        for kid, secret in parse_env(env_value).items():
            if kid in keys and keys[kid] != secret:
                raise AuditKeyError(f"key id {kid!r} has different secrets in the file and env")
            keys.pop(kid, None)
            keys[kid] = secret
    if not keys:
        return KeyRing()
    return KeyRing(keys=keys, current=list(keys)[-1])
