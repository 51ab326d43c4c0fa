"""schemathesis hooks for tests/test_openapi_fuzz.py (loaded with ``SCHEMATHESIS_HOOKS``).

The document says every bound JSON Schema can say; the few it says in words only
(gateway/http/openapi.py's docstring) are schema-valid requests the server refuses with
a 400 naming the field, and the check that fails on them is ``positive_data_acceptance``
(ST202). :func:`filter_failure` drops exactly those failures, each by the rule the
document states, and nothing else: another refusal of valid data, any other check's
finding, a refusal without problem JSON or naming another field all stay failures.
Each drop is counted by rule in ``FEDSEARCH_OPENAPI_DROPPED`` (a file, one rule a line).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import schemathesis

#: (rule, status, fields, detail) of each refusal stated in words; ``detail`` is searched in the problem's.
IN_WORDS: tuple[tuple[str, int, frozenset[str], re.Pattern[str]], ...] = tuple(
    (rule, status, frozenset(fields), re.compile(detail))
    for rule, status, fields, detail in (
        # a namespace pattern must match a namespace the caller may see (data, not schema)
        ("namespace pattern matches nothing", 400, {"namespaces", "ns", "query"}, r"^no namespace matches"),
        # a regex must compile with RE2 and search line by line
        ("regex RE2 rejects", 400, {"query", "q"}, r"^invalid (RE2 )?regex"),
        # a glob's brackets and braces must close, and compile
        ("glob does not close", 400, {"paths", "path", "query", "q"}, r"unclosed '[\[{]' in glob|invalid glob"),
        # the query's filters (SPEC §7) must be valid and leave something to search for
        (
            "query filter invalid",
            400,
            {"query", "q"},
            r"^unknown language|^case:|^dedup:|^nothing to search for|^/RE/ is a regex|^at most \d+ path globs"
            r"|^namespace pattern longer|glob.*: file:",
        ),
        # a field and the same filter in the query must agree
        (
            "field and filter disagree",
            400,
            {"languages", "lang", "case_sensitive", "case", "dedup"},
            r"is among lang:|conflicts with",
        ),
        # the page's facets count a live snapshot: a cursor of an answer this gateway still holds
        ("facets need a held snapshot", 400, {"cursor"}, r"^no snapshot of this cursor"),
        # a line range must lie in the file (its length is data) and run forwards
        ("line range outside the file", 400, {"start_line", "end_line"}, r"past the end|before start_line"),
        # every parameter together must fit aiohttp's request line (8190 bytes)
        ("request line too long", 414, {"request line"}, r"^the request line is longer"),
    )
)


def rule_of(status: int, body: bytes) -> str | None:
    """The in-words rule a refusal is, or None."""
    try:
        problem = json.loads(body)
    except ValueError:
        return None
    if not isinstance(problem, dict):
        return None
    field, detail = problem.get("field"), str(problem.get("detail", ""))
    for rule, wanted, fields, pattern in IN_WORDS:
        if status == wanted and field in fields and pattern.search(detail):
            return rule
    return None


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure but positive_data_acceptance's on a refusal the document states in words."""
    if "positive_data_acceptance" not in getattr(failure, "checks", ()):
        return True
    if "problem+json" not in response.headers.get("content-type", [""])[0]:
        return True
    rule = rule_of(response.status_code, response.content)
    if rule is None:
        return True
    dropped = os.environ.get("FEDSEARCH_OPENAPI_DROPPED")
    if dropped:
        with open(dropped, "a", encoding="utf-8") as out:
            out.write(rule + "\n")
    return False
