"""One name for one symbol, wherever it is read: a JSON stack's frames, a core read on the
host (the core reader imports this module), a core or a debug file read by the registry.

`demangle` gives readable names for C++ (Itanium C++ ABI mangling, as c++filt prints them) and
Rust (legacy `_ZN..17h<hash>E` with the hash dropped, and v0 `_R`) symbols. What is not
understood falls back to the raw symbol: a wrong name is worse than a mangled one. Compiler
clone suffixes (`.cold`, `.isra.0`, `.constprop.1`, `.clone.3`) are dropped: one function, one
name.

`function_name` is what a fingerprint keys on: the qualified name alone (no return type,
parameters, cv- or ref-qualifiers, clone suffix or Rust hash). It reads a raw symbol and any
demangled spelling of it (this module's, c++filt's, gdb's) to the same name: overloads of one
function are one frame, as a console or a stripped report without types would name them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import TypeVar

MAX_SYMBOL = 4096
MAX_DEPTH = 64
# A hostile symbol can name a type that names the one before it many times, level after level,
# or read a pattern again for every element of a pack: the name's length (the longest c++filt
# prints for LLVM's, clang's, libstdc++'s or Boost's exported symbols is 4,272 characters) and
# what is read again are bounded.
MAX_NAME = 16384
MAX_READ_AGAIN = 4 * MAX_SYMBOL
T = TypeVar("T")
CLONE_SUFFIX = re.compile(r"(?:\.(?:isra|constprop|part|cold|lto_priv|llvm|localalias|clone|specialized)"
                          r"(?:\.\d++)?+|\.\d++)++$")


class Unsupported(ValueError):
    """A mangling this demangler does not read."""


# What reading a symbol this demangler does not understand may raise (a hostile one: past its
# end, a bad number, nested too deep): the symbol then stays raw.
UNREAD = (Unsupported, IndexError, ValueError, RecursionError)


class Parser:
    """A recursive-descent reader over one symbol, bounded in depth (hostile symbols nest) and
    in what it reads again (a substitution's spelling, a Rust backref)."""

    def __init__(self, symbol: str, at: int) -> None:
        self.s, self.at, self.depth = symbol, at, 0
        self.read_again_length = 0

    def read_again_at(self, start: int, parse: Callable[[], T]) -> T:
        """`parse` from `start`, then back where the symbol was being read."""
        at, self.at = self.at, start
        try:
            result = parse()
            self.read_again_length += self.at - start
        finally:
            self.at = at
        if self.read_again_length > MAX_READ_AGAIN:
            raise Unsupported("too much to read again")
        if isinstance(result, str) and len(result) > MAX_NAME:
            raise Unsupported("name too long")
        return result

    def nested(self, parse: Callable[[], T]) -> T:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise Unsupported("too deep")
        try:
            return parse()
        finally:
            self.depth -= 1


@lru_cache(maxsize=8192)
def demangle(symbol: str) -> str:
    """The readable name of `symbol`, or `symbol` itself (without clone suffixes) when it is
    not a mangled name this module reads. Cached: a crash storm names the same few symbols."""
    name = CLONE_SUFFIX.sub("", symbol)
    if len(name) > MAX_SYMBOL:
        return name
    try:
        if name.startswith("_R"):
            return RustV0(name).demangle()
        if name.startswith("_Z"):
            legacy = rust_legacy(name)
            return legacy if legacy is not None else Itanium(name).demangle()
    except UNREAD:
        return name
    return name


# --- the name a fingerprint keys on -------------------------------------------------------

# What c++filt and gdb print after a function's parameters: each qualifier a word of its own,
# after the parameters or a space (`is_const`, `write_volatile` and `operator&` are names).
TRAILING_QUALIFIERS = re.compile(
    r"(?:\s*+(?:(?<=[\s)])(?:const|volatile|restrict|noexcept|&&|&)|\[clone [^\]]*+\]))++$"
)
OPERATOR_SYMBOL = re.compile(r"operator(?:\(\)|\[\]|->\*?|\"\"\s*+\w++|[<>=!+\-*/%^&|~,]++)")
# A name that ends in the call operator itself, with no parameter list after it: a lambda's
# `operator()` as debug info names an inlined call of it.
CALL_OPERATOR_NAME = re.compile(r"(?<![\w$])operator\(\)$")
OPENING, CLOSING = "<([{", ">)]}"
# What c++filt adds to a Rust name: a v0 crate's hash (core[c1f1a4ba060b9bfa]), a legacy hash part.
RUST_CRATE_HASH = re.compile(r"(?<=\w)\[[0-9a-f]{16}\]|::h[0-9a-f]{16}$")


def function_name(name: str) -> str:
    """The qualified function name of a symbol or of a demangled name: `_ZNK3Foo3getEv`,
    `Foo::get() const` and `Foo::get() const [clone .cold]` are all `Foo::get`; `int
    twice<int>(int)` is `twice<int>`; `_ZN1r4main17h0123456789abcdefE` is `r::main`."""
    name = CLONE_SUFFIX.sub("", name.strip())
    if name[:2] in ("_Z", "_R"):
        read = demangle(name)
        name = read if read != name or name[:2] == "_R" else itanium_name(name)
    name = RUST_CRATE_HASH.sub("", name)
    if name.startswith(SPECIAL_LABELS):
        return name
    name = COPY_LABEL.sub("", name)  # a thunk or a clone is keyed as the function it stands for
    name = TRAILING_QUALIFIERS.sub("", name)
    if name.endswith(")") and not CALL_OPERATOR_NAME.search(name):
        opened = _opening_parenthesis(name)
        if opened > 0:
            name = TRAILING_QUALIFIERS.sub("", name[:opened])
    return name[_after_return_type(name):]


@lru_cache(maxsize=8192)
def itanium_name(symbol: str) -> str:
    """The function's name of an Itanium symbol `demangle` leaves raw for what follows its name
    (an expression in its return type: SFINAE's `enable_if`), as function_name reads c++filt's
    spelling of it; else the symbol."""
    if len(symbol) > MAX_SYMBOL or symbol.startswith(("_ZT", "_ZG")) or rust_legacy(symbol) is not None:
        return symbol
    parser = Itanium(symbol)
    try:
        name = parser.name()[0]
    except UNREAD:
        return symbol
    if len(name) > MAX_NAME or parser.peek() not in TYPE_STARTS:  # no function's types follow
        return symbol
    return name


@lru_cache(maxsize=8192)
def internal_linkage(symbol: str) -> bool:
    """Whether an Itanium symbol names a function of internal linkage by its name's last part
    (`static` in a namespace: `_ZN3netL6targetEPi`, net::target(int*)), which its demangled
    spelling does not show. Not a local entity of such a function (a lambda in it)."""
    name = CLONE_SUFFIX.sub("", symbol)
    if not name.startswith("_Z") or len(name) > MAX_SYMBOL or rust_legacy(name) is not None:
        return False
    parser = Itanium(name)
    try:
        parser.nested(parser.name)
    except UNREAD:
        return False
    return parser.internal


ANONYMOUS_NAMESPACE = "(anonymous namespace)"


def inlined_spelling(name: str, internal: bool = False) -> str:
    """A function name as debug info spells the function wherever it is inlined. GCC writes no
    linkage name for a function of internal linkage, so an inlined call of one in an anonymous
    namespace, or of a `static` one (`internal`: its symbol says so, internal_linkage), is
    named by its own last component alone (`checksum` for `net::(anonymous
    namespace)::checksum`, `parse` for `(anonymous namespace)::Codec::parse`, `target` for
    static `net::target`) while the symbol of its out-of-line copy carries the scopes: keyed on
    this, one bug keeps one name whether a release inlines it or not. Other names, and
    entities local to a function (a lambda's `operator()`), are returned as they are."""
    if internal:
        return _scopes(name)[-1]
    if ANONYMOUS_NAMESPACE not in name:
        return name
    parts = _scopes(name)
    local = any("(" in part for part in parts if part != ANONYMOUS_NAMESPACE)
    return parts[-1] if ANONYMOUS_NAMESPACE in parts[:-1] and not local else name


def _scopes(name: str) -> list[str]:
    """`name` cut at its outermost `::` (none inside template arguments, parameters or braces)."""
    parts, depth, start, at = [], 0, 0, 0
    while at < len(name):
        char = name[at]
        if char in OPENING:
            depth += 1
        elif char in CLOSING:
            depth -= 1
        elif depth == 0 and name.startswith("::", at):
            parts.append(name[start:at])
            start = at = at + 2
            continue
        at += 1
    return [*parts, name[start:]]


def _opening_parenthesis(name: str) -> int:
    """Where the parameter list that closes `name` opens (-1: unbalanced)."""
    depth = 0
    for at in range(len(name) - 1, -1, -1):
        if name[at] == ")":
            depth += 1
        elif name[at] == "(":
            depth -= 1
            if depth == 0:
                return at
    return -1


def _after_return_type(name: str) -> int:
    """Where the name starts after a template function's return type: past the last space
    outside brackets that is not part of an operator's name (`operator new`, `operator int`)."""
    depth, start, at, operator_end = 0, 0, 0, -1
    while at < len(name):
        operator = OPERATOR_SYMBOL.match(name, at) if name.startswith("operator", at) else None
        if operator is not None and (at == 0 or not (name[at - 1].isalnum() or name[at - 1] == "_")):
            at = operator_end = operator.end()
            continue
        char = name[at]
        if char in OPENING:
            depth += 1
        elif char in CLOSING:
            depth = max(depth - 1, 0)
        elif char == " " and depth == 0 and at != operator_end and not name.endswith("operator", 0, at):
            start = at + 1
        at += 1
    return start


# --- C++ (Itanium C++ ABI, section 5.1) ---------------------------------------------------

BUILTIN_TYPES = {
    "v": "void", "w": "wchar_t", "b": "bool", "c": "char", "a": "signed char", "h": "unsigned char",
    "s": "short", "t": "unsigned short", "i": "int", "j": "unsigned int", "l": "long",
    "m": "unsigned long", "x": "long long", "y": "unsigned long long", "n": "__int128",
    "o": "unsigned __int128", "f": "float", "d": "double", "e": "long double", "g": "__float128",
    "z": "...",
}
EXTENDED_TYPES = {
    "Dn": "decltype(nullptr)", "Di": "char32_t", "Ds": "char16_t", "Du": "char8_t", "Da": "auto",
    "Dc": "decltype(auto)", "Df": "decimal32", "Dd": "decimal64", "De": "decimal128", "Dh": "half",
}
OPERATORS = {
    "nw": "new", "na": "new[]", "dl": "delete", "da": "delete[]", "ps": "+", "ng": "-", "ad": "&",
    "de": "*", "co": "~", "pl": "+", "mi": "-", "ml": "*", "dv": "/", "rm": "%", "an": "&", "or": "|",
    "eo": "^", "aS": "=", "pL": "+=", "mI": "-=", "mL": "*=", "dV": "/=", "rM": "%=", "aN": "&=",
    "oR": "|=", "eO": "^=", "ls": "<<", "rs": ">>", "lS": "<<=", "rS": ">>=", "eq": "==", "ne": "!=",
    "lt": "<", "gt": ">", "le": "<=", "ge": ">=", "ss": "<=>", "nt": "!", "aa": "&&", "oo": "||",
    "pp": "++", "mm": "--", "cm": ",", "pm": "->*", "pt": "->", "cl": "()", "ix": "[]", "qu": "?",
}
# As c++filt prints them (it demangles verbosely: std::string is its full template).
STD_SUBSTITUTIONS = {
    "St": "std", "Sa": "std::allocator", "Sb": "std::basic_string",
    "Ss": "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
    "Si": "std::basic_istream<char, std::char_traits<char> >",
    "So": "std::basic_ostream<char, std::char_traits<char> >",
    "Sd": "std::basic_iostream<char, std::char_traits<char> >",
}
SPECIAL_NAMES = {"TV": "vtable for ", "TT": "VTT for ", "TI": "typeinfo for ", "TS": "typeinfo name for "}
SPECIAL_LABELS = (*SPECIAL_NAMES.values(), "guard variable for ")
# Thunks: T <call-offset> <encoding> (Tc: two call-offsets), named for the function they adjust to.
THUNKS = {"Th": "non-virtual thunk to ", "Tv": "virtual thunk to ", "Tc": "covariant return thunk to "}
TRANSACTION_CLONE = "transaction clone for "  # GCC's -fgnu-tm copy of a function: GTt <encoding>
COPY_LABEL = re.compile("^(?:" + "|".join((*THUNKS.values(), TRANSACTION_CLONE)) + ")")
# What a <type> begins with: after a function's name, its return type or first parameter.
TYPE_STARTS = frozenset(BUILTIN_TYPES) | frozenset("PROKVrNSTFAMDuZ0123456789")
INTEGER_LITERALS = {"i": "", "j": "u", "l": "l", "m": "ul", "x": "ll", "y": "ull"}

# A type: ("name", text) | ("pointer", inner, "*"|"&"|"&&"|" const"...) | ("function", ret, params, quals)
# | ("array", element, dimension) | ("pack", text, elements, ends empty): a template argument
# pack (ends empty: nothing, or an empty expansion, is its last) |
# ("expansion", start, end, packs): `Dp`, the pattern spelled at [start, end) over the packs
# (template parameters' indexes), one type per element.
# Printed inside out, as C declarators are.
Type = tuple


def render(node: Type) -> tuple[str, str]:
    """(left, right) of a type: its text is left + right; a declarator goes between them."""
    kind = node[0]
    if kind in ("name", "pack"):
        return node[1], ""
    if kind == "function":
        ret = text(node[1]) + " " if node[1] is not None else ""
        return ret, f"({node[2]}){node[3]}"
    if kind == "array":
        left, right = render(node[1])
        return left.rstrip() + " ", f"[{node[2]}]{right}"
    if kind == "expansion":
        raise Unsupported("pack expansion outside a list")
    left, right = render(node[1])
    if node[1][0] == "function":
        return f"{left}({node[2].lstrip()}", f"){right}"
    if node[1][0] == "array":  # c++filt: int (*) [4]
        return f"{left}({node[2].lstrip()}", f") {right}"
    return left + node[2], right


def text(node: Type) -> str:
    left, right = render(node)
    written = (left + right).rstrip() if node[0] in ("function", "array") else left + right
    if len(written) > MAX_NAME:
        raise Unsupported("name too long")
    return written


def base_name(qualified: str) -> str:
    """The last component of a qualified name, without its template arguments."""
    depth, start, end = 0, 0, len(qualified)
    for at, char in enumerate(qualified):
        if char == "<":
            if depth == 0:
                end = at
            depth += 1
        elif char == ">":
            depth -= 1
        elif char == ":" and depth == 0 and qualified[at + 1:at + 2] == ":":
            start, end = at + 2, len(qualified)
    return qualified[start:end].split("[abi:", 1)[0]


def after_operator(name: str) -> str:
    """A name before its template arguments: `operator<< <T>` keeps its space, as c++filt does."""
    return name + " " if name.endswith("<") else name


def close_template(args: list[Type]) -> str:
    """`<args>`, spaced from a closing `>` as c++filt does (not after an empty trailing pack or
    expansion: libiberty drops the separator it wrote for it, and its last character stays the
    space)."""
    joined = ", ".join(text(arg) for arg in args if not is_empty_pack(arg))
    spaced = joined.endswith(">") and not (args and ends_empty(args[-1]))
    return f"<{joined}{' ' if spaced else ''}>"


def is_empty_pack(node: Type) -> bool:
    return node[0] == "pack" and not node[2]


def ends_empty(node: Type) -> bool:
    """A pack with nothing, or an empty expansion, last."""
    return node[0] == "pack" and node[3]


CV_QUALIFIERS = frozenset(("const", "volatile", "restrict"))


def is_cv(op: str) -> bool:
    return bool(op.split()) and CV_QUALIFIERS.issuperset(op.split())


def pointer_to(inner: Type, op: str) -> Type:
    """`inner` with a pointer, reference or cv-qualifier; references to references collapse
    (T& && is T&), as an argument pack's element substituted into `T&&` does. A cv-qualified
    function type is qualified after its parameters, an array's qualifier is its element's
    (c++filt: `void () const`, `char const (&) [2]`)."""
    if op in ("&", "&&") and inner[0] == "pointer" and inner[2] in ("&", "&&"):
        return ("pointer", inner[1], "&" if "&" in (op, inner[2]) else "&&")
    if inner[0] == "pointer" and is_cv(op) and is_cv(inner[2]):  # a const argument made const again
        added = [word for word in op.split() if word not in inner[2].split()]
        return ("pointer", inner[1], inner[2] + "".join(f" {word}" for word in added)) if added else inner
    if inner[0] in ("function", "array") and is_cv(op):
        if inner[0] == "function":
            return ("function", inner[1], inner[2], op + inner[3])
        return ("array", pointer_to(inner[1], op), inner[2])
    return ("pointer", inner, op)


def holds_a_pack(node: Type) -> bool:
    """A pack, or a pointer, reference or array of one: only an expansion may spell it."""
    return node[0] == "pack" or (node[0] in ("pointer", "array") and holds_a_pack(node[1]))


Spelling = tuple[int, int]  # where a type is spelled in the symbol: [start, end)


class Itanium(Parser):
    def __init__(self, symbol: str) -> None:
        super().__init__(symbol, 2)
        self.substitutions: list[Type] = []
        # Per substitution: the template arguments its template parameters were read in (None:
        # it has none), their indexes and, for a type, where it is spelled. GCC reuses a type
        # spelled with template parameters (`T_`, `OT_`) in a local name's function for the same
        # spelling in the enclosing template, where `T_` names that one's first argument: such a
        # type is read again from its spelling there.
        self.substitution_contexts: list[tuple[list[Type] | None, tuple[int, ...], Spelling | None]] = []
        self.template_args: list[Type] = []  # of the function template: what T_, T0_ name
        self.last_args: list[Type] = []
        self.parameters_read: list[int] = []  # the indexes of the template parameters read so far
        self.type_starts: list[tuple[int, int]] = []  # (parameters_read, at) as each type began
        self.internal = False  # the symbol's own name (not a type's in it) was read last as L <name>

    # cursor helpers
    def peek(self, size: int = 1) -> str:
        return self.s[self.at:self.at + size]

    def take(self, prefix: str) -> bool:
        if self.s.startswith(prefix, self.at):
            self.at += len(prefix)
            return True
        return False

    def expect(self, prefix: str) -> None:
        if not self.take(prefix):
            raise Unsupported(f"expected {prefix!r} at {self.at}")

    def number(self) -> int:
        match = re.compile(r"n?\d+").match(self.s, self.at)
        if match is None:
            raise Unsupported("number")
        self.at = match.end()
        return -int(match.group()[1:]) if match.group().startswith("n") else int(match.group())

    def demangle(self) -> str:
        result = self.encoding()
        if self.at != len(self.s):
            raise Unsupported(f"trailing {self.s[self.at:]!r}")
        if len(result) > MAX_NAME:
            raise Unsupported("name too long")
        return result

    # <encoding>
    def encoding(self, return_type: bool = True) -> str:
        """`return_type`: print a function template's (not when it names a local entity's
        function, as c++filt does not)."""
        return self.nested(lambda: self._encoding(return_type))

    def _encoding(self, return_type: bool) -> str:
        special = self.special_name()
        if special is not None:
            return special
        name, is_template, cv_quals, last = self.name()
        if self.at >= len(self.s) or self.peek() == "E":
            return name
        return self.function(name, is_template, cv_quals, last, return_type)

    def function(self, name: str, is_template: bool, cv_quals: str, last: str,
                 return_type: bool = True) -> str:
        """A function's name with its return type (a template's) and its parameters."""
        ret = None
        if is_template:
            self.template_args = self.last_args
        if is_template and last not in ("ctor", "dtor", "conversion"):
            ret = self.type()
        params = self.parameters()
        return (text(ret) + " " if ret is not None and return_type else "") + f"{name}({params}){cv_quals}"

    def parameters(self) -> str:
        types = []
        while self.at < len(self.s) and self.peek() not in ("E", "."):
            types.extend(self.listed_type())
        if types == [("name", "void")]:
            return ""
        return ", ".join(text(t) for t in types)

    def listed_type(self) -> list[Type]:
        """A type in a list (parameters, a pack's arguments): a pack expansion is its types."""
        node = self.type()
        if node[0] == "expansion":
            return self.expanded(*node[1:])
        if holds_a_pack(node):
            raise Unsupported("a pack outside its expansion")
        return [node]

    def expanded(self, start: int, end: int, packs: frozenset[int]) -> list[Type]:
        """The pattern spelled at [start, end) read once per element of its packs, each read
        with the packs' parameters naming that element."""
        sizes = {len(self.template_args[index][2]) for index in packs}
        if len(sizes) != 1:  # no pack, or packs that disagree
            raise Unsupported("pack expansion")
        outer = self.template_args
        types = []
        try:
            for element in range(sizes.pop()):
                self.template_args = [arg[2][element] if index in packs else arg
                                      for index, arg in enumerate(outer)]
                types.append(self.read_again(start, end))
        finally:
            self.template_args = outer
        return types

    def special_name(self) -> str | None:
        for code, label in SPECIAL_NAMES.items():
            if self.take(code):
                return label + text(self.type())
        if self.take("GV"):
            return "guard variable for " + self.name()[0]
        if self.take("GTt"):
            return TRANSACTION_CLONE + self.encoding()
        label = THUNKS.get(self.peek(2))
        if label is not None:
            self.at += 1  # T: the call-offsets follow (h..., v...; Tc: c, then two)
            if self.take("c"):
                self.call_offset()
            self.call_offset()
            return label + self.encoding()
        return None

    def call_offset(self) -> None:
        """h <offset> _ | v <offset> _ <virtual offset> _: read past (c++filt does not print it)."""
        if self.take("h"):
            self.number()
        else:
            self.expect("v")
            self.number()
            self.expect("_")
            self.number()
        self.expect("_")

    # <name>: (text, is a template, cv-qualifiers of a member function, kind of the last part)
    def name(self) -> tuple[str, bool, str, str]:
        start = len(self.parameters_read)
        if self.peek() == "N":
            return self.nested_name()
        if self.peek() == "Z":
            return self.local_name()
        if self.take("St"):
            part, kind = self.unqualified_name(None)
            prefix = "std::" + part
        elif self.peek() == "S" and self.peek(2) != "St":
            node = self.substitution()
            if self.peek() != "I":
                raise Unsupported("substitution as a name")
            prefix, kind = text(node), "name"
        else:
            part, kind = self.unqualified_name(None)
            prefix = part
        if self.peek() == "I":
            self._remember(("name", prefix), start)
            return after_operator(prefix) + self.template_arguments(), True, "", kind
        return prefix, False, "", kind

    def cv_qualifiers(self) -> str:
        quals = ""
        for code, word in (("r", " restrict"), ("V", " volatile"), ("K", " const")):
            if self.take(code):
                quals += word
        return quals

    def nested_name(self) -> tuple[str, bool, str, str]:
        start = len(self.parameters_read)
        self.expect("N")
        quals = self.cv_qualifiers()
        if self.take("R"):
            quals += " &"
        elif self.take("O"):
            quals += " &&"
        parts: list[str] = []
        last_kind, is_template, last_plain = "name", False, ""
        while not self.take("E"):
            if self.peek() == "I":
                if not parts:
                    raise Unsupported("template arguments without a name")
                parts[-1] = after_operator(parts[-1]) + self.template_arguments()
                is_template = True
            elif self.peek() == "S" and self.peek(2) != "St":
                node = self.substitution()
                parts.append(text(node))
                last_plain = base_name(parts[-1])
                is_template = False
                continue
            elif self.take("St"):
                parts.append("std")
                is_template = False
                continue
            elif self.peek() == "T":
                parts.append(text(self.template_param()))
                is_template = False
            else:
                part, last_kind = self.unqualified_name(last_plain)
                parts.append(part)
                if last_kind == "name":
                    last_plain = base_name(part)
                is_template = False
            if self.peek() != "E":
                self._remember(("name", "::".join(parts)), start)
        return "::".join(parts), is_template, quals, last_kind

    def local_name(self) -> tuple[str, bool, str, str]:
        self.expect("Z")
        function = self.encoding(return_type=False)
        self.expect("E")
        if self.take("s"):
            entity = "string literal"
            kind, is_template = "name", False
        else:
            entity, is_template, quals, kind = self.name()
            return self._discriminated(f"{function}::{entity}", is_template, quals, kind)
        return self._discriminated(f"{function}::{entity}", is_template, "", kind)

    def _discriminated(self, name: str, is_template: bool, quals: str, kind: str
                       ) -> tuple[str, bool, str, str]:
        """A local entity's name, past its discriminator (not printed)."""
        if self.take("_"):
            if self.take("_"):
                self.number()
                self.expect("_")
            else:
                self.number()
        return name, is_template, quals, kind

    def unqualified_name(self, enclosing: str | None) -> tuple[str, str]:
        char = self.peek()
        internal = char == "L" and self.s[self.at + 1:self.at + 2].isdigit()
        if self.depth == 1:  # a part of the symbol's own name, not of a type or argument in it
            self.internal = internal
        if char.isdigit():
            return self.source_name(), "name"
        if internal:
            # GCC's and clang's internal linkage (a `static` function): L <source-name>, printed
            # as the name alone, as c++filt does
            self.at += 1
            return self.source_name(), "name"
        if self.take("C"):
            inheriting = self.take("I")  # CI1 <base>: a constructor inherited from the base
            if self.peek() not in ("1", "2", "3", "4", "5"):
                raise Unsupported("constructor")
            self.at += 1
            if inheriting:  # named by the base, as c++filt prints it
                return base_name(text(self.type())), "ctor"
            if not enclosing:
                raise Unsupported("constructor outside a class")
            return enclosing, "ctor"
        if char == "D" and self.s[self.at + 1:self.at + 2] in ("0", "1", "2", "4", "5"):
            self.at += 2
            if not enclosing:
                raise Unsupported("destructor outside a class")
            return "~" + enclosing, "dtor"
        if self.take("cv"):
            return "operator " + text(self.type()), "conversion"
        if self.take("li"):
            return 'operator"" ' + self.source_name(), "operator"
        if self.take("Ut"):
            index = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return f"{{unnamed type#{index}}}", "name"
        if self.take("Ul"):
            # a generic lambda's `auto` parameters are its own template's (T_ is auto:1), which
            # its call operator's instance names when it reuses them
            outer, self.template_args = self.template_args, [("name", f"auto:{n}") for n in range(1, 33)]
            try:
                params = self.parameters()
            finally:
                self.template_args = outer
            self.expect("E")
            index = self.number() + 2 if self.peek() != "_" else 1
            self.expect("_")
            return f"{{lambda({params})#{index}}}", "name"
        operator = OPERATORS.get(self.peek(2))
        if operator is not None:
            self.at += 2
            spaced = " " if operator[0].isalpha() else ""
            return f"operator{spaced}{operator}", "operator"
        raise Unsupported(f"name at {self.s[self.at:self.at + 4]!r}")

    def source_name(self) -> str:
        length = self.number()
        if length <= 0 or self.at + length > len(self.s):
            raise Unsupported("source name length")
        identifier = self.s[self.at:self.at + length]
        self.at += length
        if identifier.startswith("_GLOBAL__N"):
            return "(anonymous namespace)"
        while self.take("B"):  # ABI tags
            identifier += f"[abi:{self.source_name()}]"
        return identifier

    # <template-args>
    def template_arguments(self) -> str:
        self.expect("I")
        args: list[Type] = []
        while not self.take("E"):
            args.append(self.template_argument())
        self.last_args = args
        return close_template(args)

    def template_argument(self) -> Type:
        if self.peek() == "L":
            return ("name", self.literal())
        if self.take("J"):  # an argument pack: its arguments in place (none: nothing)
            pack: list[Type] = []
            ends_empty = True
            while not self.take("E"):
                listed = [self.template_argument()] if self.peek() in "LJX" else self.listed_type()
                pack.extend(listed)
                ends_empty = not listed or is_empty_pack(listed[-1])
            return ("pack", ", ".join(text(arg) for arg in pack), tuple(pack), ends_empty)
        if self.take("X"):
            value = self.expression()
            self.expect("E")
            return ("name", value)
        return self.type()

    def expression(self) -> str:
        """The expressions read (any other leaves the symbol raw): a template parameter, a
        member of a dependent type (`sr`: SFINAE's `std::is_signed<T>::value`), its negation
        (`nt`), and the address of a function or variable (`ad L_Z ... E`), a template's non-type
        argument (a callback: `Timer<&Worker::tick>`)."""
        if self.peek() == "T":  # a non-type template parameter passed on (`_Tuple_impl<_Idx, ...>`)
            return text(self.template_param())
        if self.take("sr"):
            return self.unresolved_name()
        if self.take("nt"):
            if not self.take("sr"):
                raise Unsupported("expression")
            return "!" + self.unresolved_name()
        if not self.take("adL_Z"):
            raise Unsupported("expression")
        return self.address()

    def unresolved_name(self) -> str:
        """sr <level>+ E <name> (`std::is_signed<long>::value`, each level a name with its
        template's arguments, read in the current template) or, as GCC also writes it,
        sr <type> <name> (`St11is_integralIT_E5value`), as libiberty reads either."""
        if self.peek() in ("S", "T"):
            return f"{text(self.type())}::{self.unresolved_level()}"
        if not (self.peek().isdigit() or self.peek().islower()):
            raise Unsupported("unresolved name")
        levels = []
        while not self.take("E"):
            levels.append(self.unresolved_level())
        if not levels:
            raise Unsupported("unresolved name")
        return "::".join((*levels, self.unresolved_level()))

    def unresolved_level(self) -> str:
        name = self.source_name()
        return after_operator(name) + self.template_arguments() if self.peek() == "I" else name

    def address(self) -> str:
        """c++filt prints a qualified function's address without its parameters
        (`&Worker::tick`), another's in parentheses with them (`&(check(int))`, `&(int
        pick<int>(int))`), a variable's by its name."""
        outer, qualified = self.template_args, self.peek() == "N" or self.peek(2) == "St"
        name, is_template, cv_quals, last = self.name()
        if self.peek() == "E":
            address = f"&{name}"
        elif qualified and not is_template:
            self.function(name, is_template, cv_quals, last)
            address = f"&{name}"
        else:
            address = f"&({self.function(name, is_template, cv_quals, last)})"
        self.template_args = outer
        self.expect("E")
        return address

    def literal(self) -> str:
        self.expect("L")
        if self.take("_Z"):
            name = self.encoding()
            self.expect("E")
            return name
        if self.take("Z"):
            name = self.encoding()
            self.expect("E")
            return name
        kind = self.peek()
        if kind == "b" and self.peek(3) in ("b0E", "b1E"):
            self.at += 3
            return "true" if self.s[self.at - 2] == "1" else "false"
        if kind in INTEGER_LITERALS:
            self.at += 1
            value = self.number()
            self.expect("E")
            return f"{value}{INTEGER_LITERALS[kind]}"
        node = self.type()
        value = self.s[self.at:self.s.index("E", self.at)]
        self.at += len(value) + 1
        return f"({text(node)}){value.replace('n', '-', 1) if value.startswith('n') else value}"

    def template_param(self) -> Type:
        self.expect("T")
        index = 0 if self.peek() == "_" else self.number() + 1
        self.expect("_")
        if index >= len(self.template_args):
            raise Unsupported("template parameter out of range")
        self.parameters_read.append(index)
        return self.template_args[index]

    def substitution(self) -> Type:
        for code, expansion in STD_SUBSTITUTIONS.items():
            if code != "St" and self.take(code):
                return ("name", expansion)
        self.expect("S")
        if self.take("_"):
            index = 0
        else:
            match = re.compile(r"[0-9A-Z]+").match(self.s, self.at)
            if match is None:
                raise Unsupported("substitution")
            self.at = match.end()
            self.expect("_")
            index = int(match.group(), 36) + 1
        if index >= len(self.substitutions):
            raise Unsupported("substitution out of range")
        context, parameters, spelling = self.substitution_contexts[index]
        if context is None or context is self.template_args:
            self.parameters_read.extend(parameters)
            return self.substitutions[index]
        if spelling is None:
            raise Unsupported("a name of another template's parameters")
        return self.read_again(*spelling)

    def read_again(self, start: int, end: int) -> Type:
        """The type spelled at [start, end) read in the current template (adding no substitution)."""
        count = len(self.substitutions)

        def spelled() -> Type:
            node = self.type()
            if self.at != end:
                raise Unsupported("a type read again")
            return node

        node = self.read_again_at(start, spelled)
        self._forget_substitutions(count)
        return node

    # <type>
    def type(self) -> Type:
        self.type_starts.append((len(self.parameters_read), self.at))
        try:
            return self.nested(self._type)
        finally:
            self.type_starts.pop()

    def _type(self) -> Type:
        char = self.peek()
        if char in BUILTIN_TYPES:
            self.at += 1
            return ("name", BUILTIN_TYPES[char])
        if self.peek(2) in EXTENDED_TYPES:
            self.at += 2
            return ("name", EXTENDED_TYPES[self.s[self.at - 2:self.at]])
        if char == "u":
            self.at += 1
            return self._remember(("name", self.source_name()))
        if char in "rVK":
            quals = self.cv_qualifiers()
            inner = self.type()
            if inner[0] == "function" and self.substitutions[-1] is inner:
                # a member function's qualified type (`KFbvE`): a candidate as a whole only, as GCC
                # substitutes it
                self._forget_substitutions(len(self.substitutions) - 1)
            return self._remember(pointer_to(inner, quals))
        for code, op in (("P", "*"), ("R", "&"), ("O", "&&")):
            if self.take(code):
                return self._remember(pointer_to(self.type(), op))
        if self.take("Dp"):
            start, read = self.at, len(self.parameters_read)
            self.type()
            packs = {i for i in self.parameters_read[read:] if self.template_args[i][0] == "pack"}
            return self._remember(("expansion", start, self.at, frozenset(packs)))
        if char == "F":
            return self._remember(self.function_type())
        if char == "A":
            return self._remember(self.array_type())
        if char == "M":
            self.at += 1
            owner = text(self.type())
            member = self.type()
            if member[0] == "function":
                return self._remember(("pointer", member, f" {owner}::*"))
            return self._remember(("name", f"{text(member)} {owner}::*"))
        if char == "T":
            node = self.template_param()
            if self.peek() == "I":
                self._remember(node)
                return self._remember(("name", text(node) + self.template_arguments()))
            return self._remember(node)
        if char == "S" and self.peek(2) != "St":
            node = self.substitution()
            if self.peek() == "I":
                node = ("name", text(node) + self.template_arguments())
                return self._remember(node)
            return node
        if char in "NZ" or char.isdigit() or self.peek(2) == "St":
            name, _, _, _ = self.name()
            node = ("name", name)
            if self.substitutions[-1:] != [node]:
                self._remember(node)
            return node
        raise Unsupported(f"type at {self.s[self.at:self.at + 4]!r}")

    def _forget_substitutions(self, count: int) -> None:
        """Keep the first `count` substitutions only."""
        del self.substitutions[count:], self.substitution_contexts[count:]

    def _remember(self, node: Type, start: int | None = None) -> Type:
        """`node` as the next substitution: the type being read, or the name that began where
        `start` template parameters were read."""
        spelling = None
        if start is None:
            start, began = self.type_starts[-1]
            spelling = (began, self.at)
        parameters = tuple(self.parameters_read[start:])
        self.substitutions.append(node)
        self.substitution_contexts.append((self.template_args if parameters else None, parameters, spelling))
        return node

    def function_type(self) -> Type:
        self.expect("F")
        self.take("Y")
        ret = self.type()
        params = []
        ref = ""
        while not self.take("E"):
            if self.peek(2) in ("RE", "OE"):
                ref = " &" if self.peek() == "R" else " &&"
                self.at += 1
                continue
            params.extend(self.listed_type())
        shown = "" if params == [("name", "void")] else ", ".join(text(p) for p in params)
        return ("function", ret, shown, ref)

    def array_type(self) -> Type:
        self.expect("A")
        dimension = ""
        if self.peek().isdigit():
            dimension = str(self.number())
        elif self.peek() == "T":  # a template's non-type parameter: its value
            dimension = text(self.template_param())
        elif self.peek() != "_":
            raise Unsupported("array dimension expression")
        self.expect("_")
        return ("array", self.type(), dimension)


# --- Rust legacy: _ZN<len><ident>...17h<16 hex>E -------------------------------------------

RUST_HASH = re.compile(r"17h[0-9a-f]{16}E$")
RUST_ESCAPES = {"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ","}


def rust_legacy(symbol: str) -> str | None:
    """A legacy-mangled Rust path (Itanium-shaped, with a hash part), or None if it is not one."""
    if not symbol.startswith("_ZN") or not RUST_HASH.search(symbol):
        return None
    at, parts = 3, []
    end = len(symbol) - 20  # the hash part and the closing E
    while at < end:
        match = re.compile(r"\d+").match(symbol, at)
        if match is None:
            return None
        length = int(match.group())
        at = match.end()
        parts.append(_rust_unescape(symbol[at:at + length]))
        at += length
    return "::".join(parts) if at == end and parts else None


def _rust_unescape(part: str) -> str:
    if part.startswith("_$"):
        part = part[1:]

    def escape(match: re.Match[str]) -> str:
        code = match.group(1)
        if code in RUST_ESCAPES:
            return RUST_ESCAPES[code]
        if code.startswith("u"):
            return chr(int(code[1:], 16))
        raise Unsupported(f"rust escape ${code}$")
    return re.sub(r"\$([A-Za-z0-9]+)\$", escape, part).replace("..", "::")


# --- Rust v0 (RFC 2603) -------------------------------------------------------------------

RUST_BASIC = {
    "a": "i8", "b": "bool", "c": "char", "d": "f64", "e": "str", "f": "f32", "h": "u8", "i": "isize",
    "j": "usize", "l": "i32", "m": "u32", "n": "i128", "o": "u128", "s": "i16", "t": "u16", "u": "()",
    "v": "...", "x": "i64", "y": "u64", "z": "!", "p": "_",
}
RUST_NAMESPACES = {"C": "closure", "S": "shim"}


class RustV0(Parser):
    def __init__(self, symbol: str) -> None:
        super().__init__(symbol, 2)

    def peek(self) -> str:
        return self.s[self.at:self.at + 1]

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.at += 1
            return True
        return False

    def base62(self) -> int:
        if self.take("_"):
            return 0
        value = 0
        while not self.take("_"):
            char = self.peek()
            if not char:
                raise Unsupported("base-62 number")
            self.at += 1
            digit = ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".index(char))
            value = value * 62 + digit
        return value + 1

    def decimal(self) -> int:
        match = re.compile(r"0|[1-9]\d*").match(self.s, self.at)
        if match is None:
            raise Unsupported("decimal")
        self.at = match.end()
        return int(match.group())

    def demangle(self) -> str:
        if self.peek().isdigit():
            self.decimal()  # encoding version
        path = self.path(value=True)
        return path

    def disambiguator(self) -> int:
        return self.base62() + 1 if self.take("s") else 0

    def identifier(self) -> str:
        self.disambiguator()
        punycode = self.take("u")
        length = self.decimal()
        self.take("_")
        name = self.s[self.at:self.at + length]
        self.at += length
        if punycode:
            raise Unsupported("punycode identifier")
        return name

    def backref(self, parse: Callable[[], str]) -> str:
        target = self.base62() + 2
        if target >= self.at:
            raise Unsupported("forward backref")
        return self.read_again_at(target, parse)

    def path(self, value: bool = False) -> str:
        return self.nested(lambda: self._path(value))

    def _path(self, value: bool) -> str:
        tag = self.peek()
        self.at += 1
        if tag == "C":
            return self.identifier()
        if tag == "N":
            namespace = self.peek()
            self.at += 1
            parent = self.path(value)
            disambiguator = self.disambiguator() if self.peek() == "s" else 0
            name = self.identifier() if self.peek() != "" else ""
            if namespace.isupper():  # a special namespace: closure, shim, or one rustc adds
                label = RUST_NAMESPACES.get(namespace, namespace)
                return f"{parent}::{{{label}{':' + name if name else ''}#{disambiguator}}}"
            return f"{parent}::{name}"
        if tag == "M":
            self.disambiguator()
            self.path()
            return f"<{self.type()}>"
        if tag == "X":
            self.disambiguator()
            self.path()
            own = self.type()
            return f"<{own} as {self.path()}>"
        if tag == "Y":
            own = self.type()
            return f"<{own} as {self.path()}>"
        if tag == "I":
            base = self.path(value)
            args = []
            while not self.take("E"):
                args.append(self.generic_arg())
            return f"{base}{'::' if value else ''}<{', '.join(args)}>"
        if tag == "B":
            return self.backref(lambda: self.path(value))
        raise Unsupported(f"rust path {tag!r}")

    def generic_arg(self) -> str:
        if self.take("L"):
            self.base62()
            return "'_"
        if self.take("K"):
            return self.const()
        return self.type()

    def const(self) -> str:
        if self.take("p"):
            return "_"
        if self.take("B"):
            return self.backref(self.const)
        kind = self.peek()
        self.at += 1
        negative = self.take("n")
        digits = self.s[self.at:self.s.index("_", self.at)]
        self.at += len(digits) + 1
        value = int(digits, 16) if digits else 0
        if kind == "b":
            return "true" if value else "false"
        return f"{'-' if negative else ''}{value}"

    def type(self) -> str:
        return self.nested(self._type)

    def _type(self) -> str:
        tag = self.peek()
        if tag in RUST_BASIC:
            self.at += 1
            return RUST_BASIC[tag]
        wrappers = {"R": "&", "Q": "&mut ", "P": "*const ", "O": "*mut "}
        if tag in wrappers:
            self.at += 1
            if self.take("L"):
                self.base62()
            return wrappers[tag] + self.type()
        if tag == "A":
            self.at += 1
            element = self.type()
            return f"[{element}; {self.const()}]"
        if tag == "S":
            self.at += 1
            return f"[{self.type()}]"
        if tag == "T":
            self.at += 1
            items = []
            while not self.take("E"):
                items.append(self.type())
            return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
        if tag == "B":
            self.at += 1
            return self.backref(self.type)
        if tag == "F":
            self.at += 1
            return self.fn_type()
        if tag == "D":
            self.at += 1
            return self.dyn_type()
        return self.path()

    def binder(self) -> None:
        """`for<'a>` lifetimes: counted, not printed (a name's identity does not hold them)."""
        if self.take("G"):
            self.base62()

    def fn_type(self) -> str:
        self.binder()
        unsafe = "unsafe " if self.take("U") else ""
        abi = ""
        if self.take("K"):
            abi = 'extern "C" ' if self.take("C") else f'extern "{self.identifier().replace("_", "-")}" '
        params = []
        while not self.take("E"):
            params.append(self.type())
        returned = self.type()
        return f"{unsafe}{abi}fn({', '.join(params)})" + ("" if returned == "()" else f" -> {returned}")

    def dyn_type(self) -> str:
        self.binder()
        traits = []
        while not self.take("E"):
            trait = self.path()
            bindings = []
            while self.take("p"):
                name = self.identifier()
                bindings.append(f"{name} = {self.type()}")
            if bindings:
                joined = ", ".join(bindings)
                trait = f"{trait[:-1]}, {joined}>" if trait.endswith(">") else f"{trait}<{joined}>"
            traits.append(trait)
        self.expect_lifetime()
        return "dyn " + " + ".join(traits)

    def expect_lifetime(self) -> None:
        if not self.take("L"):
            raise Unsupported("rust dyn lifetime")
        self.base62()
