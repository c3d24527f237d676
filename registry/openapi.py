"""OpenAPI 3 document generated from the marshmallow schemas the views declare."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from apispec import APISpec
from apispec.ext.marshmallow import MarshmallowPlugin
from flask import Flask
from marshmallow import Schema
from werkzeug.routing.converters import AnyConverter, PathConverter

from registry import __version__
from registry.ids import ID_MAX

F = TypeVar("F", bound=Callable[..., Any])
ERROR_STATUSES = {
    400: "bad input; error.fields names each bad field",
    401: "missing or unknown token",
    403: "token scope does not allow this",
    404: "not found",
    409: "conflict",
    413: "body too large",
    422: "a value passed validation but is too large for the database to store (do not retry)",
    429: "rate limited",
    503: "dependency unavailable",
}
PATH_SCHEMAS = {"id": {"type": "integer", "minimum": 1, "maximum": ID_MAX}, "int": {"type": "integer"}}
# A rule's variable: `<name>`, `<converter:name>`, `<converter(arguments):name>`.
_PATH_PARAM = re.compile(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>")


def _path_schema(converter_name: str, converter: Any) -> dict[str, Any]:
    """A path variable's schema, from its converter: an id's range, `any`'s values, `path`'s
    slashes (the rest: any text but a slash)."""
    if isinstance(converter, AnyConverter):
        return {"type": "string", "enum": sorted(converter.items)}
    if isinstance(converter, PathConverter):
        return {"type": "string", "description": "a path: may hold slashes"}
    return PATH_SCHEMAS.get(converter_name, {"type": "string"})


def documented(
    summary: str,
    *,
    request: type[Schema] | Schema | None = None,
    responses: dict[int, type[Schema] | Schema | str | dict[str, Any]] | None = None,
    query: type[Schema] | None = None,
    errors: tuple[int, ...] = (400, 401, 403),
    tag: str | None = None,
    request_required: bool = True,
) -> Callable[[F], F]:
    """Attach an OpenAPI operation to a view; the document is built from these, never by hand.
    An operation with a `request` body also documents 413 (no need to list it in `errors`);
    `request_required` False: the body may be left out (every field of it optional)."""

    def attach(view: F) -> F:
        view.openapi = {  # type: ignore[attr-defined]
            "summary": summary,
            "request": request,
            "request_required": request_required,
            "responses": responses or {200: "OK"},
            "query": query,
            "errors": errors,
            "tag": tag,
        }
        return view

    return attach


def build_spec(app: Flask) -> dict[str, Any]:
    spec = APISpec(
        title="crashreg",
        version=__version__,
        openapi_version="3.0.3",
        plugins=[MarshmallowPlugin()],
        info={"description": "Historical crash registry for large Linux fleets."},
    )
    spec.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})
    spec.components.schema(
        "Error",
        {
            "type": "object",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string"},
                        "message": {"type": "string"},
                        "fields": {"type": "object"},
                    },
                }
            },
        },
    )
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        view = app.view_functions[rule.endpoint]
        doc = getattr(view, "openapi", None)
        if doc is None:
            continue
        path = _PATH_PARAM.sub(r"{\2}", rule.rule)
        operations = {}
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            operations[method.lower()] = _operation(rule, view, doc)
        spec.path(path=path, operations=operations)
    return spec.to_dict()


def _operation(rule: Any, view: Any, doc: dict[str, Any]) -> dict[str, Any]:
    operation: dict[str, Any] = {"summary": doc["summary"], "responses": {}}
    if doc["tag"]:
        operation["tags"] = [doc["tag"]]
    scopes = getattr(view, "required_scopes", None)
    if scopes:
        operation["security"] = [{"bearer": []}]
        operation["description"] = f"Token scope: {' or '.join(scopes)}."
    parameters = [
        {
            "in": "path",
            "name": name,
            "required": True,
            "schema": _path_schema(converter, rule._converters[name]),
        }
        for converter, name in _PATH_PARAM.findall(rule.rule)
    ]
    if doc["query"] is not None:
        parameters.append({"in": "query", "schema": doc["query"]})
    if parameters:
        operation["parameters"] = parameters
    if doc["request"] is not None:
        operation["requestBody"] = {
            "required": doc["request_required"],
            "content": {"application/json": {"schema": doc["request"]}},
        }
    for status, body in doc["responses"].items():
        if isinstance(body, str):
            operation["responses"][str(status)] = {"description": body}
        elif isinstance(body, dict):  # media type -> schema, for answers in several formats
            operation["responses"][str(status)] = {
                "description": "OK",
                "content": {media: {"schema": schema} for media, schema in body.items()},
            }
        else:
            operation["responses"][str(status)] = {
                "description": "OK",
                "content": {"application/json": {"schema": body}},
            }
    errors = list(doc["errors"])
    if doc["request"] is not None and 413 not in errors:
        errors.append(413)  # any body past MAX_CONTENT_LENGTH, refused before it is read
    for status in errors:
        operation["responses"][str(status)] = {
            "description": ERROR_STATUSES[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return operation
