"""Every operation of /api/v1/openapi.json against the server, by schemathesis (issue 14).

All of schemathesis's checks (server errors, status codes, content types, headers, response
schemas, acceptance of what the document allows and refusal of what it does not), on valid
and on invalid input, with a fixed seed and a bounded number of examples per operation, on
both databases: the document and the server agree, and nothing answers 500.

Three things the document states only in words, since JSON Schema (of OpenAPI 3.0) cannot
say them: strings are Unicode text without NUL (refused with a 400 naming the field, tested in
test_input.py), so none are generated; label keys are bounded (`propertyNames` is 3.1), so a
400 for a too-long key alone is expected; and the rules in SEMANTIC_RULES, whose 400s for
otherwise schema-valid requests are expected, but only when every field the 400 names is one
of them.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from testkit.reports import crash_report
from tests.support.http import auth

pytestmark = pytest.mark.slow  # a few minutes: run early (tests/conftest.py)
EXAMPLES = int(os.environ.get("CRASHREG_SCHEMATHESIS_EXAMPLES", "50"))
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
SEMANTIC_RULES = {
    "cursor": "a cursor is opaque: only one this server issued is valid",
    "crashed_at": "a crash time lies between 2000-01-01 and a day from now",
    "console_log": "a report needs console_log or stack.frames",
    "agent": "an RCA written by an AI names its agent",
    "fix": "fix.url is an http(s) URL (as its pattern and format say)",
    "evidence": "an evidence item carries the fields of its type (listed in the document's description)",
    "note": "a rejection, or a confirmation overriding failed checks, gives a note",
    "parts": "a symbol file's part numbers lie within its part count (its size over the part size)",
    "bytes": "a symbol file is at most CRASHREG_SYMBOL_MAX_FILE_MB (configured, so not in the document)",
}


# A text's bound holds in UTF-8 bytes too (registry/ingest/schemas.py: at_most_bytes); maxLength
# counts characters, so a schema-valid value of many-byte characters may be refused for this alone.
BYTE_BOUND = re.compile(r"longer than \d+ bytes \(UTF-8\)")
# Times a document's date-time allows but no crash, boot or observation can have (SEMANTIC_RULES).
TIME_BOUND = re.compile(r"\w+ must lie between 2000-01-01T00:00:00\+00:00 and a day from now \(.+\)")
UNKNOWN_FIELD = re.compile(r"unknown field(; did you mean .+\?)?$")


def stated_in_words(problem: Any, parent: str = "") -> bool:
    """Is every refusal in `problem` one the document states only in words: a text longer in
    UTF-8 bytes than its bound, a time outside the plausible ones, or a label key longer than
    its bound?"""
    if isinstance(problem, dict):
        if parent == "labels":
            return bool(problem) and all(
                isinstance(refusal, dict) and all(name == "key" or stated_in_words(value)
                                                  for name, value in refusal.items())
                for refusal in problem.values())
        return bool(problem) and all(stated_in_words(value, str(name)) for name, value in problem.items())
    if isinstance(problem, list):
        return bool(problem) and all(stated_in_words(message, parent) for message in problem)
    return bool(BYTE_BOUND.fullmatch(str(problem)) or TIME_BOUND.fullmatch(str(problem)))


def messages(fields: Any) -> list[str]:
    """Every message of an error's (nested) fields."""
    if isinstance(fields, dict):
        return [m for value in fields.values() for m in messages(value)]
    if isinstance(fields, list):
        return [m for value in fields for m in messages(value)]
    return [str(fields)]


@schemathesis.check
def positive_data_acceptance_but_semantic_rules(ctx: Any, response: Any, case: Any) -> bool | None:
    """positive_data_acceptance, except a 400 whose every refusal is of a field of
    SEMANTIC_RULES or stated in words (a UTF-8 byte bound, a time bound, a label key's bound)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except AssertionError:
        if response.status_code == 400:
            fields = json.loads(response.content).get("error", {}).get("fields", {})
            # A report refused for a semantic rule also names each field it did not know
            # (with the known name it resembles): those are beside the rule, not a refusal.
            named = {name for name, problem in fields.items() if not all(
                UNKNOWN_FIELD.match(m) for m in messages(problem))}
            semantic = {*SEMANTIC_RULES, "stack"}
            if named and all(name in semantic or stated_in_words(fields[name], name) for name in named):
                return None
        raise


def failures_of(operation: Any, mode: GenerationMode, headers: dict[str, str]) -> list[str]:
    """Run one operation's examples; the first failure's text, if any (hypothesis shrinks it)."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    def run(case: Any) -> None:
        case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance],
                               additional_checks=[positive_data_acceptance_but_semantic_rules])

    try:
        run()
    except Unsatisfiable:
        return []  # nothing invalid can be made of an operation that takes no input
    except (Exception, BaseExceptionGroup) as error:  # schemathesis's FailureGroup
        failure = f"{mode.value} {operation.label}: {error}"
        print(failure)
        return [failure[:2000]]
    return []


def seed(client: Any, admin: str) -> dict[str, str]:
    """One crash with a capture, a second source and an RCA: the path parameters that name
    real rows, so that reads of real rows are checked against the document too."""
    report = crash_report()
    answer = client.post("/api/v1/reports", json=report, headers=auth(admin)).json
    event = answer["event_id"]
    again = crash_report(source="dpu", boot_id=report["boot_id"])
    assert client.post("/api/v1/reports", json=again, headers=auth(admin)).status_code == 201
    capture = client.post(f"/api/v1/events/{event}/captures",
                          json={"method": "makedumpfile", "status": "completed", "bytes": 10**9,
                                "downtime_s": 300.0, "uri": "s3://dumps/1"}, headers=auth(admin))
    rca = client.post(f"/api/v1/signatures/{answer['signature']['id']}/rcas", headers=auth(admin), json={
        "summary": "s", "body": "b", "author": "dana", "author_kind": "human",
        "evidence": [{"type": "event", "event_id": event}], "fix": {"url": "https://example.test/fix"}})
    assert capture.status_code == rca.status_code == 201, (capture.json, rca.json)
    return {"key": answer["signature"]["id"], "event_id": event, "capture_id": capture.json["id"],
            "rca_id": rca.json["id"]}


def test_every_operation_agrees_with_the_document(app, client, make_token) -> None:  # type: ignore[no-untyped-def]
    admin = make_token("admin")
    real = seed(client, admin)
    schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
    # The token is the test's (every call sends an admin one); scopes and missing tokens are
    # tested in tests/registry/ingest, so the security scheme is not a parameter to mutate here.
    schema.config.generation.update(allow_x00=False, codec="utf-8", with_security_parameters=False)
    # A body past the server's limit (2 MiB) is refused whole, 413, before a field is read:
    # an over-long field can make one, and that refusal is a rejection too.
    rejection = schema.config.checks.negative_data_rejection
    rejection.expected_statuses = [*rejection.expected_statuses, "413"]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    only = os.environ.get("CRASHREG_SCHEMATHESIS_ONLY", "")
    failures = [
        failure
        for operation in operations if only in operation.label
        for mode in MODES
        for failure in failures_of(operation, mode, auth(admin))
    ]
    for operation in operations:  # every read of a real row, once
        names = set(re.findall(r"{(\w+)}", operation.path))
        if str(operation.method).upper() == "GET" and names and names <= set(real):
            case = operation.Case(path_parameters={name: real[name] for name in names})
            try:
                case.call_and_validate(headers=auth(admin))
            except (Exception, BaseExceptionGroup) as error:
                failures.append(f"real row {operation.label}: {error}"[:2000])
    assert not failures, "\n\n".join(failures)
