"""The pages' pure parts as plain data: chart geometry, the console excerpt, the verdict in words."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from registry.fingerprint import analyse_console_log
from registry.pages.charts import MAX_BARS, Mark, bucket_size, chart_start, events_chart, sparkline
from registry.pages.console import excerpt
from registry.pages.verdict import verdict_statements
from testkit.reports import NULL_DEREF_LOG

START = date(2026, 9, 1)


def test_bucket_size_keeps_at_most_max_bars() -> None:
    assert bucket_size(1) == 1 and bucket_size(MAX_BARS) == 1
    assert bucket_size(MAX_BARS + 1) == 7
    for days in (400, 1000, 3650):
        assert days / bucket_size(days) <= MAX_BARS


def test_events_chart_bars_heights_and_marks() -> None:
    daily = {START: 2, START + timedelta(days=3): 4, START - timedelta(days=1): 9}  # the last is outside
    marks = [
        Mark(START + timedelta(days=3), "regression", "r"),
        Mark(START - timedelta(days=5), "x", "outside"),
    ]
    chart = events_chart(daily, START, START + timedelta(days=9), marks)
    assert len(chart.bars) == 10 and chart.bucket_days == 1 and chart.unit == "day"
    assert [b.events for b in chart.bars][:4] == [2, 0, 0, 4] and chart.total == 6
    _, top, _, bottom = chart.plot
    tallest = chart.bars[3]
    assert tallest.y == top and tallest.height == bottom - top
    assert chart.bars[0].height == (bottom - top) / 2
    assert [m.kind for m in chart.marks] == ["regression"]
    assert tallest.x < chart.marks[0].x < tallest.x + tallest.width + 1
    assert chart.summary == "6 events between 2026-09-01 and 2026-09-10; the most, 4, on 2026-09-04."
    assert chart.x_ticks[0].label == "2026-09-01" and chart.x_ticks[-1].label == "2026-09-10"
    assert [t.label for t in chart.y_ticks] == ["0", "4"]


def test_long_ranges_are_bucketed_and_empty_ones_say_so() -> None:
    end = START + timedelta(days=364)
    chart = events_chart({START + timedelta(days=d): 1 for d in range(365)}, START, end, [])
    assert chart.bucket_days == 7 and chart.unit == "week" and len(chart.bars) == 53
    assert chart.total == 365 and chart.bars[-1].days == 1
    empty = events_chart({}, START, START, [])
    assert empty.total == 0 and empty.summary == "No events between 2026-09-01 and 2026-09-01."


def test_chart_starts_before_the_first_event_and_takes_in_a_preceding_rollout() -> None:
    first = date(2026, 9, 16)
    assert chart_start(first, []) == date(2026, 9, 9)
    rollout = Mark(date(2026, 8, 20), "kernel-rollout", "k")
    assert chart_start(first, [rollout]) == date(2026, 8, 20)
    ancient = Mark(date(2025, 1, 1), "kernel-rollout", "k")
    assert chart_start(first, [ancient]) == date(2026, 9, 9)


def test_sparkline_covers_the_last_30_days() -> None:
    today = date(2026, 12, 1)
    line = sparkline({today: 3, today - timedelta(days=29): 1, today - timedelta(days=30): 50}, today)
    assert (line.total, line.peak, line.days) == (4, 3, 30)
    points = [tuple(map(float, p.split(","))) for p in line.points.split()]
    assert len(points) == 30 and points[-1][1] < points[0][1] < points[1][1]


def test_excerpt_marks_header_guilty_and_unreliable_frames() -> None:
    noise = "".join(f"line {i}\n" for i in range(100))
    log = noise + NULL_DEREF_LOG.replace("Call Trace:\n", "Call Trace:\n[ 8812.1189]  ? __die+0x1/0x2\n")
    shown = excerpt(log, analyse_console_log(log).explanation)
    assert shown.header_line == 101 and shown.omitted_before == 92 and shown.omitted_after == 0
    roles = {line.number: line.role for line in shown.lines}
    assert roles[101] == "header"
    guilty = [line for line in shown.lines if line.role == "guilty"]
    assert len(guilty) == 1 and "RIP: 0010:mlx5e_poll_rx_cq" in guilty[0].text
    assert shown.guilty_line == guilty[0].number and guilty[0].guilty
    assert [(f.function, f.guilty, f.unreliable) for f in shown.frames][:3] == [
        ("mlx5e_poll_rx_cq", True, False),
        ("__die", False, True),
        ("mlx5e_napi_poll", False, False),
    ]
    assert shown.frames[0].module == "mlx5_core"


def test_excerpt_never_marks_an_unreliable_frame_and_reads_names_as_the_engine_does() -> None:
    log = (
        "BUG: kernel NULL pointer dereference, address: 0000000000000008\n"
        "Call Trace:\n"
        " ? ext4_writepages+0x1/0x2\n"
        " ext4_writepages.isra.0+0x1/0x2 [ext4]\n"
    )
    frames = excerpt(log, analyse_console_log(log).explanation).frames
    assert [(f.function, f.guilty) for f in frames] == [("ext4_writepages", False), ("ext4_writepages", True)]


@pytest.mark.parametrize("printed, named", [
    ("__x64_sys_ioctl", "sys_ioctl"), ("nvme_queue_rq.lto_priv.0", "nvme_queue_rq"),
    ("_ZN6kernel4sync3arc3Arc4drop17h0123456789abcdefE", "kernel::sync::arc::Arc::drop"),
])
def test_the_guilty_frame_is_marked_whatever_its_printed_name(printed: str, named: str) -> None:
    """The page marks the line the stored explanation read the guilty frame from, in the
    engine's reading of each line: no second normaliser to disagree with the first."""
    log = ("[  10.000000] BUG: unable to handle page fault for address: ffffc90000a3f000\n"
           "[  10.000001] Call Trace:\n"
           "[  10.000002]  <TASK>\n"
           f"[  10.000003]  {printed}+0x1a/0x90\n"
           "[  10.000004]  do_syscall_64+0x3b/0x90\n")
    explanation = analyse_console_log(log).explanation
    assert explanation["frames"][explanation["guilty"]]["function"] == named
    shown = excerpt(log, explanation)
    assert shown.guilty_line == 4
    assert [(f.function, f.guilty) for f in shown.frames][:2] == [(named, True), ("do_syscall_64", False)]


def test_the_guilty_frame_named_by_the_header_marks_the_header_line() -> None:
    log = ("[  10.000000] BUG: KASAN: use-after-free in tcp_ack+0x1a/0x90\n"
           "[  10.000001] Read of size 8 at addr ffff888000000000 by task x/1\n"
           "[  10.000002] Call Trace:\n"
           "[  10.000003]  dump_stack_lvl+0x1/0x2\n"
           "[  10.000004]  tcp_ack+0x1a/0x90\n")
    shown = excerpt(log, analyse_console_log(log).explanation)
    assert shown.guilty_line == shown.header_line == 1
    assert shown.lines[0].role == "header" and shown.lines[0].guilty
    assert excerpt(log, None).guilty_line is None  # an event stored before explanations


def test_a_log_without_a_crash_shows_its_tail() -> None:
    shown = excerpt("".join(f"boot line {i}\n" for i in range(200)), None)
    assert shown.header_line is None and shown.lines[-1].number == 200 and shown.omitted_before > 0
    assert all(line.role == "" for line in shown.lines)


def test_verdict_statements_prefer_the_analysis_words() -> None:
    assert verdict_statements(
        {"verdict": "software", "statements": ["software: spread", "first seen x"]}
    ) == [
        "software: spread",
        "first seen x",
    ]
    older = {
        "verdict": "software",
        "verdict_detail": {"reason": "kernel_version=6.1 carries 100%", "more_events_needed": None},
        "onset": {
            "first_seen": "2026-09-16",
            "change_point": "2026-09-16",
            "shape": "clear start",
            "lined_up": [{"hosts": 300, "attribute": "kernel_version", "value": "6.1"}],
        },
        "uptime": {"statement": "never on nodes up more than 45 days"},
    }
    assert verdict_statements(older) == [
        "software: kernel_version=6.1 carries 100%",
        "first seen 2026-09-16, clear start on 2026-09-16; 300 hosts took kernel_version=6.1 that day",
        "uptime: never on nodes up more than 45 days",
    ]
    assert verdict_statements({"verdict": "inconclusive", "onset": {"first_seen": None}}) == ["inconclusive"]
