"""The reporters upload a dump through the registry's pre-signed URLs: the Python one (the
built pyz, system python3, stdlib only) and the crash kernel's sh one (dash and busybox ash,
curl), and the post-boot agent finishes an upload a reboot cut short or the sh reporter only
spooled. The host's config and spool never hold a store credential. Both stores, both databases."""

from __future__ import annotations

import gzip
import lzma
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import requests

from agents.reporter.captures import upload_spooled
from agents.reporter.client import Unsent
from agents.reporter.compression import COMPRESSIONS
from agents.reporter.config import Config
from agents.reporter.upload import BASIC_ENCODINGS, Uploader, UploadError, UploadState, prepare
from registry.dump_encodings import ENCODINGS
from registry.storage.parts import MIB
from tests.support.agents import KDUMP_SH, Registry, run_reporter
from tests.support.http import auth
from tests.support.s3 import S3_ENV

DUMP_BYTES = 11 * MIB + 321  # three parts of the tests' 5 MiB


def kdump_file(path: Path) -> bytes:
    """What makedumpfile writes: its signature, then (compressed, incompressible) pages."""
    data = b"KDUMP   " + os.urandom(DUMP_BYTES - 8)
    path.write_bytes(data)
    return data


def no_credentials(root: Path) -> None:
    """Nothing the host keeps names a store credential or the store's signing."""
    secrets = [value.encode() for value in S3_ENV.values() if value != "us-east-1"]
    for path in root.rglob("*"):
        if path.is_file() and path.stat().st_size < 1 << 20:
            text = path.read_bytes()
            assert not any(s in text for s in secrets), path
            assert b"AWS_" not in text and b"X-Amz-Signature" not in text and b"signature=" not in text, path


def capture_of(registry: Registry, report_id_suffix: str) -> dict[str, Any]:
    [signature] = registry.get("/api/v1/signatures?limit=5")["signatures"]
    events = registry.get(f"/api/v1/signatures/{signature['id']}/events")["events"]
    [capture] = [c for e in events for c in registry.get(f"/api/v1/events/{e['id']}")["captures"]]
    return capture


def download(registry: Registry, capture_id: str) -> bytes:
    link = requests.get(
        f"{registry.url}/api/v1/captures/{capture_id}/download", headers=auth(registry.read_token), timeout=30
    )
    assert link.status_code == 200, link.text
    return requests.get(link.json()["url"], timeout=60).content


def fake_makedumpfile(tmp_path: Path) -> tuple[Path, bytes]:
    """A makedumpfile that writes a kdump-compressed-looking file to its last argument."""
    dumper, source = tmp_path / "makedumpfile", tmp_path / "dump-source"
    data = kdump_file(source)
    dumper.write_text(f'#!/bin/sh\nfor last; do :; done\ncp "{source}" "$last"\n')
    dumper.chmod(0o755)
    return dumper, data


def completed_capture(registry: Registry, site: Any, dump: Path, method: str = "core",
                      status: str = "completed") -> str:
    """The site's crash reported by its reporter, then a capture of `dump` (completed); its id."""
    assert run_reporter(site, "report").returncode == 0
    event_id = site.decision()["CRASHREG_EVENT_ID"]
    recorded = requests.post(
        f"{registry.url}/api/v1/events/{event_id}/captures", headers=auth(registry.report_token),
        json={"method": method, "status": status, "target": str(dump)}, timeout=30,
    )
    assert recorded.status_code == 201, recorded.text
    return recorded.json()["id"]


@pytest.mark.parametrize("when", ["now", "spool", None])
@pytest.mark.parametrize("reporter", ["python", "sh"])
def test_the_crash_kernel_reporters_upload_now_or_spool_for_the_post_boot_agent(
    registry: Registry, make_site, run_sh, tmp_path: Path, reporter: str, when: str | None
) -> None:
    """`collect` in the crash kernel, both reporters: by default (None) and with `spool` only the
    upload's state is written and the post-boot agent sends the dump; `now` sends it at once."""
    dumper, data = fake_makedumpfile(tmp_path)
    upload = {"CRASHREG_KDUMP_UPLOAD": when} if when else {}
    site = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(dumper)} | upload)
    run = run_sh if reporter == "sh" else run_reporter
    assert run(site, "report").returncode == 0
    (site.root / "crash").mkdir()
    collected = run(site, "collect", "-l", "/proc/vmcore", str(site.root / "crash" / "vmcore"))
    assert collected.returncode == 0, collected.stderr
    if when != "now":  # the state the Python uploader reads, nothing sent yet
        [state_path] = site.spool.glob("*.upload")
        state = UploadState.read(state_path)
        assert (state.encoding, state.bytes, state.part_size, state.done) == ("identity", len(data), 0, {})
        assert state.from_spool == "../crash/vmcore"
        assert "dump stored" not in collected.stderr
        no_credentials(site.root)
        finished = run_reporter(site, "post-boot")
        assert finished.returncode == 0 and "sending 3 of 3 parts" in finished.stderr, finished.stderr
    else:
        assert re.search(r"dump stored(: | at )(s3|file)://", collected.stderr), collected.stderr

    capture = capture_of(registry, site.boot_id)
    assert capture["uri"].endswith(f"/captures/{capture['id']}/vmcore") and capture["bytes"] == len(data)
    assert capture["status"] == "completed"
    assert download(registry, capture["id"]) == data
    assert list(site.spool.glob("*.upload")) == []
    no_credentials(site.root)


def test_the_sh_reporter_without_its_uploader_spools_the_upload(
    registry: Registry, make_site, run_sh, tmp_path: Path
) -> None:
    """The sh reporter installed alone (its uploader, crashreg-kdump-upload.sh, left out of the
    initramfs): `now` spools the upload, and the post-boot agent sends it."""
    dumper, data = fake_makedumpfile(tmp_path)
    alone = tmp_path / "sbin" / "crashreg-kdump"
    alone.parent.mkdir()
    alone.write_bytes(KDUMP_SH.read_bytes())
    site = make_site(extra={"CRASHREG_MAKEDUMPFILE": str(dumper), "CRASHREG_KDUMP_UPLOAD": "now"})
    assert run_sh(site, "report", script=alone).returncode == 0
    (site.root / "crash").mkdir()
    target = str(site.root / "crash" / "vmcore")
    collected = run_sh(site, "collect", "-l", "/proc/vmcore", target, script=alone)
    assert collected.returncode == 0, collected.stderr
    assert "crashreg-kdump-upload.sh: upload of" in collected.stderr
    assert len(list(site.spool.glob("*.upload"))) == 1
    assert run_reporter(site, "post-boot").returncode == 0
    capture = capture_of(registry, site.boot_id)
    assert capture["status"] == "completed" and download(registry, capture["id"]) == data


def test_an_upload_cut_by_a_reboot_is_finished_by_the_post_boot_agent(
    registry: Registry, make_site, tmp_path: Path
) -> None:
    site = make_site()
    dump = site.root / "crash" / "vmcore"
    dump.parent.mkdir()
    data = b"\x7fELF" + os.urandom(DUMP_BYTES) + bytes(DUMP_BYTES)  # an ELF vmcore: gzipped first
    dump.write_bytes(data)
    capture_id = completed_capture(registry, site, dump, "makedumpfile")

    # The crash kernel's run: the first part goes, then the power goes.
    site.spool.mkdir(exist_ok=True)
    state_path = prepare(site.spool, "kdump-x", capture_id, dump)
    calls: list[str] = []

    def post_until_reboot(path: str, body: dict[str, Any]) -> dict[str, Any]:
        calls.append(path)
        if len(calls) > 1:
            raise UploadError("the host rebooted")
        answer = requests.post(
            registry.url + path, json=body, headers=auth(registry.report_token), timeout=30
        )
        assert answer.status_code == 200, answer.text
        return answer.json() | {"part_urls": answer.json()["part_urls"][:1]}

    with pytest.raises(UploadError, match="rebooted"):
        Uploader(post_until_reboot, threads=1, log=lambda line: None).upload(state_path)
    state = UploadState.read(state_path)
    assert (state.encoding, list(state.done)) == ("gzip", [1])
    assert state.bytes < len(data) and state.raw_bytes == len(data)
    no_credentials(site.root)

    # After the reboot the post-boot agent finds the state (the dump where the spool says) and
    # sends only what is missing, with new URLs.
    finished = run_reporter(site, "post-boot")
    assert finished.returncode == 0, finished.stderr
    assert "sending 2 of 3 parts (2..3)" in finished.stderr, finished.stderr
    assert not state_path.exists() and not Path(state.path).exists()  # the gzip copy goes too
    stored = requests.get(
        f"{registry.url}/api/v1/captures/{capture_id}/dump", headers=auth(registry.read_token), timeout=30
    ).json()
    assert (stored["state"], stored["encoding"], stored["raw_bytes"]) == ("stored", "gzip", len(data))
    assert gzip.decompress(download(registry, capture_id)) == data
    no_credentials(site.root)


def test_every_compression_the_reporter_names_is_an_encoding_the_registry_stores() -> None:
    """The reporter (standard library only) keeps its own table of compressions, by magic; the
    name it uploads a dump under must be one the registry accepts and can unpack, else the
    upload is refused with a 400."""
    assert {c.name for c in COMPRESSIONS} | {"identity"} == set(ENCODINGS)
    assert all(ENCODINGS[c.name].unpack == f"{c.name} -dc" for c in COMPRESSIONS)


def older_registry(registry: Registry) -> Any:
    """The uploader's way to this registry as a release from before the newer compressions'
    names (0040) answers: such a name is refused, a 400 naming `encoding`, the way this release
    refuses a name no release knows (`brotli`); refusals raised as the reporter's own post does."""

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("encoding", "identity") not in BASIC_ENCODINGS:
            body = body | {"encoding": "brotli"}
        answer = requests.post(registry.url + path, json=body, headers=auth(registry.report_token),
                               timeout=30)
        if answer.status_code != 200:
            problem = f"HTTP {answer.status_code} {answer.content[:300]!r}"
            raise UploadError(problem) from Unsent(problem, answer.status_code)
        return answer.json()

    return post


def test_a_core_in_a_compression_an_older_registry_refuses_goes_gzipped(
    registry: Registry, make_site, tmp_path: Path
) -> None:
    """A reporter newer than its registry: the xz core it found is refused by name, so it sends
    the core decompressed and gzipped, which every release stores; nothing is lost."""
    site = make_site()
    data = b"\x7fELF" + os.urandom(DUMP_BYTES) + bytes(DUMP_BYTES)
    core = site.root / "core.xz"
    core.write_bytes(lzma.compress(data, preset=0))
    capture_id = completed_capture(registry, site, core)
    site.spool.mkdir(exist_ok=True)
    state_path = prepare(site.spool, "xz-core", capture_id, core)
    assert UploadState.read(state_path).encoding == "xz"
    said: list[str] = []
    dump = Uploader(older_registry(registry), threads=1, log=said.append).upload(state_path)
    assert any("does not take xz-compressed dumps" in line for line in said), said
    assert (dump["state"], dump["encoding"], dump["raw_bytes"]) == ("stored", "gzip", len(data))
    assert gzip.decompress(download(registry, capture_id)) == data
    assert dump["uri"].endswith(f"/captures/{capture_id}/core.gz")  # a process's core, not a vmcore
    assert core.is_file() and not state_path.exists()
    assert not core.with_name(core.name + ".crashreg.gz").exists()  # our copy, once stored


def test_a_refused_upload_leaves_no_copy_of_the_core_behind(registry: Registry, make_site) -> None:
    """Our gzipped copy of a core is its owner's alone, and goes when the registry refuses the
    upload (here: its capture failed): the state is set aside in rejected/ for a human, the
    core itself stays, and no second copy of the process's memory lingers beside it."""
    site = make_site()
    core = site.root / "core"
    core.write_bytes(b"\x7fELF" + os.urandom(DUMP_BYTES))
    core.chmod(0o600)
    capture_id = completed_capture(registry, site, core, status="failed")
    site.spool.mkdir(exist_ok=True)
    state_path = prepare(site.spool, "refused-core", capture_id, core)
    packed = Path(UploadState.read(state_path).path)
    assert packed.name == "core.crashreg.gz" and stat.S_IMODE(packed.stat().st_mode) == 0o600
    config = Config(url=registry.url, token_file=str(site.token_file), retries=0, spool_dir=str(site.spool))
    assert upload_spooled(config, state_path) == "rejected"
    assert (site.spool / "rejected" / state_path.name).exists()
    assert core.is_file() and not packed.exists()


def test_a_core_this_host_cannot_decompress_for_an_older_registry_waits(
    registry: Registry, make_site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An lz4 core on a host without lz4, for a registry that does not take lz4: the upload
    stays in the spool (for a run after lz4 is installed, or the registry upgraded), saying why."""
    site = make_site()
    core = site.root / "core.lz4"
    core.write_bytes(b"\x04\x22\x4d\x18" + os.urandom(1024))
    capture_id = completed_capture(registry, site, core)
    site.spool.mkdir(exist_ok=True)
    state_path = prepare(site.spool, "lz4-core", capture_id, core)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(UploadError, match=r"does not take lz4, and .*needs the lz4 program") as refused:
        Uploader(older_registry(registry), threads=1, log=lambda line: None).upload(state_path)
    assert not isinstance(refused.value.__cause__, Unsent)  # kept, not rejected (spool.set_aside)
    assert UploadState.read(state_path).encoding == "lz4" and core.is_file()
