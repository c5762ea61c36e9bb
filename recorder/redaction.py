"""Redaction of what is recorded, never of what is sent: sensitive text in the log is
replaced by a marker naming the rule that found it (`[redacted:email]`).

The vendor and the client get every byte as it was; only the copy taplog writes is
changed, on the recorder's side (the writer thread or the recorder process), before the
line is sealed, so `taplog verify` proves the redacted log whole.

Rules are built-in detectors chosen by name (`BUILT_IN`) and patterns of the user's own
(`custom_rule`). A detector is a regular expression and, where a shape alone would find
too much, a check of the candidate: a card number must pass Luhn, an IBAN its mod-97
check, an address must parse. Where a candidate that fails its check is a group of digits
or characters separated by spaces or dashes, its longer prefixes ending at a separator are
tried too ("4111 1111 1111 1111 2026" holds a card).

JSON is redacted string by string (keys too), as the text the model reads, never as the
escaped bytes; a body that changed is written anew as compact JSON. Text that already
holds a marker keeps it: a rule never finds text inside one.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson

MARKER = "[redacted:{}]"
_MARKERS = re.compile(r"\[redacted:([a-z0-9][a-z0-9_-]{0,31})\]")
RULE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")
_SEPARATORS = " -"


@dataclass(frozen=True, slots=True)
class Detector:
    """One pattern of a rule; `valid` (if any) checks a candidate's text."""

    pattern: re.Pattern[str]
    valid: Callable[[str], bool] | None = None


@dataclass(frozen=True, slots=True)
class RedactionRule:
    name: str
    detectors: tuple[Detector, ...]
    # What every finding holds (a regex), searched first: most texts hold it nowhere, and are
    # then not searched again, rule by rule. None: the rule is always searched for.
    hint: str | None = None

    @property
    def marker(self) -> str:
        return MARKER.format(self.name)


def _luhn(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19 or len(set(digits)) == 1:
        return False
    total = 0
    for i, digit in enumerate(reversed(digits)):
        if i % 2:
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return total % 10 == 0


def _iban(text: str) -> bool:
    code = text.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return False
    moved = code[4:] + code[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _phone(text: str) -> bool:
    return 8 <= sum(c.isdigit() for c in text) <= 15


def _ipv6(text: str) -> bool:
    if not any(c.isdigit() for c in text) or text.count(":") < 2:
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


_EMAIL = (
    r"(?<![\w.%+-])[\w.%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![\w-])"
)
# international: +, a country code, groups with optional separators
_PHONE_INTERNATIONAL = r"(?<![\w+])\+\d(?:[ .-]?(?:\(\d{1,5}\)|\d)){6,18}(?!\d)"
# North American: (415) 555-0100, 415-555-0100, 415.555.0100
_PHONE_NORTH_AMERICAN = r"(?<![\w+(])(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w.-]\d)"
_CARD = r"(?<![\w-])(?:\d[ -]?){12,18}\d(?!\w)"
_IBAN = r"(?<!\w)[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}(?!\w)"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = rf"(?<![\w.])(?:{_OCTET}\.){{3}}{_OCTET}(?!\w|\.\d)"
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rf"(?<![\w:.])(?:(?:{_H})?(?::(?:{_H})?){{2,7}}(?![\w:]|\.\d)"
    rf"|(?:(?:{_H})?:){{2,6}}(?:{_OCTET}\.){{3}}{_OCTET}(?![\w.]))"
)
BUILT_IN: dict[str, RedactionRule] = {
    "email": RedactionRule("email", (Detector(re.compile(_EMAIL)),), "@"),
    "phone": RedactionRule(
        "phone",
        (
            Detector(re.compile(_PHONE_INTERNATIONAL), _phone),
            Detector(re.compile(_PHONE_NORTH_AMERICAN)),
        ),
        r"\+\d|\d{3}[.-]\d{3}|\(\d{3}\)",
    ),
    "card": RedactionRule("card", (Detector(re.compile(_CARD), _luhn),), r"\d(?:[ -]?\d){12}"),
    "iban": RedactionRule("iban", (Detector(re.compile(_IBAN), _iban),), r"[A-Z]{2}\d{2}"),
    "ip": RedactionRule(
        "ip",
        (Detector(re.compile(_IPV4)), Detector(re.compile(_IPV6), _ipv6)),
        r"\d\.\d{1,3}\.\d{1,3}\.\d|[0-9A-Fa-f]:[0-9A-Fa-f]{0,4}:|::",
    ),
}


def custom_rule(name: Any, pattern: Any) -> RedactionRule:
    """A rule of the user's own; ValueError (saying which part is wrong) when it is bad."""
    if not isinstance(name, str) or RULE_NAME.fullmatch(name) is None:
        raise ValueError(
            "name: must be 1 to 32 lower-case letters, digits, '-' or '_' (it goes in the "
            f"marker [redacted:NAME]), got {name!r}"
        )
    if name in BUILT_IN:
        raise ValueError(f"name: {name!r} is a built-in detector's; give your rule another name")
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern: must be a regular expression (a string), got {pattern!r}")
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern: not a valid Python regular expression: {exc}") from None
    if compiled.fullmatch("") is not None:
        raise ValueError(f"pattern: matches the empty string: {pattern!r}")
    return RedactionRule(name, (Detector(compiled),))


def built_in(names: Iterable[str]) -> list[RedactionRule]:
    """The built-in detectors by name; ValueError naming an unknown one."""
    rules = []
    for name in names:
        if name not in BUILT_IN:
            raise ValueError(f"unknown detector {name!r}: choose from {', '.join(BUILT_IN)}")
        rules.append(BUILT_IN[name])
    return rules


class Redaction:
    """The rules in force, applied to text, JSON values and bodies."""

    def __init__(self, rules: Iterable[RedactionRule]) -> None:
        unique = {rule.name: rule for rule in rules}
        self.rules = tuple(unique.values())
        self.names = tuple(unique)
        # A text where no rule's hint is is skipped at once: most strings of a body, most
        # whole bodies (JSON escapes no character a hint holds, so raw bytes can be asked).
        hints = [rule.hint for rule in self.rules]
        hint = None if None in hints or not hints else "|".join(f"(?:{h})" for h in hints)
        self._hint = re.compile(hint) if hint else None
        self._raw_hint = re.compile(hint.encode()) if hint else None

    def __bool__(self) -> bool:
        return bool(self.rules)

    def spans(self, text: str) -> list[tuple[int, int, RedactionRule]]:
        """Where the rules find something in `text`: apart, in order; where two overlap,
        the one that starts first (then the longer) wins. Markers are never looked into."""
        found: list[tuple[int, int, RedactionRule]] = []
        if self._hint is not None and self._hint.search(text) is None:
            return found
        for rule in self.rules:
            for detector in rule.detectors:
                found += ((s, e, rule) for s, e in _matches(detector, text))
        if not found:
            return found
        found.sort(key=lambda span: (span[0], -span[1]))
        taken: list[tuple[int, int, RedactionRule]] = []
        markers = [m.span() for m in _MARKERS.finditer(text)] if "[redacted:" in text else []
        for start, end, rule in found:
            if taken and start < taken[-1][1]:
                continue
            if any(start < m_end and m_start < end for m_start, m_end in markers):
                continue
            taken.append((start, end, rule))
        return taken

    def may_find(self, raw: bytes) -> bool:
        """Whether these bytes (a body, JSON or not, or a stream) may hold a finding."""
        return self._raw_hint is None or self._raw_hint.search(raw) is not None

    def text(self, text: str) -> str:
        """`text` with each finding replaced by its rule's marker (itself when none)."""
        spans = self.spans(text)
        if not spans:
            return text
        pieces, last = [], 0
        for start, end, rule in spans:
            pieces += (text[last:start], rule.marker)
            last = end
        return "".join(pieces) + text[last:]

    def value(self, value: Any) -> Any:
        """A JSON value with every string in it (keys too) redacted; the same object when
        nothing changed, so an untouched body is never copied."""
        return each_string(value, self.text)

    def body(self, raw: bytes, parsed: Any) -> tuple[bytes, Any]:
        """A body's bytes and parsed JSON (None: not JSON), redacted; the same objects when
        nothing was found. Bytes that are not UTF-8 text are left as they are."""
        if not self.may_find(raw):
            return raw, parsed
        if isinstance(parsed, dict | list):
            redacted = self.value(parsed)
            return (raw, parsed) if redacted is parsed else (orjson.dumps(redacted), redacted)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw, parsed
        redacted_text = self.text(text)
        return (raw, parsed) if redacted_text is text else (redacted_text.encode(), None)

    def fields(self, event: dict[str, Any], names: Iterable[str]) -> None:
        """Redact these fields of an event in place (headers, paths, error texts)."""
        for name in names:
            if event.get(name) is not None:
                event[name] = self.value(event[name])


def each_string(value: Any, text: Callable[[str], str]) -> Any:
    """A JSON value with `text` applied to every string in it (keys too); the same object
    when `text` changed none (returned each unchanged string itself), so an untouched
    body is never copied."""
    kind = type(value)
    if kind is str:
        return text(value)
    if kind is list:
        items = [each_string(item, text) for item in value]
        same = all(new is old for new, old in zip(items, value, strict=True))
        return value if same else items
    if kind is dict:
        copied: dict | None = None
        for at, (key, item) in enumerate(value.items()):
            new_key, new_item = text(key), each_string(item, text)
            if copied is None and (new_key is not key or new_item is not item):
                copied = dict(list(value.items())[:at])
            if copied is not None:
                copied[new_key] = new_item
        return value if copied is None else copied
    return value


def _matches(detector: Detector, text: str) -> Iterable[tuple[int, int]]:
    for match in detector.pattern.finditer(text):
        start, end = match.span()
        if end == start:
            continue
        if detector.valid is None:
            yield start, end
            continue
        found = _longest_valid(text[start:end], detector.valid)
        if found:
            yield start, start + found


def _longest_valid(candidate: str, valid: Callable[[str], bool]) -> int:
    """The length of the longest valid prefix of `candidate`: itself, or one ending before
    a separator; 0 when none is."""
    if valid(candidate):
        return len(candidate)
    for end in range(len(candidate) - 1, 0, -1):
        if candidate[end] in _SEPARATORS and valid(candidate[:end]):
            return end
    return 0


def rules_found(text: str) -> list[str]:
    """The rule names of the markers in `text`, each once, in the order first seen."""
    if "[redacted:" not in text:
        return []
    return list(dict.fromkeys(m.group(1) for m in _MARKERS.finditer(text)))


def matches_redacted(recorded: Any, live: Any) -> bool:
    """Whether `live` could be what was redacted into `recorded`: the same, but where a
    string of `recorded` holds a marker, which stands for any text."""
    if isinstance(recorded, str) and isinstance(live, str):
        if "[redacted:" not in recorded:
            return recorded == live
        pattern = ".+?".join(re.escape(text) for text in _MARKERS.split(recorded)[::2])
        return re.fullmatch(pattern, live, re.DOTALL) is not None
    if isinstance(recorded, dict) and isinstance(live, dict):
        return recorded.keys() == live.keys() and all(
            matches_redacted(value, live[key]) for key, value in recorded.items()
        )
    if isinstance(recorded, list) and isinstance(live, list):
        return len(recorded) == len(live) and all(
            matches_redacted(a, b) for a, b in zip(recorded, live, strict=True)
        )
    return bool(recorded == live)


def redaction_of(
    names: Iterable[str], own: Iterable[tuple[str, str | None]] = ()
) -> Redaction | None:
    """The redaction the settings ask for: built-in detectors by name, then the user's
    rules as (name, pattern) pairs (no pattern: a built-in by name); None for none. Both
    are checked at start-up (`proxy.config`)."""
    rules = built_in(names)
    for name, pattern in own:
        rules += built_in([name]) if pattern is None else [custom_rule(name, pattern)]
    return Redaction(rules) or None
