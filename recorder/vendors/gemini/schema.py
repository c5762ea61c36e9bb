"""Gemini's OpenAPI-style ``Schema`` (a function's ``parameters``, ``responseSchema``) as
the JSON Schema Anthropic takes (``input_schema``, ``output_config.format``).

Gemini's ``Schema`` is a subset of OpenAPI 3.0's. What differs from JSON Schema, and how
it is converted:

* type names are capitals (``OBJECT``, ``STRING``, ...): lower-cased; ``TYPE_UNSPECIFIED``
  says nothing and is left out;
* ``nullable: true`` instead of a ``null`` type: ``"null"`` joins the type (and ``None``
  the enum, or ``{"type": "null"}`` the ``anyOf``);
* ``propertyOrdering`` has no twin (Claude reads properties in their order anyway): left
  out; ``example`` -> ``examples: [example]``;
* int64 counts (``maxItems``, ``minLength``, ...) may come as strings (proto JSON): made
  numbers;
* keys may be snake_case (``any_of``, ``max_items``) and are read as camelCase, which are
  JSON Schema's own spellings; property names are the client's and kept as they are.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.gemini.parts import fields

__all__ = ["json_schema"]

_COUNTS = frozenset(
    {"maxItems", "minItems", "maxLength", "minLength", "maxProperties", "minProperties"}
)
_UNSPECIFIED = "type_unspecified"


def json_schema(schema: Any) -> Any:
    """`schema` converted, recursively; anything but an object comes back unchanged."""
    if not isinstance(schema, dict):
        return schema
    given = fields(schema)
    out: dict[str, Any] = {}
    for key, value in given.items():
        if key == "type":
            if (kind := _type(value)) is not None:
                out["type"] = kind
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: json_schema(inner) for name, inner in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = json_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [json_schema(inner) for inner in value]
        elif key == "example":
            out["examples"] = [value]
        elif key in _COUNTS and isinstance(value, str) and value.isdigit():
            out[key] = int(value)
        elif key not in ("nullable", "propertyOrdering"):
            out[key] = value
    if given.get("nullable") is True:
        _allow_null(out)
    return out


def _type(value: Any) -> Any:
    if isinstance(value, str):
        kind = value.lower()
        return None if kind == _UNSPECIFIED else kind
    if isinstance(value, list):
        return [kind.lower() if isinstance(kind, str) else kind for kind in value]
    return value


def _allow_null(out: dict[str, Any]) -> None:
    kind = out.get("type")
    if isinstance(kind, str) and kind != "null":
        out["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        out["type"] = [*kind, "null"]
    elif kind is None and isinstance(out.get("anyOf"), list):
        out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
