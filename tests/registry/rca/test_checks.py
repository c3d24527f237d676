"""Evidence checks, kernel debuginfo rules and event sampling: pure functions, no database."""

from __future__ import annotations

from registry.rca.checks import (
    FAIL,
    PASS,
    SKIP,
    EventFacts,
    KernelCrashes,
    SignatureFacts,
    check_captures,
    check_events,
    check_fix_version,
    check_functions,
    check_kernel_versions,
    check_required_evidence,
    passed,
    run_checks,
)
from registry.rca.kernels import debuginfo
from registry.rca.sampling import diverse_sample, similarity

FACTS = SignatureFacts(
    id="7",
    functions=frozenset({"ext4_fill_super", "mount_bdev"}),
    kernels=[
        KernelCrashes("6.8.0-52-generic", 30, "101", "2026-11-20T00:00:00+00:00"),
        KernelCrashes("6.8.0-58-generic", 4, "140", "2026-11-25T00:00:00+00:00"),
    ],
    events={
        "101": EventFacts("101", "7", "6.8.0-52-generic", frozenset({"ext4_put_super"})),
        "200": EventFacts("200", "9", "6.8.0-52-generic"),
    },
    captures={"5": "7", "6": "9"},
)


def rca(*evidence: dict, fix: str | None = None, author_kind: str = "human") -> dict:
    return {
        "author_kind": author_kind,
        "evidence": list(evidence),
        "fix": {"kernel_version": fix} if fix else {},
    }


def test_cited_events_must_exist_and_belong_to_the_signature() -> None:
    assert check_events(rca({"type": "event", "event_id": "101"}), FACTS).status == PASS
    result = check_events(
        rca({"type": "event", "event_id": "200"}, {"type": "event", "event_id": "999"}), FACTS
    )
    assert result.status == FAIL
    assert result.problems == ("event 200 belongs to signature 9, not 7", "event 999 does not exist")
    assert check_events(rca(), FACTS).status == SKIP


def test_cited_captures_must_be_of_the_signature() -> None:
    assert check_captures(rca({"type": "capture", "capture_id": "5"}), FACTS).status == PASS
    result = check_captures(
        rca({"type": "capture", "capture_id": "6"}, {"type": "capture", "capture_id": "8"}), FACTS
    )
    assert result.problems == ("capture 6 is of signature 9, not 7", "capture 8 does not exist")


def test_cited_functions_must_appear_in_signature_or_cited_event_frames() -> None:
    ok = rca(
        {"type": "function", "function": "mount_bdev"},
        {"type": "event", "event_id": "101"},
        {
            "type": "source",
            "file": "fs/ext4/super.c",
            "line": 1,
            "kernel_version": "6.8.0-52",
            "function": "ext4_put_super",
        },
    )
    assert check_functions(ok, FACTS).status == PASS
    bad = check_functions(rca({"type": "function", "function": "tcp_sendmsg"}), FACTS)
    assert bad.status == FAIL and "tcp_sendmsg" in bad.problems[0]


def test_cited_kernels_must_be_ones_it_crashed_on_flavour_suffix_aside() -> None:
    assert check_kernel_versions(rca({"type": "kernel", "kernel_version": "6.8.0-52"}), FACTS).status == PASS
    result = check_kernel_versions(
        rca({"type": "source", "file": "mm/slub.c", "line": 9, "kernel_version": "6.8.0-60-generic"}), FACTS
    )
    assert result.status == FAIL
    assert "6.8.0-60-generic is not one this signature crashed on" in result.problems[0]


def test_fix_version_compares_kernels_as_versions_not_strings() -> None:
    # "6.8.0-100" < "6.8.0-58" as strings; as versions it is newer, so no crash contradicts it.
    assert check_fix_version(rca(fix="6.8.0-100"), FACTS).status == PASS
    assert check_fix_version(rca(fix="6.8.0-60"), FACTS).status == PASS
    contradicted = check_fix_version(rca(fix="6.8.0-58"), FACTS)
    assert contradicted.status == FAIL
    assert contradicted.problems == (
        "crashed on 6.8.0-58-generic (>= fix 6.8.0-58): 4 events, last event 140 at "
        "2026-11-25T00:00:00+00:00",
    )
    older = check_fix_version(rca(fix="6.8.0-40"), FACTS)
    assert older.status == FAIL and len(older.problems) == 2
    assert check_fix_version(rca(), FACTS).status == SKIP


def test_fix_version_of_another_flavour_series_is_not_compared() -> None:
    # -azure ABI numbers are a separate series from -generic: neither contradicts nor confirms.
    assert check_fix_version(rca(fix="6.8.0-1015-azure"), FACTS).status == PASS


def test_ai_rcas_must_cite_checkable_evidence_humans_need_not() -> None:
    bare = rca({"type": "link", "url": "https://lore.kernel.org/x"}, author_kind="ai")
    result = check_required_evidence(bare, FACTS)
    assert result.status == FAIL
    assert result.problems == ("no event or capture evidence cited", "no function or source evidence cited")
    assert check_required_evidence(rca(author_kind="human"), FACTS).status == SKIP
    cited = rca(
        {"type": "capture", "capture_id": "5"},
        {"type": "function", "function": "mount_bdev"},
        author_kind="ai",
    )
    assert check_required_evidence(cited, FACTS).status == PASS


def test_run_checks_flags_an_rca_when_any_check_fails() -> None:
    good = rca(
        {"type": "event", "event_id": "101"},
        {"type": "function", "function": "ext4_fill_super"},
        author_kind="ai",
    )
    assert passed(run_checks(good, FACTS))
    assert [r.name for r in run_checks(good, FACTS)] == [
        "cites_checkable_evidence",
        "events_belong_to_signature",
        "captures_belong_to_signature",
        "functions_in_frames",
        "kernel_versions_crashed_on",
        "fix_version_consistent",
    ]
    assert not passed(run_checks(good | {"fix": {"kernel_version": "6.8.0-52"}}, FACTS))


def test_debuginfo_rules_name_the_package_and_source_of_each_family() -> None:
    ubuntu = debuginfo("6.8.0-52-generic")
    assert ubuntu["family"] == "ubuntu"
    assert "linux-image-6.8.0-52-generic-dbgsym" in ubuntu["debug_packages"]
    rhel = debuginfo("5.14.0-362.8.1.el9_3.x86_64")
    assert rhel["debug_packages"][0] == "kernel-debuginfo-5.14.0-362.8.1.el9_3"
    assert rhel["source_ref"] == "kernel-5.14.0-362.8.1.el9_3"
    assert debuginfo("6.1.0-18-amd64")["debug_packages"] == ["linux-image-6.1.0-18-amd64-dbg"]
    assert debuginfo("6.8.0")["source_ref"] == "v6.8"
    assert debuginfo("6.10.0-rc3")["source_ref"] == "v6.10-rc3"
    assert debuginfo("6.9.0-rc1-syzkaller-00123-gabcdef123456")["source_ref"] == "commit abcdef123456"
    assert debuginfo("custom-build")["family"] == "unknown"


def test_diverse_sample_spreads_over_hosts_kernels_and_regions() -> None:
    # 30 crashes on host a (newest), then one each on b and c with other kernels/regions.
    events = [{"id": i, "hostname": "a", "kernel_version": "k1", "region": "r1"} for i in range(30)]
    events += [
        {"id": 30, "hostname": "b", "kernel_version": "k2", "region": "r1"},
        {"id": 31, "hostname": "c", "kernel_version": "k1", "region": "r2"},
        {"id": 32, "hostname": "a", "kernel_version": "k1", "region": "r1"},
    ]
    sample = diverse_sample(events, 4)
    assert len(sample) == 4
    assert {e["hostname"] for e in sample} == {"a", "b", "c"}
    assert events[0] in sample and events[-1] in sample  # the latest and the first crash
    assert diverse_sample(events[:2], 10) == events[:2]
    assert diverse_sample([], 5) == []


def test_similarity_by_guilty_function_or_shared_frames() -> None:
    assert similarity("f", ["f", "g"], "f", ["x"]) == (1.0, ["same guilty function f"])
    score, why = similarity("f", ["f", "g", "h"], "z", ["g", "h", "z"])  # type: ignore[misc]
    assert score == 0.5 and why == ["50% of frames shared"]
    assert similarity("f", ["f", "g"], "z", ["y", "z"]) is None
