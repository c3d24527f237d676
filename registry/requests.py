"""Reading and validating request input into the contract's 400 errors.

Every JSON body passes one guard before any schema sees it: values that no column can store,
wherever they are (unknown fields are stored with the raw report), are a 400 naming the field,
never a database error or a 500 later: a NUL, a lone surrogate, a non-finite number, an integer
literal too long to convert, nesting past MAX_DEPTH. Integers in range for JSON but past a
column's range are each schema's business (every integer field has bounds).
Query strings, form fields and paths get the same check for NULs (PostgreSQL refuses them).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from flask import request
from marshmallow import Schema, ValidationError, fields, validate
from werkzeug.exceptions import NotFound, RequestEntityTooLarge
from werkzeug.routing import BaseConverter

from registry.errors import ApiError
from registry.ids import ID_MAX, parse_id

MAX_DEPTH = 32
INT64_MAX = 2**63 - 1
LONGEST_INT_LITERAL = 400  # characters; Python refuses past 4,300 digits
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
NUL_MESSAGE = "contains a NUL character (\\u0000), which cannot be stored"
SURROGATE_MESSAGE = "contains a lone UTF-16 surrogate, which is not valid Unicode"


class _HugeInt:
    """An integer literal too long to convert, kept only to be named."""


def _parse_int(literal: str) -> int | _HugeInt:
    # Python refuses to convert literals past 4,300 digits: a ValueError mid-parse, with no
    # field to name. Far shorter ones are already past every column's range.
    return _HugeInt() if len(literal) > LONGEST_INT_LITERAL else int(literal)


def text_problem(value: str) -> str | None:
    if "\x00" in value:
        return NUL_MESSAGE
    # A surrogate is not ASCII: an ASCII string (most console logs) skips the regex, which
    # scans a 4 KB log in ~45 us against ~0.2 us for isascii().
    if not value.isascii() and _LONE_SURROGATE.search(value):
        return SURROGATE_MESSAGE
    return None


def storable_text(value: str) -> str:
    """Another system's text (Jira's) as a column can hold it: NULs dropped, lone surrogates
    replaced. Requests with such text are refused; what the registry reads from elsewhere is
    taken, not refused."""
    text = value.replace("\x00", "")
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def _value_problem(value: Any) -> str | None:
    if isinstance(value, str):
        return text_problem(value)
    if isinstance(value, _HugeInt):
        return f"integer literal longer than {LONGEST_INT_LITERAL} characters"
    if isinstance(value, float) and not math.isfinite(value):
        return "not a finite number"
    return None


def body_problems(body: Any, max_depth: int = MAX_DEPTH) -> dict[Any, Any]:
    """What in a parsed JSON document cannot be accepted, nested by field like marshmallow's
    messages ({"host": {"hostname": ["..."]}}); empty when all is well."""
    problems: dict[Any, Any] = {}

    def note(path: tuple[Any, ...], message: str) -> None:
        node = problems
        for part in path[:-1] if path else ():
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                return  # the parent already has a message of its own
            node = child
        leaf = node.setdefault(path[-1] if path else "_body", [])
        (leaf.setdefault("_schema", []) if isinstance(leaf, dict) else leaf).append(message)

    stack: list[tuple[tuple[Any, ...], Any]] = [((), body)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict | list) and len(path) >= max_depth:
            note(path[:1], f"nested deeper than {max_depth} levels")  # named by its top field
            continue
        if isinstance(value, dict):
            for key, item in value.items():
                key_problem = text_problem(key)
                if key_problem is not None:
                    note(path, f"a key {key_problem}")
                else:
                    stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, index), item) for index, item in enumerate(value))
        else:
            problem = _value_problem(value)
            if problem is not None:
                note(path, problem)
    return problems


def field_names(messages: dict[Any, Any]) -> str:
    return ", ".join(sorted(str(name) for name in messages))


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 400 saying what is wrong with it."""
    body = json_object()
    problems = body_problems(body)
    if problems:
        raise ApiError(400, "invalid", f"invalid fields: {field_names(problems)}", fields=problems)
    return body


def json_object() -> dict[str, Any]:
    """The request's JSON object as sent, values unchecked: for a sender whose text is taken as
    it is (Jira's webhooks, which read only a few fields), or a 400 if it is not a JSON object."""
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH raises 413 here
    streamed = request.content_length is None
    if streamed and len(raw) >= (request.max_content_length or math.inf) and _more_input():
        # A streamed (chunked) body: werkzeug stops reading at the limit without a 413, and the
        # body's first MAX_CONTENT_LENGTH bytes would be taken for all of it. (Only a body
        # without a Content-Length asks for the limit: a report's path reads nothing more.)
        raise RequestEntityTooLarge()
    try:
        body = json.loads(raw, parse_int=_parse_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {error}") from None
    except RecursionError:
        raise ApiError(
            400, "malformed_json", f"request body is nested too deeply (at most {MAX_DEPTH} levels)"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(400, "malformed_json", "request body must be a JSON object")
    return body


def _more_input() -> bool:
    """Whether the server's input stream holds more than the body read so far."""
    try:
        return bool(request.environ["wsgi.input"].read(1))
    except (OSError, ValueError):
        return False


def refuse_nul_in_request() -> None:
    """before_request: a NUL in the path, query string or form is a 400 naming where."""
    problems: dict[str, list[str]] = {}
    if "\x00" in request.path:
        problems["path"] = [NUL_MESSAGE]
    # Only a form body has form fields, and only the pages POST forms; reading any other body
    # here would hold it to MAX_CONTENT_LENGTH before its view could lift the limit (a dump
    # part streamed to disk, PUT with whatever content type the client library sets).
    is_form = request.method == "POST" and request.mimetype in ("application/x-www-form-urlencoded",
                                                                "multipart/form-data")
    # No query string, no arguments: a report's POST skips parsing one.
    sources = ((request.args,) if request.query_string else ()) + ((request.form,) if is_form else ())
    for source in sources:
        for name, value in source.items(multi=True):
            if "\x00" in name or "\x00" in value:
                problems.setdefault(name.replace("\x00", "\\u0000"), []).append(NUL_MESSAGE)
    if problems:
        raise ApiError(400, "invalid", f"invalid fields: {field_names(problems)}", fields=problems)


def load(schema: Schema, data: Any) -> Any:
    try:
        return schema.load(data)
    except ValidationError as error:
        messages = error.messages if isinstance(error.messages, dict) else {"_body": error.messages}
        raise ApiError(400, "invalid", f"invalid fields: {field_names(messages)}", fields=messages) from None


def load_query(schema: Schema) -> Any:
    return load(schema, request.args.to_dict())


class IdConverter(BaseConverter):
    """`<id:name>` in a route: a row id in range, else a JSON 404, so an id past the column's
    range never reaches the database. A 404 raised here, not werkzeug's no-match: that one
    becomes a 405 when the path has a route for another method (PUT and DELETE of a pin)."""

    regex = r"[0-9]{1,19}"

    def to_python(self, value: str) -> int:
        parsed = parse_id(value)
        if parsed is None:
            raise NotFound(f"no row has the id {value[:40]}: ids are whole numbers from 1 to {ID_MAX}")
        return parsed

    def to_url(self, value: Any) -> str:
        return str(int(value))


class WholeNumber(fields.Integer):
    """An integer in a body or query string that refuses a number with a fraction: marshmallow's
    Integer truncates 0.05 to 0 (a capture of 0 bytes, row id 1 for 1.5) unless strict, and
    strict refuses the query string's "20"."""

    def _validated(self, value: Any) -> int:
        if isinstance(value, float) and not value.is_integer():
            raise self.make_error("invalid")
        return super()._validated(value)


class JsonBoolean(fields.Boolean):
    """A boolean in a JSON body: true or false only. marshmallow's Boolean also takes 0, 1, "t",
    "yes", "on" and more (and `truthy={True}` still takes 1, which equals True), so a client's
    slip (a line count for `lines`, "no" for a review's `override_checks`) would be read as a
    decision."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


def id_field(**kwargs: Any) -> fields.Integer:
    """A row id in a query string or body: within the id column's range (0 means "none yet")."""
    return WholeNumber(validate=validate.Range(min=0, max=ID_MAX), **kwargs)
