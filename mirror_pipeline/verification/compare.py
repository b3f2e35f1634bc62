"""Narrowing: the first source offset at which two record streams differ.

Run on a range whose checksums differ. Both sides are walked together in
source-offset order (the mirror's records through the map's inverse), so a
changed record, a missing one, an extra one and a shifted tail are all found
at the first source offset they affect. Records are compared as the bytes
themselves; only the differing pair is summarised, without its payload.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mirror_pipeline.verification.checksum import Record, content, differing_fields, record_digest
from mirror_pipeline.verification.ranges import RunIndex
from mirror_pipeline.verification.results import Mismatch, RecordSummary


@dataclass(frozen=True)
class Narrowed:
    mismatch: Mismatch | None  # None: the streams agree (apart from what compaction explains)
    compacted_away: int  # records present on one side only, forgiven because the topic is compacted
    compared: int  # source records walked


def summary(m: Record) -> RecordSummary:
    ts_type, ts = m.timestamp()
    key, value = m.key(), m.value()
    return RecordSummary(
        offset=m.offset(),
        key_length=-1 if key is None else len(key),
        value_length=-1 if value is None else len(value),
        digest=record_digest(m),
        header_names=tuple(name for name, _ in m.headers() or ()),
        timestamp=ts,
        timestamp_type=ts_type,
    )


def first_difference(
    source: Iterable[Record], mirror: Iterable[Record], index: RunIndex, compacted: bool = False
) -> Narrowed:
    """Walk both streams (each in offset order) and stop at the first difference.

    On a compacted topic the two log cleaners run independently, so a record
    present on one side only is forgiven (and counted): compaction explains it.
    Content differences are never forgiven.
    """
    src, mir = _peekable(source), _peekable(mirror)
    forgiven = compared = 0
    previous = None  # the last source record's content: names a duplicated record as such
    while True:
        s, m = src.peek(), mir.peek()
        if s is None and m is None:
            return Narrowed(None, forgiven, compared)
        m_source = None if m is None else index.source_of(m.offset())
        if m is not None and m_source is None:
            return Narrowed(_unmapped_on_mirror(m, index), forgiven, compared)
        if m is None or (s is not None and s.offset() < m_source):
            if compacted:
                forgiven += 1
                next(src)
                compared += 1
                continue
            return Narrowed(_missing_on_mirror(s, index), forgiven, compared)
        if s is None or m_source < s.offset():
            if compacted:
                forgiven += 1
                next(mir)
                continue
            # Here the mirror has a record (both ran out, or the mirror did, returned above), so it maps.
            assert m is not None and m_source is not None
            return Narrowed(
                Mismatch(
                    m_source,
                    m.offset(),
                    "missing on the source: the mirror holds a record where the source has none",
                    None,
                    summary(m),
                ),
                forgiven,
                compared,
            )
        s_content, m_content = content(s, True), content(m, False)
        if s_content != m_content:
            return Narrowed(_content_mismatch(s, m, s_content, m_content, previous), forgiven, compared)
        previous = (s.offset(), s_content)
        next(src)
        next(mir)
        compared += 1


def _missing_on_mirror(s: Record, index: RunIndex) -> Mismatch:
    where = index.mirror_of(s.offset())
    reason = (
        "missing on the mirror: the offset map has no place for this source record"
        if where is None
        else "missing on the mirror"
    )
    return Mismatch(s.offset(), where, reason, summary(s), None)


def _unmapped_on_mirror(m: Record, index: RunIndex) -> Mismatch:
    return Mismatch(
        index.source_position(m.offset()),
        m.offset(),
        "the mirror holds a record the offset map does not account for",
        None,
        summary(m),
    )


def _content_mismatch(s: Record, m: Record, s_content: tuple, m_content: tuple, previous) -> Mismatch:
    if previous is not None and previous[1] == m_content:
        reason = f"the mirror holds a duplicate of source offset {previous[0]} here"
    else:
        fields = differing_fields(s_content, m_content)
        reason = f"{' and '.join(fields)} {'differs' if len(fields) == 1 else 'differ'}"
    return Mismatch(s.offset(), m.offset(), reason, summary(s), summary(m))


class _peekable:
    """An iterator whose next item can be looked at without taking it."""

    _END = object()

    def __init__(self, items: Iterable):
        self._it: Iterator = iter(items)
        self._next = next(self._it, self._END)

    def peek(self):
        return None if self._next is self._END else self._next

    def __next__(self):
        item = self._next
        self._next = next(self._it, self._END)
        return item
