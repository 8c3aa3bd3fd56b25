"""Extra dashboard pages that features plug in: a provider returns rows to show.

The dashboard has no page of its own for what another feature keeps (broadcast
subscribers, for one): that feature registers a ``Section`` here, and the
dashboard lists it in its menu and serves it as a page and as JSON. Rows are
plain dicts of text; every value is escaped when shown, like all others.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List

#: Reads an app's rows for a section, from counters and bounded reads only.
Provider = Callable[[Any], List[Dict[str, Any]]]


@dataclass(frozen=True)
class Section:
    name: str          # its path: /section/<name>
    title: str
    columns: List[str]
    rows: Provider


_SECTIONS: Dict[str, Section] = {}


def register_section(section: Section) -> None:
    """Add (or replace) a section; a feature calls this when it is imported."""
    _SECTIONS[section.name] = section


def sections() -> List[Section]:
    return sorted(_SECTIONS.values(), key=lambda section: section.title)


def section(name: str) -> Section | None:
    return _SECTIONS.get(name)
