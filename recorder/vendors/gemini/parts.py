"""What both Gemini request translators share: reading a Gemini object in either key
spelling, Gemini's limits, and refusing (or leaving out) what has no twin.

Gemini's request JSON is proto3 JSON, so a field may come lowerCamelCase (``inlineData``,
as the SDKs send it) or as the proto spells it (``inline_data``, as LiteLLM and Google's
REST examples do). The translators read an object's fields through `fields`, which gives
them camelCase names; they always write camelCase.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable

__all__ = [
    "GEMINI_NAME_LIMIT",
    "IMAGE_TYPES",
    "camel",
    "fields",
    "no_twin",
]

GEMINI_NAME_LIMIT = 64  # function names: [A-Za-z0-9_.:-], at most 64 characters
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})  # Claude's


def camel(key: str) -> str:
    """A proto field name in its JSON spelling: ``inline_data`` -> ``inlineData``."""
    if "_" not in key:
        return key
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def fields(obj: Any) -> dict:
    """A Gemini object's own fields under their camelCase names; {} for a non-object.

    Only this level is renamed: what a field holds (function arguments, a schema's
    property names) is the client's and stays as it is.
    """
    if not isinstance(obj, dict):
        return {}
    return {camel(key): value for key, value in obj.items()}


def no_twin(ctx: RequestTranslation, leave_out: bool, where: str, what: str, why: str) -> None:
    """Refuse `what` (found at `where`), or with `leave_out` record it as left out.

    The recorded line names the kind, not the place, so a long transcript full of the same
    kind of part records it once.
    """
    if not leave_out:
        raise Untranslatable(f"{where}: {what}: {why}")
    ctx.drop(f"{what} (left out: {why})")
