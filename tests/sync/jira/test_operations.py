"""Running the sync: preflight, CLI, the scheduler's leader lock and clean shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace

import pytest

from registry.config import Settings
from sync.jira.check import FAIL, OK, WARN, run_checks
from sync.leader import leader_lock
from sync.scheduler import JobContext, Scheduler, load_jobs


def jira_env(harness, **extra: str) -> dict[str, str]:
    options = harness.options
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRASHREG_")}
    env.update({
        "CRASHREG_DATABASE_URL": harness.settings.database_url,
        "CRASHREG_PUBLIC_URL": "https://crashreg.example.net",
        "CRASHREG_JIRA_URL": options.url, "CRASHREG_JIRA_TOKEN": options.token,
        "CRASHREG_JIRA_PROJECT": options.project, "CRASHREG_JIRA_WEBHOOK_SECRET": "s3cret",
        **({"CRASHREG_JIRA_USER": options.user} if options.user else {}), **extra,
    })
    return env


def crashreg(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "registry", *args], env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def jira_settings(harness) -> Settings:
    options = harness.options
    jira = replace(harness.settings.jira, url=options.url, token=options.token, user=options.user,
                   project=options.project)
    return replace(harness.settings, jira=jira)


def levels(findings) -> dict[str, str]:
    return {f.topic: f.level for f in findings}


def test_check_passes_on_a_good_setup_and_names_what_is_missing(harness):
    harness.crash()
    harness.sync()
    findings = run_checks(jira_settings(harness), harness.options)
    assert not [f for f in findings if f.level == FAIL], findings
    assert levels(findings)["transition into done"] == OK
    assert levels(findings)["transition out of done"] == WARN, "no done issue to inspect yet"
    kind = "Cloud" if harness.emulator.cloud else "Data Center"
    assert kind in next(f.message for f in findings if f.topic == "reachable")
    harness.emulator.denied["crashbot"] = {"TRANSITION_ISSUES"}
    findings = run_checks(jira_settings(harness), replace(harness.options, issue_type="Bug"))
    assert "Transition issues" in next(f.message for f in findings if f.topic == "permissions")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"token": "expired"}, "token"),
        ({"project": "NOPE"}, "CRASHREG_JIRA_PROJECT"),
        ({"issue_type": "Incident"}, "CRASHREG_JIRA_ISSUE_TYPE"),
        ({"url": "http://127.0.0.1:9"}, "cannot reach Jira"),
        ({"signature_field": "Crash Signature"}, "customfield_10100"),
    ],
)
def test_check_explains_misconfiguration(harness, change, expected):
    findings = run_checks(jira_settings(harness), replace(harness.options, **change))
    failures = [f.message for f in findings if f.level == FAIL]
    assert failures and expected in failures[-1]


def test_check_tells_a_cloud_operator_to_use_an_email_and_api_token(harness):
    options = replace(harness.options, user=None, token="bot-pat")
    findings = run_checks(jira_settings(harness), options)
    failures = [f.message for f in findings if f.level == FAIL]
    if harness.emulator.cloud:
        assert "CRASHREG_JIRA_USER to the account's e-mail" in failures[0]
    else:
        assert not failures, "Data Center takes the PAT as a Bearer token"


def test_two_schedulers_never_both_sync(harness):
    settings = jira_settings(harness)
    jobs = {name: job for name, job in load_jobs().items() if name.startswith("jira-")}
    first = Scheduler(JobContext(settings, harness.database, harness.clock),
                      leader_lock(harness.database.engine), jobs)
    second = Scheduler(JobContext(settings, harness.database, harness.clock),
                       leader_lock(harness.database.engine), jobs)
    try:
        harness.crash()
        assert first.run_job("jira-sync") is True
        assert second.run_job("jira-sync") is False
        assert second.run_job("jira-reconcile") is False
        assert len(harness.emulator.issues) == 1
        first.shutdown()  # the leader leaves: the standby takes over at its next tick
        harness.crash(function="fn_other")
        assert second.run_job("jira-sync") is True
        assert first.run_job("jira-sync") is False
        assert len(harness.emulator.issues) == 2
    finally:
        first.shutdown()
        second.shutdown()


@pytest.mark.parametrize("jira_flavour", ["datacenter"], indirect=True)
@pytest.mark.parametrize("command", [("scheduler",), ("jira", "sync")], ids=["scheduler", "jira-sync"])
def test_scheduler_process_syncs_and_stops_cleanly_on_sigterm(harness, command):
    """The process, its leader lock and SIGTERM are ours, not the flavour's: one flavour (the
    PAT-only environment); the check command below runs on the other. `crashreg jira sync`
    without --once runs the scheduler's Jira jobs only, under the same lock."""
    harness.crash()
    env = jira_env(harness)
    process = subprocess.Popen([sys.executable, "-m", "registry", *command], env=env,
                               stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in process.stderr:
            lines.append(line)
            if '"job": "jira-sync"' in line:
                break
        assert len(harness.emulator.issues) == 1, "".join(lines)
        standby = crashreg("jira", "sync", "--once", env=env)
        assert standby.returncode == 1 and "leader lock" in standby.stderr
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        assert "scheduler stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    once = crashreg("jira", "sync", "--once", env=env)
    assert once.returncode == 0, once.stderr


@pytest.mark.parametrize("jira_flavour", ["cloud"], indirect=True)
def test_check_command_prints_one_line_per_check(harness):
    """Flavour differences in the checks are covered above on both; the command's output and
    exit status are ours, run on Cloud (e-mail + token in the environment)."""
    ok = crashreg("jira", "check", env=jira_env(harness))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ok    reachable" in ok.stdout and "webhook" in ok.stdout
    bad = crashreg("jira", "check", env=jira_env(harness, CRASHREG_JIRA_PROJECT="NOPE"))
    assert bad.returncode == 1 and "FAIL" in bad.stdout and "NOPE" in bad.stdout


@pytest.mark.parametrize("jira_flavour", ["datacenter"], indirect=True)
def test_sync_once_with_jira_down_says_so_in_one_line(harness):
    """Ours, not the flavour's: one flavour."""
    down = crashreg("jira", "sync", "--once", env=jira_env(harness, CRASHREG_JIRA_URL="http://127.0.0.1:9"))
    assert down.returncode == 1
    assert "Traceback" not in down.stderr
    (line,) = [x for x in down.stderr.splitlines() if "Jira" in x]
    assert "cannot reach Jira" in line
