"""Reading and validating JSON request bodies into the contract's 400 errors."""

from __future__ import annotations

import json
from typing import Any

from flask import request
from marshmallow import Schema, ValidationError

from registry.errors import ApiError


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a 400 saying what is wrong with it."""
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH raises 413 here
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ApiError(400, "malformed_json", f"request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "malformed_json", "request body must be a JSON object")
    return body


def load(schema: Schema, data: Any) -> Any:
    try:
        return schema.load(data)
    except ValidationError as error:
        messages = error.messages if isinstance(error.messages, dict) else {"_body": error.messages}
        names = ", ".join(sorted(messages))
        raise ApiError(400, "invalid", f"invalid fields: {names}", fields=messages) from None


def load_query(schema: Schema) -> Any:
    return load(schema, request.args.to_dict())
