"""What tests share: builders (fleets, simulated populations), fixtures and helpers.

Test modules import from here, from tests/emulators, from testkit/ (what the benches need too:
reports, page login, Grafana's SQL expansion) and from conftest fixtures, never from each other
(tests/foundation/test_test_layout.py enforces it). Data the tests read: data/.
"""

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
