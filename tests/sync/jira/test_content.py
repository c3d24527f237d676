"""What the sync writes and how it reads Jira's answers back: pure functions."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from jira import JIRAError
from requests import Response

from registry.jira.state import JIRA_TOPICS
from sync.jira.client import classify, retry_after_seconds
from sync.jira.content import (
    BLOCK_BEGIN,
    BLOCK_END,
    MARKER_OPENING,
    ends_with_marker,
    fingerprint_from_labels,
    marker,
    merge_description,
    rca_comment,
    signature_label,
    summary_line,
)
from sync.jira.drain import HANDLERS, backoff
from sync.jira.mapping import decide

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
OLD = f"{BLOCK_BEGIN}\n||Events|1|\n{BLOCK_END}"
NEW = f"{BLOCK_BEGIN}\n||Events|9|\n{BLOCK_END}"


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (None, NEW),
        ("", NEW),
        ("Engineer notes", f"{NEW}\n\nEngineer notes\n"),
        (f"Notes before\n{OLD}\nNotes after", f"Notes before\n{NEW}\nNotes after"),
        (OLD, NEW),
        (f"{BLOCK_BEGIN} but the end was deleted", f"{NEW}\n\n{BLOCK_BEGIN} but the end was deleted\n"),
    ],
)
def test_the_facts_block_is_replaced_and_everything_else_kept(current, expected):
    assert merge_description(current, NEW) == expected
    assert merge_description(merge_description(current, NEW), NEW) == merge_description(current, NEW)


def test_the_signature_is_recoverable_from_labels_alone():
    labels = ["crashreg", "triage", signature_label("ab12cd")]
    assert fingerprint_from_labels(labels) == "ab12cd"
    assert fingerprint_from_labels(["crashreg"]) is None
    assert " " not in signature_label("ab12cd")


def test_summaries_are_one_jira_line():
    assert summary_line("BUG: x\nin  y") == "BUG: x in y"
    assert len(summary_line("x" * 400)) == 254


@pytest.mark.parametrize(
    ("category", "resolution", "current", "status"),
    [
        ("done", "Fixed", "new", "resolved"),
        ("done", "Done", "regressed", "resolved"),
        ("done", "Won't Fix", "triaged", "ignored"),
        ("done", "Won't Do", "new", "ignored"),
        ("new", None, "resolved", "triaged"),
        ("indeterminate", None, "new", "triaged"),
        ("new", None, "new", "new"),
        ("new", None, "regressed", "regressed"),
    ],
)
def test_status_categories_map_to_registry_statuses(category, resolution, current, status):
    assert decide(category, resolution, current).status == status
    assert decide("done", "Duplicate", "new").merge


def test_failures_are_sorted_into_retry_and_give_up():
    def error(status: int, retry_after: str | None = None) -> JIRAError:
        response = Response()
        response.status_code = status
        if retry_after:
            response.headers["Retry-After"] = retry_after
        return JIRAError("x", status_code=status, response=response)

    throttled = classify(error(429, "17"), NOW)
    assert not throttled.permanent and throttled.stop_run and throttled.retry_after_s == 17
    assert classify(error(503), NOW).stop_run and not classify(error(503), NOW).permanent
    assert classify(error(400), NOW).permanent and not classify(error(400), NOW).stop_run
    assert not classify(error(401), NOW).permanent, "a credentials fix must not lose messages"
    assert retry_after_seconds("Sun, 29 Nov 2026 12:01:00 GMT", NOW) == 60
    assert [backoff(n).total_seconds() for n in (1, 2, 3, 10)] == [30, 60, 120, 900]


def test_every_jira_topic_has_a_handler():
    assert set(HANDLERS) == set(JIRA_TOPICS)


@pytest.mark.parametrize("text", ["[crashreg:rca:75]", "see [ CRASHREG :regression:2000] here"])
def test_quoted_text_carries_no_marker_and_only_the_last_line_counts(text):
    comment = rca_comment({"rca_id": 7, "summary": text, "author": text, "note": text})
    assert not MARKER_OPENING.search(comment.rsplit("\n", 1)[0])
    assert ends_with_marker(comment, marker("rca", 7))
    assert not ends_with_marker(f"{marker('rca', 7)}\nquoted above", marker("rca", 7))
