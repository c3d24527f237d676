"""Dump uploads through the registry's pre-signed URLs against a local S3 server (moto).

    .venv/bin/python bench/dumps.py [--gib 2] [--part-mb 16] [--threads 4]

One dump file of --gib GiB (makedumpfile-like: uploaded as it is) goes to moto's standalone
server twice in the same run: directly with boto3 (upload_file, the same part size and
concurrency), and as a host sends it: the reporter's uploader (agents/reporter/upload.py, plain HTTP
PUTs to pre-signed URLs) driven by a registry under gunicorn (S3 store, SQLite). Printed:
each throughput, their ratio (goal >= 0.8), and the registry's own CPU per GiB uploaded: the
CPU time of gunicorn (master and workers, from wait4 after it stops) minus the same for a run
that only starts, answers one request and stops. Also printed: the load average before and
after, and moto's peak memory (VmHWM).

moto assembles a completed upload in memory (the parts' bytes, a second copy for its default
full-object CRC64NVME checksum, then both copied again) and answers nothing until it is done:
about 10 s per GiB on a lightly loaded machine, with a peak of 4.5x the object in memory. A
completion that outlasts botocore's default 60 s read timeout is retried while the first is
still running; the retries read parts the first one has closed, and moto answers them 500
(`ValueError: seek of closed file`). So the direct upload's client waits as long as moto takes
(AWS S3 keeps a long completion's connection alive by sending whitespace; moto does not). The
registry's client keeps botocore's 60 s: on a busy machine a dump past ~4 GiB can fail its
completion on moto for the same reason.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3.s3.transfer
import requests

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.reporter.upload import Uploader, prepare  # noqa: E402  (the reporter's uploader)
from registry.auth.tokens import create_token  # noqa: E402
from registry.db import Database  # noqa: E402
from registry.migrate import upgrade  # noqa: E402
from testkit.reports import crash_report  # noqa: E402
from testkit.s3 import S3Server, start_moto  # noqa: E402

MIB = 1 << 20
BLOCK = 64 * MIB
COMPLETE_TIMEOUT_S = 900


def dump_file(path: Path, gib: float) -> int:
    """A kdump-compressed stand-in: makedumpfile's signature, then incompressible bytes."""
    block = bytearray(os.urandom(BLOCK))
    block[:8] = b"KDUMP   "
    total = int(gib * 1024) * MIB
    with path.open("wb") as out:
        for offset in range(0, total, BLOCK):
            out.write(block[: min(BLOCK, total - offset)])
            block[8:16] = os.urandom(8)  # each block differs
    return total


def registry(database_url: str, store: str, s3: S3Server, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = (
        os.environ
        | s3.env()
        | {
            "CRASHREG_DATABASE_URL": database_url,
            "CRASHREG_DUMP_STORE": store,
            "CRASHREG_BIND": f"127.0.0.1:{port}",
            "CRASHREG_WORKERS": "2",
            "CRASHREG_THREADS": "4",
            "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix="crashreg-dumps-metrics-"),
        }
    )
    command = [str(ROOT / ".venv/bin/gunicorn"), "-c", str(ROOT / "gunicorn.conf.py"), "registry.wsgi:app"]
    server = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log.open("ab"), stderr=subprocess.STDOUT)
    for _ in range(600):
        try:
            if requests.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code == 200:
                return server
        except requests.RequestException:  # not up yet
            pass
        time.sleep(0.1)
    raise SystemExit(f"gunicorn did not become ready; see {log}")


def stop_cpu_s(server: subprocess.Popen[bytes]) -> float:
    """Stop gunicorn; the CPU seconds it and its (reaped) workers used in all."""
    server.send_signal(signal.SIGTERM)
    _, _, usage = os.wait4(server.pid, 0)
    server.returncode = 0
    return usage.ru_utime + usage.ru_stime


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def through_registry(work: Path, s3: S3Server, dump: Path, threads: int, part_mb: int) -> dict[str, float]:
    database_url = f"sqlite:///{work / 'bench.db'}"
    upgrade(database_url)
    database = Database(database_url)
    with database.session() as session:
        token, _ = create_token(session, "bench-reporter", "report", "agent")
    database.dispose()
    headers = {"Authorization": f"Bearer {token}"}
    os.environ["CRASHREG_DUMP_PART_SIZE_MB"] = str(part_mb)

    idle = registry(database_url, f"s3://{s3.bucket()}/idle", s3, free_port(), work / "gunicorn.log")
    idle_cpu = stop_cpu_s(idle)

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = registry(database_url, f"s3://{s3.bucket()}/dumps", s3, port, work / "gunicorn.log")
    answer = requests.post(url + "/api/v1/reports", json=crash_report(), headers=headers, timeout=60).json()
    capture = requests.post(
        f"{url}/api/v1/events/{answer['event_id']}/captures",
        headers=headers,
        timeout=60,
        json={"method": "makedumpfile", "status": "completed", "target": str(dump)},
    ).json()

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = requests.post(url + path, json=body, headers=headers, timeout=300)
        response.raise_for_status()
        return response.json()

    state = prepare(work, "bench", capture["id"], dump)
    started = time.perf_counter()
    stored = Uploader(post, threads=threads, log=lambda line: None).upload(state)
    seconds = time.perf_counter() - started
    cpu = stop_cpu_s(server)
    assert stored["state"] == "stored" and stored["bytes"] == dump.stat().st_size, stored
    return {"seconds": seconds, "registry_cpu_s": cpu - idle_cpu}


def direct(s3: S3Server, dump: Path, threads: int, part_mb: int) -> float:
    bucket = s3.bucket()
    config = boto3.s3.transfer.TransferConfig(
        multipart_threshold=part_mb * MIB, multipart_chunksize=part_mb * MIB, max_concurrency=threads
    )
    # Content-MD5 per part, as the reporter sends (the registry's client asks for no checksum
    # either); a read timeout past moto's completion, which answers only once it has assembled
    # the object (module docstring)
    client = s3.client(request_checksum_calculation="when_required", read_timeout=COMPLETE_TIMEOUT_S)
    started = time.perf_counter()
    client.upload_file(str(dump), bucket, "direct/vmcore", Config=config)
    seconds = time.perf_counter() - started
    client.delete_object(Bucket=bucket, Key="direct/vmcore")  # the registry's run starts from the same moto
    return seconds


def peak_rss_gib(pid: int) -> float:
    """A process's peak resident memory (VmHWM), GiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    kib = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return round(kib / (1 << 20), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--part-mb", type=int, default=16)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="crashreg-bench-dumps-") as folder:
        work = Path(folder)
        s3 = start_moto(work / "moto.log")
        try:
            dump = work / "vmcore"
            total = dump_file(dump, args.gib)
            gib = total / (1 << 30)
            load_before = os.getloadavg()
            direct_s = direct(s3, dump, args.threads, args.part_mb)
            via = through_registry(work, s3, dump, args.threads, args.part_mb)
            load_after = os.getloadavg()
            moto_peak_gib = peak_rss_gib(s3.process.pid)
        finally:
            s3.stop()
    figures = {
        "load_avg_1m_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
        "moto_peak_rss_gib": moto_peak_gib,
        "gib": round(gib, 3),
        "direct_boto3_mib_s": round(total / MIB / direct_s, 1),
        "presigned_mib_s": round(total / MIB / via["seconds"], 1),
        "ratio": round(direct_s / via["seconds"], 2),
        "registry_cpu_s_per_gib": round(via["registry_cpu_s"] / gib, 3),
    }
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
