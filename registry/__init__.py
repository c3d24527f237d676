"""crashreg: the system of record for crash events, signatures, captures and RCAs."""

__version__ = "0.1.0"
