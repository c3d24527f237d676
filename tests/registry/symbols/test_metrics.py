"""The symbol store's figures on /metrics."""

from __future__ import annotations

from click.testing import CliRunner
from flask.testing import FlaskClient

from registry.cli import main
from registry.cli_support import CliContext
from registry.config import Settings
from tests.support.symbols import Program


def test_the_symbol_store_is_on_metrics(settings: Settings, client: FlaskClient,
                                        symbol_programs: dict[str, Program]) -> None:
    program = symbol_programs["uploaded"]
    done = CliRunner().invoke(main, ["symbols", "upload", str(program.unstripped)], obj=CliContext(settings))
    assert done.exit_code == 0, done.output
    text = client.get("/metrics").get_data(as_text=True)
    size = program.unstripped.stat().st_size
    for kind in ("debuginfo", "executable"):
        assert f'crashreg_symbol_files{{kind="{kind}",source="upload"}} 1.0' in text
        assert f'crashreg_symbol_file_bytes{{kind="{kind}",source="upload"}} {float(size)}' in text
    assert 'crashreg_symbol_files{kind="debuginfo",source="debuginfod"} 0.0' in text
