"""The evidence key ring: what a setting gives, what a bad one says, what rotation keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import Settings
from runtime import evidence_keys
from runtime.evidence_keys import AuditKeyError, KeyRing, encode

SECRET_A = "a" * 32
SECRET_B = "b" * 32


def test_no_key_is_unkeyed_and_says_so() -> None:
    ring = evidence_keys.load(None, None)
    assert not ring.keyed and ring.current == "none"
    assert ring.check(b"x", ring.mac(b"x"), "none")


def test_the_last_key_listed_is_current_and_older_ones_still_verify(tmp_path: Path) -> None:
    old = evidence_keys.load(f"k1:{SECRET_A}")
    mac = old.mac(b"entry")
    file = tmp_path / "keys"
    file.write_text(f"# rotated\nk1 {SECRET_A}\n\nk2 {SECRET_B}\n")
    ring = evidence_keys.load(None, file)
    assert ring.current == "k2" and ring.keyed
    assert ring.check(b"entry", mac, "k1")
    assert not ring.check(b"entry", mac, "k2")
    assert not ring.check(b"changed", mac, "k1")
    assert not ring.check(b"entry", mac, "k9")  # unknown id: fails, does not raise


def test_a_lone_secret_gets_key_id_k1() -> None:
    assert evidence_keys.load(SECRET_A).current == "k1"


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("k1:short", "shorter than 16"),
        (f"bad id!:{SECRET_A}", "bad key id"),
        (f"none:{SECRET_A}", "bad key id"),
        (f"k1:{SECRET_A},k1:{SECRET_B}", "listed twice"),
    ],
)
def test_bad_keys_fail_without_showing_the_secret(value: str, says: str) -> None:
    with pytest.raises(AuditKeyError, match=says) as caught:
        evidence_keys.load(value)
    assert SECRET_A not in str(caught.value) and SECRET_B not in str(caught.value)


def test_settings_fail_at_start_on_a_bad_key(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CLAWGATE_AUDIT_KEY_FILE line 1"):
        Settings(CLAWGATE_AUDIT_KEY_FILE=_file(tmp_path, "only-one-word\n"))
    ring = Settings(CLAWGATE_AUDIT_KEY=f"prod-1:{SECRET_A}").evidence_keys()
    assert ring.current == "prod-1"


def test_encoding_is_unambiguous() -> None:
    assert encode("ab", "c") != encode("a", "bc")
    assert KeyRing().mac(encode("ab", "c")) != KeyRing().mac(encode("a", "bc"))


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "keys"
    path.write_text(text)
    return path
