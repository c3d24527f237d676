"""Symbol retention keeps a kernel's debug files while a report names them: the vmlinux by the
crash kernel's `kernel_build_id`, a module's by the DPU's `dpu.debug_info`; both databases."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from flask.testing import FlaskClient
from sqlalchemy import select

from registry.config import RetentionSettings, Settings
from registry.db import Database, utcnow
from registry.retention.gc import collect
from registry.storage.store import open_store
from registry.symbols.keep import Origin, keep_file
from registry.symbols.models import SymbolFile
from testkit.reports import crash_report
from tests.support.http import auth
from tests.support.symbols import build_id_of, kernel_like_files


def test_kernel_and_module_debug_files_a_report_names_are_kept(
    client: FlaskClient, database: Database, settings: Settings, make_token: Callable[..., str],
    tmp_path: Path,
) -> None:
    crashed = kernel_like_files(tmp_path / "crashed")
    never = kernel_like_files(tmp_path / "never", release=2)  # a build that never crashed
    store = open_store(settings.dump_store, settings.public_url)
    for path in (*crashed.values(), never["module"]):
        keep_file(database, store, path, Origin("upload", "ci"))
    kernel_id, module_id = build_id_of(crashed["vmlinux"]), build_id_of(crashed["module"])
    token = make_token("report")
    host = {"hostname": "gpu-r1", "kernel_version": "6.1.99"}
    debug_info = {"kernel": {"build_id": kernel_id, "from": "debuginfod"},
                  "modules": [{"name": "driver", "build_id": module_id, "from": "debuginfod"}]}
    for body in (crash_report(host=host, boot_id="boot-r1", kernel_build_id=kernel_id),
                 crash_report(host=host, boot_id="boot-r2", source="dpu", dpu={"debug_info": debug_info})):
        assert client.post("/api/v1/reports", json=body, headers=auth(token)).status_code == 201

    aged = replace(settings, retention=RetentionSettings(symbol_days=90))
    outcome = collect(database, store, aged, now=utcnow() + timedelta(days=91))
    with database.session() as session:
        kept = set(session.scalars(select(SymbolFile.build_id)))
    assert kept == {kernel_id, module_id}
    assert outcome.symbols_deleted == 2  # the module no report names: one object, two kinds
