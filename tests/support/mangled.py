"""Hostile mangled names: each level names the type before it three times (an Itanium
substitution, a Rust v0 backref), so that the name read grows threefold a level."""

from __future__ import annotations


def itanium_chain(levels: int) -> str:
    """A function taking, level after level, a pointer to a function of three of the type before."""
    symbol, before = "_Z1fPi", "S_"
    for level in range(1, levels + 1):
        symbol += f"PFv{before * 3}E"
        before = f"S{base36(2 * level - 1)}_"  # the pointer just added (S_ is the first substitution)
    return symbol


def base36(number: int) -> str:
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return (base36(number // 36) if number >= 36 else "") + digits[number % 36]


def rust_backref_chain(levels: int) -> str:
    """A v0 generic whose arguments are tuples of three backrefs to the tuple before."""
    symbol, start = "_RIC1a", len("_RIC1a")
    symbol += "TlllE"
    for _ in range(levels):
        backref = "B" + rust_base62(start - 2)
        start = len(symbol)
        symbol += f"T{backref * 3}E"
    return symbol + "E"


def rust_base62(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if number == 0:
        return "_"
    number -= 1
    written = digits[number % 62]
    while number := number // 62:
        written = digits[number % 62] + written
    return written + "_"

