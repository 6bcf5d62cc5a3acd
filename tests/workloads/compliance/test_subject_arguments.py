"""Hostile subjects (issue 37 item 3): what ``lakehouse erase`` binds as data and what it refuses
before Spark starts, as pure functions (no JVM)."""

from __future__ import annotations

import pytest

from lakehouse.errors import UsageError
from workloads.compliance.erasure import ErasureRequest
from workloads.compliance.scan import tokens
from workloads.compliance.subject import check_entity, check_text, email_key

LONG = "a" * 3988 + "@example.org"  # 4,000 characters


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("alice@example.org", "alice@example.org"),
        ("  Alice@Example.ORG\t", "alice@example.org"),
        ("a%b_c@example.org", "a%b_c@example.org"),  # LIKE wildcards are plain characters
        ("o.k+tag-1@sub.example.org", "o.k+tag-1@sub.example.org"),
        ("a" * 64 + "@" + "d" * 189, "a" * 64 + "@" + "d" * 189),  # 254 characters
    ],
)
def test_an_address_is_keyed_as_resolvers_key_it_and_is_one_whole_token(address: str, key: str) -> None:
    assert email_key(address) == key
    assert tokens(f"line with {address} in it") >= {key}, "raw text and the scan see it whole"


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("x' OR '1'='1", "character"),
        ("a@b.c; DROP TABLE x", "character"),
        ("o'brien@example.org", "character"),
        ('"a"@example.org', "character"),
        ("\u0430lice@example.org", "character"),  # Cyrillic а: a different address, not erasable whole
        ("alice\uff20example.org", "character"),  # fullwidth ＠: never NFKC-mapped to alice@example.org
        ("\uff41lice@example.org", "character"),  # fullwidth ａ
        ("a\u200b@example.org", "character"),  # zero-width space
        ("a\u202e@example.org", "character"),  # right-to-left override
        ("a\x00@example.org", "character"),
        ("a\n@example.org", "character"),
        ("a b@example.org", "character"),
        (LONG, "254"),
        ("a" * 65 + "@example.org", "64"),
        ("nobody", "exactly one '@'"),
        ("a@b@example.org", "exactly one '@'"),
        ("@example.org", "local part and a domain"),
        ("alice@", "local part and a domain"),
        (".alice@example.org", "starts or ends"),
        ("alice@example.org.", "starts or ends"),
    ],
)
def test_an_address_that_cannot_be_erased_whole_is_refused_naming_the_flag(address: str, why: str) -> None:
    with pytest.raises(UsageError) as refused:
        email_key(address)
    message = str(refused.value)
    assert message.startswith("--subject-email is not an email address"), message
    assert why in message
    assert "\n" not in message, "one line"
    assert len(message) < 300, "the value is not echoed"
    assert refused.value.exit_code == 2


def test_no_normalisation_maps_a_look_alike_onto_an_ascii_address() -> None:
    for look_alike in ("\u0430lice@example.org", "alice\uff20example.org", "\uff41lice@example.org"):
        with pytest.raises(UsageError):
            email_key(look_alike)


@pytest.mark.parametrize("entity", ["e1-0123456789abcdef", "e1-ffffffffffffffff"])
def test_an_entity_id_as_resolvers_write_it_is_taken(entity: str) -> None:
    assert check_entity(entity) == entity


@pytest.mark.parametrize(
    ("entity", "why"),
    [
        ("", "empty"),
        ("  ", "empty"),
        ("redacted:erasure-20261201T000000000000Z-0123abcd", "redacted"),
        ("e1-0123456789ABCDEF", "not an entity id"),
        ("e1-0123456789abcde", "not an entity id"),
        ("e1-0123456789abcdef0", "not an entity id"),
        (" e1-0123456789abcdef", "not an entity id"),
        ("e1-0123456789abcdef\n", "not an entity id"),
        ("e2-0123456789abcdef", "not an entity id"),
        ("x' OR '1'='1", "not an entity id"),
        ("e1-%", "not an entity id"),
        ("e1-________________", "not an entity id"),
        ("e1-0123456789abcde\u0430", "not an entity id"),
        ("e" * 4000, "not an entity id"),
    ],
)
def test_anything_else_given_as_an_entity_is_refused(entity: str, why: str) -> None:
    with pytest.raises(UsageError, match=f"^--entity .*{why}") as refused:
        check_entity(entity)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        "REQ-7",
        "x' OR '1'='1",
        "a@b.c; DROP TABLE x",
        '50% of "the_data"',
        "Art. 17 DSGVO – Löschung",
        "r" * 128,
    ],
)
def test_a_request_id_is_data_quotes_sql_and_wildcards_included(text: str) -> None:
    assert check_text("--request", text) == text
    assert check_text("--reason", text) == text


@pytest.mark.parametrize(
    ("flag", "text", "why"),
    [
        ("--request", "", "empty"),
        ("--reason", " \t", "empty"),
        ("--request", "r" * 129, "at most 128"),
        ("--reason", "r" * 4000, "at most 1000"),
        ("--reason", "GDPR\nart. 17", "unprintable"),
        ("--request", "REQ\x00-7", "unprintable"),
        ("--request", "REQ\u200b-7", "unprintable"),
        ("--reason", "art. 17\u202e", "unprintable"),
    ],
)
def test_a_request_or_reason_that_is_empty_long_or_unprintable_is_refused(
    flag: str, text: str, why: str
) -> None:
    with pytest.raises(UsageError, match=f"^{flag} .*{why}"):
        check_text(flag, text)


def test_the_request_checks_every_field_and_a_dry_run_needs_no_request() -> None:
    assert ErasureRequest("", "", email="a%b_c@example.org", dry_run=True).email == "a%b_c@example.org"
    assert ErasureRequest("REQ-1", "x' OR '1'='1", entity="e1-0123456789abcdef").entity
    with pytest.raises(UsageError, match=r"^--reason"):
        ErasureRequest("REQ-1", "r" * 4000, email="a@example.org")
    with pytest.raises(UsageError, match=r"^--entity"):
        ErasureRequest("REQ-1", "art. 17", entity="x' OR '1'='1")
    with pytest.raises(UsageError, match=r"^--request"):
        ErasureRequest("REQ\x1b", "", email="a@example.org", dry_run=True)
