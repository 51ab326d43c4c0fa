"""Coverage without the reason (gateway.index.reasons.Coverage, issue 52): the same number explain() gives, for
any question's words, alike forms, neighbours and fields."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.index.reasons import Coverage, explain
from gateway.index.store import Candidate

WORDS = [
    "hash",
    "hashes",
    "password",
    "passwords",
    "store",
    "storing",
    "stored",
    "cancel",
    "stop",
    "param",
    "parameters",
    "params",
    "library",
    "libraries",
    "gzip",
    "value",
    "key",
    "secure",
    "salt",
    "404",
]
TEXT = st.lists(
    st.one_of(st.sampled_from([*WORDS, " ", ".", "_", "HashPassword", "getKey", "\n\n", "é"]), st.text(max_size=3)),
    max_size=12,
).map(" ".join)
CANDIDATE = Candidate(1, 0, "function", "f", "f", 1, 2, "", "def f(value)")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    terms=st.lists(st.sampled_from(WORDS), min_size=0, max_size=4, unique=True),
    fields=st.lists(TEXT, min_size=0, max_size=7),
    weighted=st.booleans(),
    weights=st.dictionaries(st.sampled_from(WORDS), st.floats(0.0, 5.0)),
    near=st.dictionaries(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS), max_size=3).map(tuple)),
    alike=st.dictionaries(st.sampled_from(WORDS), st.lists(st.sampled_from(WORDS), max_size=2).map(tuple)),
    share=st.sampled_from([0.0, 0.5]),
)
def test_coverage_is_explains(
    terms: list[str],
    fields: list[str],
    weighted: bool,
    weights: dict[str, float],
    near: dict[str, tuple[str, ...]],
    alike: dict[str, tuple[str, ...]],
    share: float,
) -> None:
    given_weights = weights if weighted else None
    expected = explain(terms, fields, CANDIDATE, given_weights, near, share, alike)[2]
    assert Coverage(terms, given_weights, near, share, alike)(fields) == expected


def test_a_real_declaration() -> None:
    fields = (
        "generate password hash",
        "",
        "password method salt length",
        "Securely hash a password for storage.",
        "hashlib salt pbkdf2 hash internal",
        "src werkzeug security",
        "",
    )
    terms = ("hash", "password", "storing")
    weights = {"hash": 3.0, "password": 4.0, "storing": 1.5}
    _reason, matched, coverage = explain(terms, fields, CANDIDATE, weights, {"storing": ("store",)}, 0.5)
    assert Coverage(terms, weights, {"storing": ("store",)}, 0.5)(fields) == coverage
    assert matched == ("hash", "password") and 0.0 < coverage < 1.0  # "storage" is not a form of storing
