"""The image as shipped (issue 44): what the Dockerfile builds runs every command the docs give
for a deployment (docs/operations.md, "The container image").

The install is the Dockerfile's, read from it (tests/support/image.py): the files its COPY lines
copy, less .dockerignore's, put where they go under one temporary root, installed as its RUN
line installs them (`pip install .`, not editable, into a fresh virtual environment standing
for the base image's Python; pip's cache is used, where the image turns it off), once per test
session. The commands then run as the image runs them: as an unprivileged user (nobody, for the
image's `crashreg`), in the user's working directory, with the Dockerfile's ENV and nothing of
this checkout's environment, the installed source tree read-only, on SQLite (the image's
default, crashreg.db in the working directory) and on PostgreSQL. A real container build is not
part of it: it needs the base image from a registry (docs/operations.md says where it is done).
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
import requests
from sqlalchemy.engine import make_url

from testkit.pages import csrf_from
from tests.emulators.grafana import serve_grafana
from tests.emulators.jira import JiraEmulator
from tests.support.databases import BACKENDS, create_postgres_database, drop_postgres_database
from tests.support.http import auth, closed_port
from tests.support.image import image_files, read_dockerfile
from tests.support.processes import stopped, until
from tests.support.readme import readme_report
from tests.support.roles import drop_role

pytestmark = pytest.mark.slow  # an install, then a deployment per database: run early
ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = read_dockerfile(ROOT / "Dockerfile")
# Standing for the image's user: an account with no home, no group of ours, no write access to
# the install (the tests run as root here; as another user they run as that user).
UNPRIVILEGED = "nobody"
# The commands docs/operations.md gives for a deployment, each run below.
DEPLOYMENT_COMMANDS = ["--help", "db upgrade", "tokens create", "scheduler", "grafana provision",
                       "jira check", "demo"]
GROUPS = {command.split()[0] for command in DEPLOYMENT_COMMANDS if " " in command}


@dataclass(frozen=True)
class Installed:
    """The Dockerfile's install under `root`: image path /x/y is root/x/y."""

    root: Path
    python: Path  # the fresh environment's, standing for the base image's

    def here(self, image_path: PurePosixPath | str) -> Path:
        return self.root / PurePosixPath(image_path).relative_to("/")

    def translated(self, word: str) -> str:
        """A word of the CMD with the install's image paths made paths under root."""
        install = str(DOCKERFILE.install_dir)
        return str(self.here(word)) if word == install or word.startswith(install + "/") else word


def as_unprivileged() -> list[str]:
    return (["setpriv", f"--reuid={UNPRIVILEGED}", f"--regid={pwd.getpwnam(UNPRIVILEGED).pw_gid}",
             "--clear-groups"] if os.geteuid() == 0 else [])


def give_to_unprivileged(path: Path) -> None:
    if os.geteuid() == 0:
        account = pwd.getpwnam(UNPRIVILEGED)
        os.chown(path, account.pw_uid, account.pw_gid)


@pytest.fixture(scope="session")
def installed() -> Iterator[Installed]:
    root = Path(tempfile.mkdtemp(prefix="crashreg-image-"))  # not pytest's: private to root
    root.chmod(0o755)
    built = Installed(root, root / "venv" / "bin" / "python")
    for destination, source in image_files(ROOT, DOCKERFILE).items():
        target = built.here(destination)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    subprocess.run([sys._base_executable, "-m", "venv", str(root / "venv")], check=True)  # type: ignore[attr-defined]
    pip_env = os.environ | {k: v for k, v in DOCKERFILE.env.items() if k != "PIP_NO_CACHE_DIR"}
    done = subprocess.run([str(built.python), "-m", "pip", "--quiet", *DOCKERFILE.pip_install()],
                          cwd=built.here(DOCKERFILE.install_dir), env=pip_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    if os.geteuid() != 0:  # root's files: read-only to nobody already; the owner's: made so
        for path in [root / "venv", built.here(DOCKERFILE.install_dir)]:
            subprocess.run(["chmod", "-R", "a-w", str(path)], check=True)
    yield built
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "u+w", str(root)], check=True)
    shutil.rmtree(root)


@dataclass
class Deployment:
    """The install, run in a working directory of the unprivileged user's (the image's WORKDIR)
    with the Dockerfile's ENV and a database."""

    installed: Installed
    home: Path
    database_url: str | None  # None: the image's default, crashreg.db in the working directory

    def env(self, **extra: str) -> dict[str, str]:
        bin_dir = self.installed.python.parent
        env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(self.home), "LANG": "C.UTF-8",
               "TMPDIR": str(self.home), **DOCKERFILE.env, **extra}  # TMPDIR: nothing left in /tmp
        return env | ({"CRASHREG_DATABASE_URL": self.database_url} if self.database_url else {})

    def argv(self, *words: str) -> list[str]:
        return [*as_unprivileged(), *words]

    def run(self, *words: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(*words), cwd=self.home, env=self.env(**extra), capture_output=True,
                              text=True, timeout=600, check=False)

    def crashreg(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("crashreg", *args, **extra)

    def start(self, words: list[str], **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(*words), cwd=self.home, env=self.env(**extra), text=True,
                                stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)


@pytest.fixture(params=BACKENDS)
def deployment(request: pytest.FixtureRequest, installed: Installed) -> Iterator[Deployment]:
    home = Path(tempfile.mkdtemp(prefix="home-", dir=installed.root))
    give_to_unprivileged(home)
    url = create_postgres_database() if request.param == "postgresql" else None
    yield Deployment(installed, home, url)
    if url:
        drop_postgres_database(url)


def test_the_user_works_in_its_home_on_a_read_only_install(deployment: Deployment) -> None:
    """The image's user is made with its home at the last WORKDIR (the SQLite default and the
    dump store's land there) and cannot write the installed source or environment."""
    assert re.search(rf"useradd .*--home-dir {DOCKERFILE.workdir} .*{DOCKERFILE.user}$", DOCKERFILE.runs[0])
    assert DOCKERFILE.user != "root"
    source = deployment.installed.here(DOCKERFILE.install_dir)
    expected = pwd.getpwnam(UNPRIVILEGED).pw_uid if os.geteuid() == 0 else os.geteuid()
    assert deployment.run("id", "-u").stdout.strip() == str(expected)
    writable = [deployment.home, source, source / "registry" / "demo", deployment.installed.python.parent]
    assert [deployment.run("test", "-w", str(path)).returncode for path in writable] == [0, 1, 1, 1]


def test_the_help_names_every_deployment_command(deployment: Deployment) -> None:
    shown = deployment.crashreg("--help")
    assert shown.returncode == 0, shown.stderr
    for command in DEPLOYMENT_COMMANDS[1:]:
        assert re.search(rf"^\s+{command.split()[0]}\s", shown.stdout, re.MULTILINE), command
    assert not (deployment.home / "crashreg.db").exists()  # only `db upgrade` makes a database


def test_the_docs_give_the_commands_run_here() -> None:
    """docs/operations.md's deployment section shows the commands this file runs, and the
    Dockerfile's CMD."""
    doc = (ROOT / "docs" / "operations.md").read_text()
    section = doc[doc.index("## The container image"):].split("\n## ")[0]
    shown = {" ".join(words[:2]) if words[0] in GROUPS else words[0]
             for words in (found.split() for found in re.findall(r"crashreg crashreg ([^#\n]+)", section))}
    assert shown == set(DEPLOYMENT_COMMANDS)
    assert " ".join(DOCKERFILE.cmd) in section


def test_the_cmd_before_the_release_step_stops_with_one_line(installed: Installed) -> None:
    """Served before `db upgrade` (or with a mistyped SQLite path), the CMD stops at once with
    one line naming the file and the step, and creates no empty database there: /readyz would
    then ask to migrate that file while the real one is elsewhere. SQLite only: a PostgreSQL
    database that is not there is refused by its server."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=installed.root))
    give_to_unprivileged(home)
    deployment = Deployment(installed, home, None)
    cmd = [installed.translated(word) for word in DOCKERFILE.cmd]
    served = deployment.run(*cmd, CRASHREG_BIND=f"127.0.0.1:{closed_port()}")
    assert served.returncode == 1
    (refusal,) = [line for line in served.stderr.splitlines() if "[ERROR]" in line]
    assert refusal.endswith(f"crashreg cannot start: no database at {home / 'crashreg.db'}: run `crashreg db "
                            "upgrade` to create it, or point CRASHREG_DATABASE_URL at yours"), served.stderr
    assert "Traceback" not in served.stderr
    assert not list(home.glob("crashreg.db*"))


def test_a_deployment_migrates_makes_tokens_serves_schedules_and_provisions(deployment: Deployment) -> None:
    """db upgrade, tokens create, the CMD (gunicorn) answering a report and a page, the
    scheduler started and stopped, grafana provision and jira check against the emulators."""
    upgraded = deployment.crashreg("db", "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert (deployment.home / "crashreg.db").exists() == (deployment.database_url is None)
    tokens = {}
    for name, scope, kind in [("kdump-fleet", "report", "agent"), ("oncall", "read", "human")]:
        made = deployment.crashreg("tokens", "create", "--name", name, "--scope", scope, "--kind", kind)
        assert made.returncode == 0, made.stderr
        tokens[name] = made.stdout.strip()

    port = closed_port()
    cmd = [deployment.installed.translated(word) for word in DOCKERFILE.cmd]
    server = deployment.start(cmd, CRASHREG_BIND=f"127.0.0.1:{port}", CRASHREG_WORKERS="2")
    try:
        until(server, f"Listening at: http://127.0.0.1:{port}")
        url = f"http://127.0.0.1:{port}"
        assert requests.get(f"{url}/healthz", timeout=60).status_code == 200
        # The HEALTHCHECK's own command, with the port CRASHREG_BIND names (it asked 8080).
        bound = os.environ | {"CRASHREG_BIND": f"127.0.0.1:{port}"}
        checked = subprocess.run(["sh", "-c", DOCKERFILE.healthcheck], capture_output=True, text=True,
                                 env=bound, timeout=60, check=False)
        assert checked.returncode == 0, checked.stderr
        answer = requests.post(f"{url}/api/v1/reports", json=readme_report(),
                               headers=auth(tokens["kdump-fleet"]), timeout=60)
        assert answer.status_code == 201, answer.text
        signature = answer.json()["signature"]
        with requests.Session() as browser:
            form = browser.get(f"{url}/login?next=/signatures", timeout=60)
            logged_in = browser.post(f"{url}/login", timeout=60, data={
                "token": tokens["oncall"], "next": "/signatures", "csrf_token": csrf_from(form.text)})
            assert (logged_in.status_code, logged_in.url) == (200, f"{url}/signatures"), logged_in.text[:500]
            assert f"/signatures/{signature['id']}" in logged_in.text
            assert "mlx5e_poll_rx_cq" in logged_in.text
    finally:
        server.send_signal(signal.SIGTERM)
        rest = stopped(server)
    assert server.returncode == 0, rest

    scheduler = deployment.start(["crashreg", "scheduler"])
    try:
        until(scheduler, "scheduler started")
    finally:
        scheduler.send_signal(signal.SIGTERM)
        rest = stopped(scheduler)
    assert scheduler.returncode == 0 and "scheduler stopped" in rest, rest

    role = f"crashreg_grafana_{secrets.token_hex(4)}"
    with serve_grafana() as grafana:
        grafana_db = ({"CRASHREG_GRAFANA_DB_URL": make_url(deployment.database_url).set(
            username=role, password="image-test").render_as_string(hide_password=False)}
            if deployment.database_url else {})
        try:
            provisioned = deployment.crashreg("grafana", "provision", CRASHREG_GRAFANA_URL=grafana.url,
                                              CRASHREG_GRAFANA_TOKEN=grafana.token, **grafana_db)
        finally:
            if deployment.database_url:
                drop_role(deployment.database_url, role)
    assert provisioned.returncode == 0, provisioned.stdout + provisioned.stderr
    assert "dashboard crashreg-fleet: created" in provisioned.stdout

    jira = JiraEmulator("datacenter").start()
    try:
        checked = deployment.crashreg(
            "jira", "check", CRASHREG_JIRA_URL=jira.url, CRASHREG_JIRA_TOKEN="bot-pat",
            CRASHREG_JIRA_PROJECT="CRASH", CRASHREG_JIRA_WEBHOOK_SECRET="image-test",
            CRASHREG_PUBLIC_URL="https://crashreg.example.net")
    finally:
        jira.stop()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "ok    reachable" in checked.stdout


def test_the_demo_runs_from_the_image(deployment: Deployment) -> None:
    """`crashreg demo` (it failed on `import agents`): the whole simulated fleet, through the API,
    with the stacks of the demo's real cores."""
    demo = deployment.crashreg("demo", "--no-serve", "--port", str(closed_port()),
                               "--physical-per-cluster", "10", "--seed", "3")
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-4000:]
    mixed = demo.stdout[demo.stdout.index("== A mixed signature, and how to read it ==") :]
    assert "SIGSEGV (return-to-null, segfault) in ingest::ring_buffer_commit" in mixed.splitlines()[1]
