"""Tool schemas without noise: every byte of `tools/list` is read by the model on each request.

Dropped: the `title` pydantic writes on every schema and property (it repeats the name);
`additionalProperties: true` (the default); `$defs` used once, written in place instead; in
inputs, the `null` branch and `null` default of optional parameters (leaving one out means the
same), `false` defaults of flags and string length limits; in outputs, defaults, model
docstrings and `required` (a result always carries every field), `type` beside an enum of
strings, and the `anyOf` around a nullable object (a type list says the same). Validation is
unchanged: it runs on the pydantic models, not on these listings.

An output schema is also made `shallow`: every field of the result keeps its name and type (and
an enum its values), but what a nested object or list holds is left to the tool's description
and the result itself — half the listing's tokens went to describing the inside of results a
model reads anyway, and a client validating `structuredContent` against the shallow schema still
checks every field's type.
"""

from __future__ import annotations

from typing import Any

__all__ = ["inline_defs", "lean", "shallow"]

_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMAS = ("items", "additionalProperties", "not")
_NULL = {"type": "null"}
_SHAPE = {"object": "properties", "array": "items"}
"""In an output schema below the top, `type` beside these keywords says nothing more."""
_INPUT_NOISE = ("minLength", "maxLength")
_OUTPUT_NOISE = ("default", "description", "required")
_ANNOTATION_KEYS = frozenset({"title", "description", "default"})


def lean(schema: dict[str, Any], *, output: bool, nested: bool = False) -> dict[str, Any]:
    """`schema` without the noise the module docstring lists (a property *named* title is kept)."""
    branches = schema.get("anyOf")
    others = [b for b in branches if b != _NULL] if isinstance(branches, list) and _NULL in branches else []
    if len(others) == 1 and isinstance(others[0], dict):
        rest = others[0]
        if not output and schema.get("default", None) is None:
            # Optional[X] = None → X, optional by not being required
            merged = {**{k: v for k, v in schema.items() if k not in ("anyOf", "default")}, **rest}
            return lean(merged, output=output, nested=nested)
        if output and _nullable_container(rest) and set(schema) - {"anyOf"} <= _ANNOTATION_KEYS:
            # X | None for an object or array → X with type [t, "null"]: the keywords of an
            # object or array schema do not apply to null, so it is the same schema.
            return lean({**rest, "type": [rest["type"], "null"]}, output=output, nested=nested)
    if isinstance(branches, list) and all(isinstance(b, dict) and set(b) == {"type"} for b in branches):
        # anyOf of bare types → one type list, the same schema in a third of the bytes.
        schema = {**{k: v for k, v in schema.items() if k != "anyOf"}, "type": [b["type"] for b in branches]}
    enum = schema.get("enum")
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in (_OUTPUT_NOISE if output else _INPUT_NOISE):
            continue
        if key == "additionalProperties" and value is True:
            continue
        if key == "default" and value is False and schema.get("type") == "boolean":
            continue
        if (
            output
            and key == "type"
            and value == "string"
            and isinstance(enum, list)
            and all(isinstance(e, str) for e in enum)
        ):
            continue
        if output and nested and key == "type" and isinstance(value, str) and _SHAPE.get(value, "") in schema:
            continue  # an object's `properties` or an array's `items` already say what it is
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {
                name: lean(sub, output=output, nested=True) if isinstance(sub, dict) else sub
                for name, sub in value.items()
            }
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            value = [lean(sub, output=output, nested=True) if isinstance(sub, dict) else sub for sub in value]
        elif key in _SUBSCHEMAS and isinstance(value, dict):
            value = lean(value, output=output, nested=True)
        out[key] = value
    return out


def _nullable_container(schema: Any) -> bool:
    return (
        isinstance(schema, dict)
        and schema.get("type") in ("object", "array")
        and not {"enum", "const", "anyOf", "oneOf", "allOf", "not", "$ref"} & set(schema)
    )


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with each `$defs` entry that a bare `$ref` uses once written in its place.

    Entries used more than once, or by a `$ref` with other keywords beside it, stay in `$defs`.
    A cycle of entries is always entered through one used twice, so expanding ends.
    """
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return schema
    uses: dict[str, int] = {}
    _count_refs(schema, uses)
    once = {name for name in defs if uses.get(name) == 1}

    def expand(node: Any) -> Any:
        if isinstance(node, dict):
            name = _ref_name(node)
            if name in once and len(node) == 1:
                return expand(defs[name])
            return {key: expand(value) for key, value in node.items()}
        if isinstance(node, list):
            return [expand(value) for value in node]
        return node

    out: dict[str, Any] = expand({key: value for key, value in schema.items() if key != "$defs"})
    kept = {name: expand(body) for name, body in defs.items() if name not in once}
    if kept:
        out["$defs"] = kept
    return out


_DEFS_PREFIX = "#/$defs/"


def _ref_name(node: dict[str, Any]) -> str | None:
    ref = node.get("$ref")
    return ref.removeprefix(_DEFS_PREFIX) if isinstance(ref, str) and ref.startswith(_DEFS_PREFIX) else None


def _count_refs(node: Any, uses: dict[str, int]) -> None:
    """Count the `$ref`s to each entry; one with keywords beside it counts twice (never inlined)."""
    if isinstance(node, dict):
        name = _ref_name(node)
        if name is not None:
            uses[name] = uses.get(name, 0) + (1 if len(node) == 1 else 2)
        for value in node.values():
            _count_refs(value, uses)
    elif isinstance(node, list):
        for value in node:
            _count_refs(value, uses)


def shallow(schema: dict[str, Any]) -> dict[str, Any]:
    """A lean output schema with each top-level field's type (and enum) only (see the module doc)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    kept: dict[str, Any] = {}
    for name, field in properties.items():
        if not isinstance(field, dict):
            kept[name] = field
            continue
        top = {k: v for k, v in field.items() if k in ("type", "enum", "const")}
        if not top and isinstance(field.get("anyOf"), list):  # a union of shapes: its branches' types
            types = [b["type"] for b in field["anyOf"] if isinstance(b, dict) and isinstance(b.get("type"), str)]
            top = {"type": types} if types else {}
        kept[name] = top
    return {**{k: v for k, v in schema.items() if k != "properties"}, "properties": kept}
