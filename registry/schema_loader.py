"""A request body loaded by its marshmallow schema, without the schema's per-load machinery.

The schema stays the contract and the OpenAPI source. `compiled_loader(schema)` walks it once
into plain functions that give what `schema.load` gives for a body they accept, and give up
(None) on anything else; the caller then runs `schema.load`, whose errors are the 400's. They
may give up on anything; what they accept must equal schema.load's output: strings and whole
numbers are checked inline (type, null, the field's own validators), other fields run their
marshmallow `deserialize`, nested schemas are compiled alike, and the schema's `@validates`
and `@validates_schema` methods run as `load` runs them. A schema or field this cannot follow
exactly (unknown fields other than EXCLUDE, load hooks, data keys) is refused when compiled.
tests/registry/test_schema_loader.py runs valid, hostile and generated bodies through both.

On a crash report this is a fifth of the CPU of `schema.load` (bench/README.md, "Crash storm"); a
list of a plain schema's objects (a userspace stack's frames and threads) is loaded item by item
through the same functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, missing
from marshmallow.decorators import POST_LOAD, PRE_LOAD, VALIDATES, VALIDATES_SCHEMA

from registry.requests import WholeNumber

Load = Callable[[Any], Any]


class _GiveUp(Exception):
    """The body is not one these functions can vouch for: schema.load decides."""


def compiled_loader(schema: Schema) -> Callable[[Any], dict[str, Any] | None]:
    """`schema.load(body)` for the bodies it accepts, None for the rest (run schema.load)."""
    load = _schema(schema)

    def loaded(body: Any) -> dict[str, Any] | None:
        try:
            return load(body)
        except (_GiveUp, ValidationError):
            return None

    return loaded


def _schema(schema: Schema) -> Load:
    if schema.opts.unknown != EXCLUDE or schema.many:
        raise ValueError(f"{type(schema).__name__}: only schemas that exclude unknown fields compile")
    if schema._hooks[PRE_LOAD] or schema._hooks[POST_LOAD]:
        raise ValueError(f"{type(schema).__name__}: load hooks do not compile")
    steps = []
    for name, field in schema.load_fields.items():
        if field.data_key is not None or field.attribute is not None:
            raise ValueError(f"{type(schema).__name__}.{name}: data keys do not compile")
        steps.append((name, field.required, field.load_default, _field(field)))
    by_field = [
        (name, getattr(schema, attribute))
        for attribute, _, options in schema._hooks[VALIDATES]
        for name in options["field_names"]
    ]
    whole = [getattr(schema, attribute) for attribute, _, _ in schema._hooks[VALIDATES_SCHEMA]]
    if any(options.get("pass_original") for _, _, options in schema._hooks[VALIDATES_SCHEMA]):
        raise ValueError(f"{type(schema).__name__}: validators of the original data do not compile")

    def load(data: Any) -> dict[str, Any]:
        if type(data) is not dict:
            raise _GiveUp
        loaded: dict[str, Any] = {}
        for name, required, default, load_field in steps:
            value = data.get(name, missing)
            if value is missing:
                if required:
                    raise _GiveUp
                if default is not missing:
                    loaded[name] = default() if callable(default) else default
                continue
            loaded[name] = load_field(value)
        for name, validator in by_field:
            if name in loaded:
                validator(loaded[name], data_key=name)
        for validator in whole:
            validator(loaded, partial=None, many=False, unknown=EXCLUDE)
        return loaded

    return load


# Fields whose load, for a value of the exact type, is the value itself once its validators pass.
_AS_THEY_ARE: dict[type[fields.Field], type] = {fields.String: str, fields.Integer: int, WholeNumber: int}


def _field(field: fields.Field) -> Load:
    if getattr(field, "pre_load", None) or getattr(field, "post_load", None):
        raise ValueError(f"{field}: field load hooks do not compile")
    plain_nested = not (field.many or field.only or field.exclude or field.unknown) if isinstance(
        field, fields.Nested
    ) else False
    if type(field) is fields.Nested and plain_nested and isinstance(field.schema, Schema):
        return _checked(field, _schema(field.schema))
    if type(field) is fields.List:  # a stack's frames, its threads: each item as the inner field loads it
        each = _field(field.inner)

        def items(value: Any) -> list[Any]:
            if type(value) is not list:
                raise _GiveUp
            return [each(item) for item in value]

        return _checked(field, items)
    exact = _AS_THEY_ARE.get(type(field))
    if exact is None:
        return field.deserialize

    def as_it_is(value: Any) -> Any:
        if type(value) is not exact:
            raise _GiveUp
        return value

    return _checked(field, as_it_is)


def _checked(field: fields.Field, load: Load) -> Load:
    """`load` with the field's null handling and validators around it, as Field.deserialize."""
    allow_none, validators = field.allow_none, tuple(field.validators)

    def checked(value: Any) -> Any:
        if value is None:
            if allow_none:
                return None
            raise _GiveUp
        loaded = load(value)
        for validator in validators:
            validator(loaded)
        return loaded

    return checked
