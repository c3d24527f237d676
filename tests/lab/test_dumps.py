"""A dump taken in the crash lab lands in an S3 bucket through pre-signed URLs only, survives
the host losing power mid-upload, and is downloadable from the event page (issue 27).

The dump store is moto's S3 server on the host's 127.0.0.1; the registry reaches it there
with the bucket's credentials (`AWS_*`, `AWS_ENDPOINT_URL_S3`). The guests never see a
credential: the registry signs each URL for `CRASHREG_DUMP_STORE_PUBLIC_ENDPOINT`, the name
the hosts reach the store by, as a deployment whose store sits behind a gateway on the hosts'
network does. On the lab's network that name is 10.0.2.2 (QEMU's alias of the host's
127.0.0.1) and a port where `testkit.s3.S3Gate` forwards to moto, Host header and all.

The signature is known and triaged to `filtered` (dump level 31), so the vmcore is a few MB:
two or more parts of S3's minimum 5 MiB. The crash kernel's sh reporter uploads from the
crash kernel (`CRASHREG_KDUMP_UPLOAD=now`). The gate forwards its first part, and when the
second arrives it kills QEMU before forwarding it: the power goes mid-part, at the same
point every run, with no timing involved. The next boot (the python3 guest on the same disk)
runs the post-boot agent, which sends the missing parts with new URLs and completes; then
the engineer's view: the event page's link gives the very bytes on the host's disk.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
import requests

from testkit.pages import csrf_from
from testkit.s3 import S3_ENV, S3Gate, S3Server, start_moto
from tests.lab import lab, python_guest
from tests.lab.conftest import Lab
from tests.support.golden import golden

HOST = "lab-dumps"
PART_MB = 5  # S3's minimum part size: the dump spans several
DUMP_LEVEL = 31
PARTS_BEFORE_THE_POWER_GOES = 1
SECRETS = [S3_ENV["AWS_ACCESS_KEY_ID"].encode(), S3_ENV["AWS_SECRET_ACCESS_KEY"].encode()]
POST_BOOT = f"""
python3 -I /{python_guest.PYZ} post-boot
echo "LAB: post-boot rc=$?"
"""


def fetch_on_the_lab_network(url: str) -> bytes:
    """GET a link naming 10.0.2.2 as QEMU's network does for a guest: the connection goes to
    the host's 127.0.0.1, the request (path, query, Host) is the link's, unchanged."""
    parts = urlsplit(url)
    assert parts.hostname == lab.GUEST_HOST_ALIAS, url
    conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=120)
    try:
        conn.request("GET", f"{parts.path}?{parts.query}", headers={"Host": parts.netloc})
        answer = conn.getresponse()
        body = answer.read()
        assert answer.status == 200, body[:300]
        return body
    finally:
        conn.close()


def multipart_etag(data: bytes, part_size: int) -> str:
    """S3's ETag of a multipart object: the MD5 of its parts' MD5s, dash, the part count."""
    digests = [hashlib.md5(data[i : i + part_size]).digest() for i in range(0, len(data), part_size)]
    return f'"{hashlib.md5(b"".join(digests)).hexdigest()}-{len(digests)}"'


def holds_no_credential(name: str, content: bytes) -> None:
    assert not any(secret in content for secret in SECRETS), f"{name} holds a store credential"


@pytest.fixture(scope="module")
def s3(lab_out: Path) -> Iterator[S3Server]:
    server = start_moto(lab_out / "dumps-moto.log")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def gate(s3: S3Server) -> Iterator[S3Gate]:
    served = S3Gate(s3.endpoint)
    yield served
    served.stop()


@pytest.fixture(scope="module")
def bucket(s3: S3Server) -> str:
    return s3.bucket()


@pytest.fixture(scope="module")
def dumps_lab(make_lab, s3: S3Server, gate: S3Gate, bucket: str) -> Lab:
    return make_lab(
        "dumps",
        CRASHREG_DUMP_STORE=f"s3://{bucket}/lab",
        CRASHREG_DUMP_STORE_PUBLIC_ENDPOINT=f"http://{lab.GUEST_HOST_ALIAS}:{gate.port}",
        CRASHREG_DUMP_PART_SIZE_MB=str(PART_MB),
        **s3.env(),
    )


def seed_filtered_signature(dumps_lab: Lab) -> str:
    """The lab's NULL dereference, known from another host and triaged to filtered dumps."""
    registry = dumps_lab.registry
    body = {
        "report_id": f"seed-{uuid.uuid4()}",
        "source": "crash_kernel",
        "crashed_at": datetime.now(UTC).isoformat(),
        "host": {"hostname": "lab-seed", "kernel_version": dumps_lab.kit.release},
        "boot_id": str(uuid.uuid4()),
        "console_log": golden("lab/null_deref_1"),
    }
    reported = requests.post(f"{registry.url}/api/v1/reports", json=body, timeout=60,
                             headers={"Authorization": f"Bearer {registry.tokens['report']}"})
    assert reported.status_code == 201, reported.text
    signature_id = reported.json()["signature"]["id"]
    triaged = requests.patch(f"{registry.url}/api/v1/signatures/{signature_id}", timeout=60,
                             json={"capture_policy": {"mode": "filtered", "dump_level": DUMP_LEVEL}},
                             headers={"Authorization": f"Bearer {registry.tokens['triage']}"})
    assert triaged.status_code == 200, triaged.text
    return signature_id


@pytest.fixture(scope="module")
def run(dumps_lab: Lab, gate: S3Gate, s3: S3Server, bucket: str) -> dict[str, Any]:
    """The crash (the plug pulled during the second part), then the next boot's post-boot agent."""
    signature_id = seed_filtered_signature(dumps_lab)
    conf = lab.reporter_conf(dumps_lab.registry.guest_url) + 'CRASHREG_KDUMP_UPLOAD="now"\n'
    token = dumps_lab.registry.tokens["report"]
    out = dumps_lab.out
    crash_image = lab.crash_initramfs(dumps_lab.kit, out / "dumps-crash.img", conf, token, None)
    first_image = lab.first_initramfs(dumps_lab.kit, out / "dumps-first.img", crash_image, dumps_lab.module)
    disk = lab.Disk.create(out / "dumps.disk", 512)

    def started(qemu: subprocess.Popen[bytes]) -> None:  # the gate pulls the plug on this one
        gate.on_hold = lambda: os.killpg(qemu.pid, signal.SIGKILL)

    gate.hold = lambda method, path: (
        "partNumber=" in path and gate.count("PUT", "partNumber=") >= PARTS_BEFORE_THE_POWER_GOES
    )
    crashed = lab.boot(dumps_lab.kit, first_image, disk, "null-deref", HOST,
                       out / "dumps-1-crash.console.log", started_qemu=started)
    gate.hold = lambda method, path: False
    disk.recover()
    # What the store holds the moment the power went: the parts before it, nothing completed.
    client = s3.client()
    [upload] = client.list_multipart_uploads(Bucket=bucket)["Uploads"]
    parts_held = [p["PartNumber"] for p in client.list_parts(Bucket=bucket, Key=upload["Key"],
                                                               UploadId=upload["UploadId"]).get("Parts", [])]
    report_id = f"kdump-{crashed.boot_id}"
    state = disk.read(f"/spool/crashreg/{report_id}.upload")

    image = python_guest.python_initramfs(
        dumps_lab.kit, out / "dumps-post-boot.img", POST_BOOT,
        {"etc/crashreg/reporter.conf": conf.encode(), "etc/crashreg/token": token.encode()},
    )
    booted = python_guest.run_guest(dumps_lab.kit, image, hostname=HOST, disk=disk,
                                    log=out / "dumps-2-post-boot.console.log")
    images = {path.name: path.read_bytes() for path in (first_image, image)}
    images[crash_image.name] = gzip.decompress(crash_image.read_bytes())
    return {
        "signature_id": signature_id, "crashed": crashed, "booted": booted, "disk": disk,
        "report_id": report_id, "parts_held": parts_held, "state": state.decode(),
        "upload_key": upload["Key"], "images": images, "conf": conf, "registry_port": dumps_lab.registry.port,
    }  # fmt: skip


def test_the_crash_kernel_uploads_through_presigned_urls_until_the_power_goes(run, gate: S3Gate) -> None:
    crashed: lab.Boot = run["crashed"]
    assert crashed.returncode == -signal.SIGKILL and "LAB: done" not in crashed.console
    assert "LAB: decided rc=0 args=-l -d 31" in crashed.console, crashed.console[-3000:]
    # the second part was on its way: it never reached the store
    assert [(method, "partNumber=2&" in path) for method, path in gate.held] == [("PUT", True)]
    assert run["parts_held"] == [1]
    state = dict(line.split("=", 1) for line in run["state"].splitlines() if "=" in line)
    assert state["encoding"] == "identity" and state["part_size"] == str(PART_MB << 20)
    assert int(state["bytes"]) > PART_MB << 20  # more than one part
    assert [line.split()[1] for line in run["state"].splitlines() if line.startswith("part ")] == ["1"]


def test_no_host_config_image_or_spool_holds_a_store_credential(run) -> None:
    for text in (run["conf"], run["state"]):  # the host's config, the upload's spooled state
        holds_no_credential(text, text.encode())
        assert "AWS_" not in text and "X-Amz-" not in text and "http" not in text.replace(
            f"http://{lab.GUEST_HOST_ALIAS}:{run['registry_port']}", "")
    for name, content in run["images"].items():  # every file the guests boot with
        holds_no_credential(name, content)


def test_the_post_boot_agent_resumes_and_the_registry_verifies_and_completes(
    run, dumps_lab: Lab, bucket: str
) -> None:
    booted: lab.Boot = run["booted"]
    assert "LAB: post-boot rc=0" in booted.console, booted.console[-4000:]
    vmcore_path = f"/crash/{run['crashed'].boot_id}/vmcore"
    vmcore = run["disk"].read(vmcore_path)
    parts = -(-len(vmcore) // (PART_MB << 20))
    assert f"sending {parts - 1} of {parts} parts (2..{parts})" in booted.console, booted.console[-4000:]
    assert run["report_id"] + ".upload" not in run["disk"].listing("/spool/crashreg")

    event = dumps_lab.event_of(run["report_id"])
    assert event["signature"]["id"] == run["signature_id"] and event["capture"]["action"] == "filtered"
    [capture] = event["captures"]
    dump = dumps_lab.registry.get(f"/api/v1/captures/{capture['id']}/dump")
    assert (dump["state"], dump["bytes"], dump["parts"]) == ("stored", len(vmcore), parts)
    assert dump["etag"] == multipart_etag(vmcore, PART_MB << 20)  # the store's, as the registry checked it
    assert capture["status"] == "completed" and capture["bytes"] == len(vmcore)
    assert capture["uri"] == dump["uri"] == f"s3://{bucket}/{run['upload_key']}"


def test_the_event_page_links_the_dump_and_the_link_gives_the_guests_bytes(run, dumps_lab: Lab) -> None:
    registry = dumps_lab.registry
    event = dumps_lab.event_of(run["report_id"])
    [capture] = event["captures"]
    browser = requests.Session()
    form = browser.get(f"{registry.url}/login", timeout=30)
    csrf = csrf_from(form.text)
    login = {"token": registry.tokens["read"], "next": f"/events/{event['id']}", "csrf_token": csrf}
    page = browser.post(f"{registry.url}/login", timeout=30, data=login)
    link = f"/events/{event['id']}/captures/{capture['id']}/download"
    assert page.status_code == 200 and f'href="{link}"' in page.text
    redirected = browser.get(registry.url + link, timeout=60, allow_redirects=False)
    assert redirected.status_code == 303
    location = redirected.headers["Location"]
    assert location.startswith(f"http://{lab.GUEST_HOST_ALIAS}:") and "X-Amz-Expires=" in location
    vmcore = run["disk"].read(f"/crash/{run['crashed'].boot_id}/vmcore")
    assert fetch_on_the_lab_network(location) == vmcore
    with psycopg.connect(registry.database_url) as conn:
        audited = conn.execute("SELECT via FROM dump_downloads WHERE via = 'page'").fetchall()
    assert audited == [("page",)]
