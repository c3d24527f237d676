"""What tests share: builders (reports, fleets, simulated populations), fixtures and helpers.

Test modules import from here, from tests/emulators and from conftest fixtures, never from
each other (tests/foundation/test_architecture.py enforces it). Data the tests read: data/.
"""

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
