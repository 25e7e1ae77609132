"""An Atom feed of events, with entry ids that never change once written."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree as ET

from registry.domain.records import EventRecord
from registry.files import write_private

ATOM = "http://www.w3.org/2005/Atom"
FEED_ID = "tag:drafter-registry,2026:events"


# Characters XML 1.0 cannot hold (or discourages) and terminal controls: a Hub config value that reaches a
# message must not make the feed ill-formed.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# Unicode format characters (Cf: bidirectional overrides and isolates such as U+202E, zero-width characters, tag
# characters) and line/paragraph separators: a feed reader would show a Hub name reordered or hidden.
_INERT_CATEGORIES = frozenset({"Cf", "Zl", "Zp"})


def xml_text(value: object) -> str:
    text = _NOT_XML.sub(" ", str(value))
    return "".join(" " if unicodedata.category(c) in _INERT_CATEGORIES else c for c in text)


def entry_id(event: EventRecord) -> str:
    # From the dedupe key, not the row id: the same fact gets the same id in any database.
    return f"tag:drafter-registry,2026:event:{event.dedupe_key}"


def render_feed(events: list[EventRecord], *, title: str = "Drafter Registry alerts", link: str | None = None) -> bytes:
    ET.register_namespace("", ATOM)
    feed = ET.Element(f"{{{ATOM}}}feed")
    ET.SubElement(feed, f"{{{ATOM}}}id").text = FEED_ID
    ET.SubElement(feed, f"{{{ATOM}}}title").text = title
    updated = max((e.created_at for e in events), default=datetime(2026, 1, 1, tzinfo=UTC))
    ET.SubElement(feed, f"{{{ATOM}}}updated").text = updated.isoformat()
    if link:
        ET.SubElement(feed, f"{{{ATOM}}}link", href=link, rel="self")
    for event in sorted(events, key=lambda e: e.id, reverse=True):
        entry = ET.SubElement(feed, f"{{{ATOM}}}entry")
        ET.SubElement(entry, f"{{{ATOM}}}id").text = xml_text(entry_id(event))
        ET.SubElement(entry, f"{{{ATOM}}}title").text = xml_text(f"[{event.type}] {event.subject}")
        ET.SubElement(entry, f"{{{ATOM}}}updated").text = event.created_at.isoformat()
        ET.SubElement(entry, f"{{{ATOM}}}link", href=xml_text(f"https://huggingface.co/{event.subject}"))
        author = ET.SubElement(entry, f"{{{ATOM}}}author")
        ET.SubElement(author, f"{{{ATOM}}}name").text = "drafters"
        ET.SubElement(entry, f"{{{ATOM}}}category", term=xml_text(event.type))
        ET.SubElement(entry, f"{{{ATOM}}}summary").text = xml_text(event.payload.get("message", event.subject))
    return ET.tostring(feed, encoding="utf-8", xml_declaration=True)


def write_feed(events: list[EventRecord], path: Path) -> Path:
    # 0600 like everything in $DRAFTERS_HOME: events name private repos a token can see.
    return write_private(path, render_feed(events))
