"""crashreg's Grafana alert rules as code: what a fleet's managers want to be told.

Every rule reads the `rpt_*` views only (what Grafana's read-only role may read) and measures
time from the end of its query's range, i.e. the evaluation time, so the same SQL can be
evaluated "as of" any moment. Text columns become the alert instance's labels (signature,
kernel, ...); the one numeric column is compared with a threshold from `AlertThresholds`.
docs/alerting.md says what each rule means and what to do.
"""

from __future__ import annotations

from dashboards import captures, epidemiology, fleet, triage
from dashboards.alert_model import AlertRule, RuleGroup, render_rule, rule_group
from dashboards.dialects import DAY_S, Dialect
from dashboards.model import Dashboard
from registry.config import AlertThresholds

GROUP = "crashreg"
HOUR_S = 3600
# (attribute column, label, words) of the crash-rate-after-rollout rules.
ROLLOUTS = (
    ("kernel_version", "kernel", "kernel version"),
    ("bios_version", "bios", "BIOS version"),
    ("sku", "sku", "SKU"),
)
ROLLOUT_PANELS = {
    "kernel_version": (epidemiology.UID, epidemiology.KERNEL_RATE_PANEL),
    "bios_version": (epidemiology.UID, "Hardware-configuration findings"),
    "sku": (epidemiology.UID, "Hardware-configuration findings"),
}


def _window(d: Dialect, column: str, seconds: float) -> str:
    """`column` within the `seconds` before the evaluation time."""
    return (
        f"{column} >= {d.seconds_before_end(seconds)} AND {column} <= {d.epoch_to_time(d.range_end_epoch())}"
    )


def new_signature_spread(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.new_signature_hours * HOUR_S
    return AlertRule(
        key="new-signature-spread",
        title="crashreg: new signature spreading across hosts",
        sql=(
            "SELECT CAST(e.signature_id AS TEXT) AS signature, MAX(e.title) AS title, "
            "COUNT(DISTINCT e.hostname) AS hosts FROM rpt_events e "
            "JOIN rpt_signatures s ON s.signature_id = e.signature_id "
            f"WHERE {_window(d, 's.first_seen', window)} AND {_window(d, 'e.crashed_at', window)} "
            "GROUP BY e.signature_id"
        ),
        threshold=t.new_signature_hosts - 1,  # hosts are whole: "> N - 1" is ">= N"
        lookback_s=window,
        summary=(
            f"New signature #{{{{ $labels.signature }}}} crashed {{{{ $values.B }}}} hosts within "
            f"{t.new_signature_hours} h of its first sighting: {{{{ $labels.title }}}}"
        ),
        description=(
            "A crash nobody has seen before is spreading. Open the signature page: check the "
            "guilty frame and what the hosts share (kernel, BIOS, SKU, region in the epidemiology "
            "verdict); file or link the Jira issue; pause the rollout the hosts share, if any."
        ),
        severity="critical",
        dashboard_uid=fleet.UID,
        panel_title="Top signatures",
        signature_page=True,
    )


def regression(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.regression_hours * HOUR_S
    return AlertRule(
        key="signature-regression",
        title="crashreg: resolved signature crashing again",
        sql=(
            "SELECT CAST(signature_id AS TEXT) AS signature, MAX(title) AS title, "
            "COALESCE(kernel_version, 'unknown') AS kernel, COUNT(*) AS events FROM rpt_events "
            f"WHERE regression = 'regressed' AND {_window(d, 'crashed_at', window)} "
            "GROUP BY signature_id, COALESCE(kernel_version, 'unknown')"
        ),
        threshold=0,
        lookback_s=window,
        summary=(
            "Resolved signature #{{ $labels.signature }} crashed {{ $values.B }} time(s) on kernel "
            "{{ $labels.kernel }}: {{ $labels.title }}"
        ),
        description=(
            "A bug marked resolved is back on a kernel that should carry the fix. Check the fixed-in "
            "kernel on the signature page against the kernel label: reopen the Jira issue (the sync "
            "comments on it) or correct the fix version if the host runs an older kernel."
        ),
        severity="critical",
        dashboard_uid=triage.UID,
        panel_title="Regressions",
        signature_page=True,
    )


def rollout_crash_rate(d: Dialect, t: AlertThresholds, attribute: str, label: str, words: str) -> AlertRule:
    window = t.rollout_days * DAY_S
    end = d.epoch_to_time(d.range_end_epoch())
    dashboard_uid, panel_title = ROLLOUT_PANELS[attribute]
    return AlertRule(
        key=f"{label}-rollout-crash-rate",
        title=f"crashreg: crash rate up on a new {words}",
        sql=(
            "WITH v AS (SELECT value, first_seen, hosts FROM rpt_attribute_rollouts "
            f"WHERE attribute = '{attribute}'), "
            "r AS (SELECT value, first_seen, hosts FROM v "
            f"WHERE hosts > 0 AND {_window(d, 'first_seen', window)}), "
            "f AS (SELECT SUM(hosts) AS hosts FROM v), "
            "c AS (SELECT r.value, SUM(CASE WHEN d.value = r.value THEN d.events ELSE 0 END) AS mine, "
            "SUM(CASE WHEN d.value = r.value THEN 0 ELSE d.events END) AS others FROM r "
            f"JOIN rpt_daily_breakdown d ON d.dimension = '{attribute}' "
            f"AND d.day >= {d.day_start('r.first_seen')} AND d.day <= {end} GROUP BY r.value) "
            f"SELECT c.value AS {label}, (c.mine * 1.0 / r.hosts) / ((c.others + 1.0) / (f.hosts - r.hosts)) "
            "AS ratio FROM c JOIN r ON r.value = c.value CROSS JOIN f "
            f"WHERE f.hosts > r.hosts AND c.mine >= {t.rollout_min_events}"
        ),
        threshold=t.rollout_ratio,
        lookback_s=window,
        summary=(
            f'Hosts on {words} {{{{ $labels.{label} }}}} crash {{{{ printf "%.1f" $values.B.Value }}}}x '
            "as often as the rest of the fleet since it appeared"
        ),
        description=(
            f"Crashes per host since this {words} first appeared in the fleet (from the start of that "
            "UTC day), against the rest of the fleet over the same days (hosts counted as they are "
            "now; +1 crash smooths an "
            f"idle rest). Hold the {words} rollout, then find the signatures it brings in the "
            "epidemiology findings and the kernel/BIOS breakdowns of the signature pages."
        ),
        severity="warning",
        dashboard_uid=dashboard_uid,
        panel_title=panel_title,
    )


def failed_captures(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.failed_capture_hours * HOUR_S
    return AlertRule(
        key="failed-captures",
        title="crashreg: crash dump captures failing",
        sql=(
            "SELECT COALESCE(method, 'unknown') AS method, "
            "SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) * 1.0 / COUNT(*) AS failed_share "
            f"FROM rpt_captures WHERE {_window(d, 'crashed_at', window)} "
            f"GROUP BY COALESCE(method, 'unknown') HAVING COUNT(*) >= {t.failed_capture_min}"
        ),
        threshold=t.failed_capture_share,
        lookback_s=window,
        summary=(
            "{{ humanizePercentage $values.B.Value }} of {{ $labels.method }} captures of the last "
            f"{t.failed_capture_hours} h failed"
        ),
        description=(
            "Crashes are happening but their dumps are lost. Look at the failed captures table "
            "(host, method, dump level): a full dump target (NFS/SSH) down or full, crashkernel "
            "memory too small, or a makedumpfile that does not know the kernel."
        ),
        severity="warning",
        dashboard_uid=captures.UID,
        panel_title="Failed captures per day",
    )


def ingest_silence(d: Dialect, t: AlertThresholds) -> AlertRule:
    baseline = t.silence_baseline_days * DAY_S
    return AlertRule(
        key="ingest-silence",
        title="crashreg: no crash reports arriving",
        sql=(
            f"SELECT CASE WHEN COUNT(*) >= {t.silence_baseline_reports} THEN "
            f"({d.range_end_epoch()} - MAX({d.epoch('received_at')})) / 60.0 ELSE 0 END AS silent_minutes "
            f"FROM rpt_events WHERE {_window(d, 'crashed_at', baseline)}"
        ),
        threshold=t.silence_minutes,
        lookback_s=baseline,
        summary='No crash report received for {{ printf "%.0f" $values.B.Value }} minutes',
        description=(
            f"A fleet that sent at least {t.silence_baseline_reports} reports in "
            f"{t.silence_baseline_days} days has gone quiet: the registry, its ingest path or the "
            "reporters are down more likely than the fleet stopped crashing. Check `crashreg` is "
            "serving (/healthz), the reporters' logs and spools, and on SQLite that `crashreg "
            "scheduler` refreshes Grafana's reporting copy. No data at all counts as silence."
        ),
        severity="critical",
        dashboard_uid=fleet.UID,
        panel_title="Crashes per day",
        no_data_state="Alerting",
    )


def dedup_collapse(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.new_share_hours * HOUR_S
    return AlertRule(
        key="dedup-collapse",
        title="crashreg: most crashes open new signatures",
        # New signatures over crashes: a signature first seen in the window counts once (the
        # crash that opened it), however often it crashed since; one new bug is not a collapse.
        sql=(
            "SELECT COUNT(DISTINCT CASE WHEN "
            f"{d.seconds_before_end(window)} <= s.first_seen THEN e.signature_id END) "
            "* 1.0 / COUNT(*) AS new_share FROM rpt_events e "
            "JOIN rpt_signatures s ON s.signature_id = e.signature_id "
            f"WHERE {_window(d, 'e.crashed_at', window)} HAVING COUNT(*) >= {t.new_share_min_events}"
        ),
        threshold=t.new_share,
        lookback_s=window,
        summary=(
            "{{ humanizePercentage $values.B.Value }} of the crashes of the last "
            f"{t.new_share_hours} h opened a new signature"
        ),
        description=(
            "Deduplication has stopped working: every crash looks new, so every crash is captured "
            "in full and filed. Usually a new kernel or console format the fingerprint does not "
            "normalise: compare two of the new signatures' fingerprints, then fix and run "
            "`crashreg signatures rebuild`."
        ),
        severity="warning",
        dashboard_uid=fleet.UID,
        panel_title="New signatures per week",
    )


def warning_turned_panic(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.warning_panic_hours * HOUR_S
    since = d.seconds_before_end(window)
    return AlertRule(
        key="warning-turned-panic",
        title="crashreg: a signature that only warned now panics",
        # The window's panics counted per signature first, then each signature's history
        # probed once, for its earliest row (a scalar subquery in crashed_at order, which
        # PostgreSQL neither hashes nor turns into a join: an index scan that stops at the
        # first match). As EXISTS per panic it took 41 s at 10 M events, as EXISTS per
        # signature 3.9 s (a hash of every older event); now 0.04 s (0.6 s cold).
        sql=(
            "SELECT CAST(p.signature_id AS TEXT) AS signature, p.title, p.panics FROM ("
            "SELECT signature_id, MAX(title) AS title, COUNT(*) AS panics FROM rpt_events "
            f"WHERE source <> 'live_kernel' AND {_window(d, 'crashed_at', window)} "
            "GROUP BY signature_id) p "
            "WHERE (SELECT 1 FROM rpt_events q WHERE q.signature_id = p.signature_id "
            f"AND q.source <> 'live_kernel' AND q.crashed_at < {since} "
            "ORDER BY q.crashed_at LIMIT 1) IS NULL "
            "AND (SELECT 1 FROM rpt_events w WHERE w.signature_id = p.signature_id "
            f"AND w.source = 'live_kernel' AND w.crashed_at < {since} "
            "ORDER BY w.crashed_at LIMIT 1) IS NOT NULL"
        ),
        threshold=0,
        lookback_s=window,
        summary=(
            "Signature #{{ $labels.signature }}, until now only oopses and warnings on live hosts, "
            f"took down {{{{ $values.B }}}} hosts within {t.warning_panic_hours} h: {{{{ $labels.title }}}}"
        ),
        description=(
            "A bug the fleet lived with (the kernel log watcher reported it from running hosts) has "
            "started to panic hosts: a new kernel, a config (panic_on_warn, panic_on_oops) or a "
            "change in the workload made it fatal. Open the signature page: its sources line shows "
            "the live reports and the panics; compare the panicking hosts' kernel and settings with "
            "the hosts that only warned."
        ),
        severity="warning",
        dashboard_uid=fleet.UID,
        panel_title="Live kernel reports per day, with their repeats",
        signature_page=True,
    )


def reports_without_crash(d: Dialect, t: AlertThresholds) -> AlertRule:
    window = t.no_crash_hours * HOUR_S
    return AlertRule(
        key="reports-without-crash",
        title="crashreg: reports with no recognisable crash spiking",
        sql=(
            "SELECT COUNT(u.event_id) * 1.0 / COUNT(*) AS no_crash_share FROM rpt_events e "
            "LEFT JOIN rpt_unfingerprinted_events u ON u.event_id = e.event_id AND u.cause = 'no_crash' "
            f"WHERE {_window(d, 'e.crashed_at', window)} HAVING COUNT(u.event_id) >= {t.no_crash_min}"
        ),
        threshold=t.no_crash_share,
        lookback_s=window,
        summary=(
            "{{ humanizePercentage $values.B.Value }} of the crash reports of the last "
            f"{t.no_crash_hours} h hold no crash the signature engine recognises"
        ),
        description=(
            "Hosts report crashes whose console log or stack the engine finds no crash in: consoles "
            "garbled or cut short (a serial console, netconsole or the crash kernel's log extraction "
            "broken), or a new kind of crash the engine does not know. Their dumps are limited to the "
            "budget of reports without a signature, so the rest are not captured. Read their text on "
            "the registry's /unfingerprinted page (or GET /api/v1/unfingerprinted?cause=no_crash): fix "
            "the log path, or teach the engine the new header and run `crashreg signatures rebuild`."
        ),
        severity="warning",
        dashboard_uid=captures.UID,
        panel_title=captures.NO_SIGNATURE_PANEL,
    )


def jira_sync_behind(d: Dialect, t: AlertThresholds) -> AlertRule:
    return AlertRule(
        key="jira-sync-behind",
        title="crashreg: Jira sync falling behind",
        sql=(
            "SELECT CASE WHEN oldest_pending IS NULL THEN 0 ELSE "
            f"({d.range_end_epoch()} - {d.epoch('oldest_pending')}) / 60.0 END AS oldest_pending_minutes "
            "FROM rpt_jira_outbox"
        ),
        threshold=t.jira_outbox_minutes,
        lookback_s=HOUR_S,
        summary='The oldest change owed to Jira has waited {{ printf "%.0f" $values.B.Value }} minutes',
        description=(
            "New signatures, regressions and RCAs are not reaching Jira. Run `crashreg jira check` "
            "(credentials, project, workflow), look at the failing links "
            "(GET /api/v1/integrations/jira/links?failing=true) and check `crashreg scheduler` "
            "(or `crashreg jira sync`) is running."
        ),
        severity="warning",
        dashboard_uid=triage.UID,
        panel_title="Jira sync backlog",
    )


def alert_rules(dialect: Dialect, thresholds: AlertThresholds, jira: bool) -> list[AlertRule]:
    """Every rule; the Jira rule only where a Jira sync is configured to drain the outbox."""
    rules = [
        new_signature_spread(dialect, thresholds),
        regression(dialect, thresholds),
        *(rollout_crash_rate(dialect, thresholds, *rollout) for rollout in ROLLOUTS),
        failed_captures(dialect, thresholds),
        ingest_silence(dialect, thresholds),
        dedup_collapse(dialect, thresholds),
        warning_turned_panic(dialect, thresholds),
        reports_without_crash(dialect, thresholds),
    ]
    if jira:
        rules.append(jira_sync_behind(dialect, thresholds))
    return rules


def build_rule_group(
    dialect: Dialect,
    public_url: str,
    thresholds: AlertThresholds,
    jira: bool,
    dashboards: list[Dashboard],
    folder_uid: str,
) -> RuleGroup:
    """The crashreg rule group as the provisioning API takes it."""
    rules = [
        render_rule(rule, dialect, public_url, dashboards, folder_uid, GROUP)
        for rule in alert_rules(dialect, thresholds, jira)
    ]
    return rule_group(GROUP, folder_uid, thresholds.interval_s, rules)
