import pytest

from mirror_pipeline.config.redaction import REDACTED, is_secret_key, redact, scrub


@pytest.mark.parametrize(
    "key",
    [
        "sasl.password",
        "sasl.jaas.config",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "ssl.key.pem",
        "ssl_key",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "SASL.PASSWORD",
        "spark.ssl.keyStorePassword",
        "spark.authenticate.secret",
        "sasl.oauthbearer.assertion.private.key.pem",
        "sasl.oauthbearer.assertion.private.key.passphrase",
        "my.private.key",
        "basic.auth.user.info",
    ],
)
def test_secret_keys(key):
    assert is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "client.id",
    ],
)
def test_plain_keys(key):
    assert not is_secret_key(key)


def test_redact_masks_only_secrets_and_copies():
    props = {"bootstrap.servers": "h:9092", "sasl.password": "hunter2", "nested": {"ssl.key.password": "pw2", "x": "y"}}
    out = redact(props)
    assert out == {
        "bootstrap.servers": "h:9092",
        "sasl.password": REDACTED,
        "nested": {"ssl.key.password": REDACTED, "x": "y"},
    }
    assert props["sasl.password"] == "hunter2"
    assert REDACTED == "***"


def test_scrub_replaces_every_occurrence():
    text = "auth failed for hunter2 (hunter2)"
    assert scrub(text, ["hunter2"]) == "auth failed for *** (***)"


def test_scrub_longest_first_hides_the_whole_jaas_line():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required password="pw";'
    out = scrub(f"bad config: {jaas}", ["pw", jaas])
    assert out == "bad config: ***"


def test_scrub_ignores_empty_secrets_and_keeps_text_without_secrets():
    assert scrub("nothing here", ["", "absent"]) == "nothing here"
    assert scrub("abc", []) == "abc"


def test_scrub_hides_a_secret_only_as_a_token_of_its_own():
    # Glued to letters or digits it is part of another word; next to punctuation it is the secret.
    assert (
        scrub("spark.conf: bad; password=park; 'park' (park)", ["park"]) == "spark.conf: bad; password=***; '***' (***)"
    )
    assert scrub("parking parks", ["park"]) == "parking parks"
    assert scrub("user:hunter2@host hunter2_backup", ["hunter2"]) == "user:***@host ***_backup"


def test_scrub_respects_a_secret_that_begins_or_ends_with_punctuation():
    assert scrub("x p@ss! y, (p@ss!), ap@ss!b", ["p@ss!"]) == "x *** y, (***), ap@ss!b"
    assert scrub("key=!x9z!end", ["!x9z!"]) == "key=***end"


def test_scrub_of_a_short_secret_never_garbles_words():
    message = "sp" + "ark.conf: spark.ssl.keyPassword: expected a single value, got a list"
    assert scrub(message, ["a", "b"]) == message
    assert scrub("a is ok", ["ok", "is"]) == "a is ok"


def test_scrub_still_hides_a_short_secret_quoted_whole_or_assigned():
    assert scrub("expected a whole number, got 'a'", ["a"]) == "expected a whole number, got '***'"
    assert scrub('password="ab"; password=ab; user=abc', ["ab"]) == 'password="***"; password=***; user=abc'
