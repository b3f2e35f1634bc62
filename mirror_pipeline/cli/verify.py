"""`mirror-pipeline mirror verify`: compare mirrors with their sources by checksums (R-REL-4).

Exit code 0 only when every compared range is identical, no mirror holds
records the link did not write and no mirror is flagged; 1 when a mirror
differs (the one-line message names the mirror, the partition and the first
bad source offset, or the mirror offsets of records the link did not write),
is flagged (FOREIGN_WRITE, ...: named with the registry's reason), or the
verify was refused.
"""

from __future__ import annotations

import math

import click

from mirror_pipeline import engine
from mirror_pipeline.cli.common import config_option, emit, fail, handle_errors, json_option, link_option, load, table
from mirror_pipeline.cli.values import OFFSET, TOPIC, WholeNumber, shown
from mirror_pipeline.replication.spark_runner import spark_session

# Up to 1 TB/s: any real throttle; 0 is refused (no throttle is the option left out).
BYTES_PER_SECOND = WholeNumber(1, 10**12)


class Fraction(click.ParamType):
    """A fraction in (0, 1]: the share of checksum ranges compared."""

    name = "fraction"

    def convert(self, value, param, ctx):
        allowed = "give a number above 0 and at most 1 (1 compares everything)"
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{shown(value, 40)} is not a number; {allowed}", param, ctx)
        if not math.isfinite(number) or not 0 < number <= 1:
            self.fail(f"{shown(value, 40)} is out of range; {allowed}", param, ctx)
        return number


@click.command()
@click.argument("mirror_topics", metavar="TOPIC...", nargs=-1, required=True, type=TOPIC)
@link_option
@click.option(
    "--sample",
    type=Fraction(),
    default=1.0,
    show_default=True,
    help="Share of the checksum ranges to compare, spread over each partition.",
)
@click.option("--from", "from_offset", type=OFFSET, default=None, help="First source offset to compare.")
@click.option("--until", "until_offset", type=OFFSET, default=None, help="Compare source offsets below this one.")
@click.option(
    "--max-bytes-per-second",
    "max_bytes_per_second",
    type=BYTES_PER_SECOND,
    default=None,
    help="Cap on what the verify reads from both clusters together [default: no cap].",
)
@config_option
@json_option
@handle_errors
def verify(
    mirror_topics: tuple[str, ...],
    link: str,
    sample: float,
    from_offset: int | None,
    until_offset: int | None,
    max_bytes_per_second: int | None,
    config_path: str | None,
    as_json: bool,
) -> None:
    """Compare mirror topics with their sources over their common range.

    Per partition and range of records, the checksums of both sides (offsets,
    key, value, headers, timestamp) are compared in one Spark job; a difference
    is narrowed to the first differing source offset, shown with both records'
    lengths, header names and a short digest (never their payload).

    Records on a mirror past what the link wrote (a write that did not come
    from the link) are a difference too, shown with their mirror offsets
    whatever --sample, --from and --until say; a stopped mirror's topic past
    its stop is its own. The mirror's flags (FOREIGN_WRITE, STOPPING,
    REVERSING, DELETING) are shown with their reason.

    \b
    Exit codes:
      0  identical: nothing differs, nothing unwritten by the link, no flag
      1  DIFFERENT or FLAGGED (the message names the first problem per
         mirror), or the verify was refused

    Example: mirror-pipeline mirror verify orders --link west-to-east --sample 0.1
    """
    if from_offset is not None and until_offset is not None and until_offset <= from_offset:
        raise click.BadParameter(f"{until_offset} is not above --from {from_offset}", param_hint="'--until'")
    config = load(config_path, link)  # an unknown link fails before Spark starts
    # Unknown mirror names are refused before Spark starts.
    known = {m.mirror_topic for m in engine.list_mirrors(config, link)}
    unknown = [t for t in dict.fromkeys(mirror_topics) if t not in known]
    if unknown:
        fail(
            f"TOPIC: no mirror {', '.join(shown(t) for t in unknown)} on link '{link}'; give mirror topics of the "
            f"link ({', '.join(sorted(known)) or 'it has none'})",
            as_json,
        )
    spark = spark_session(config.spark)
    result = engine.verify_mirrors(
        config, link, spark, list(dict.fromkeys(mirror_topics)), sample, from_offset, until_offset, max_bytes_per_second
    )
    emit(result.to_dict(), as_json, render_verify)
    if not result.identical:
        fail("; ".join(result.problems()), as_json)


def render_verify(d: dict) -> str:
    share = "every range" if d["sample"] >= 1 else f"a {d['sample']:g} sample of the ranges"
    verdict = "identical" if d["identical"] else d["verdict"].upper()
    lines = [
        f"link '{d['link']}': {verdict}: compared {d['source_records']:,} records ({share}, "
        f"{d['bytes_read']:,} bytes read) in {d['duration_s']:.1f}s over {d['tasks']} tasks"
    ]
    rows = []
    for name, m in d["mirrors"].items():
        for p in m["partitions"]:
            rows.append(
                [
                    name,
                    p["partition"],
                    f"{p['source_from']}..{p['source_until']}",
                    f"{p['ranges_checked']}/{p['ranges_total']}",
                    p["source_records"],
                    _verdict(p),
                ]
            )
    if rows:
        lines += ["", table(["MIRROR", "PARTITION", "SOURCE RANGE", "RANGES", "RECORDS", "RESULT"], rows)]
    for name, m in d["mirrors"].items():
        if m["flags"]:
            lines += ["", f"{name}: flagged {', '.join(m['flags'])}: {m['state_reason'] or 'no reason recorded'}"]
        if m["skipped"]:
            lines += ["", f"{name}: not verified: {m['skipped']}"]
        for p in m["partitions"]:
            if p["mismatch"]:
                lines += ["", f"{name} partition {p['partition']}:"] + _render_mismatch(p["mismatch"])
            if p["foreign_records"]:
                lines += ["", f"{name} partition {p['partition']}: {_foreign(p)}, past the end of its offset map"]
    return "\n".join(lines)


def _verdict(p: dict) -> str:
    if p["error"]:
        return f"not verified: {p['error']}"
    found = [f"differs at source offset {p['mismatch']['source_offset']}"] if p["mismatch"] else []
    if p["foreign_records"]:
        found.append(_foreign(p))
    if found:
        return "; ".join(found)
    extra = f" ({p['compacted_away']} compacted away on one side)" if p["compacted_away"] else ""
    return (p["note"] or "identical") + extra


def _foreign(p: dict) -> str:
    n, first, last = p["foreign_records"], p["foreign_from"], p["foreign_until"] - 1
    return (
        f"{n} record{'' if n == 1 else 's'} the link did not write at mirror "
        f"{f'offset {first}' if n == 1 else f'offsets {first}..{last}'}"
    )


def _render_mismatch(m: dict) -> list[str]:
    lines = [
        f"  first difference at source offset {m['source_offset']}, mirror offset "
        f"{'none' if m['mirror_offset'] is None else m['mirror_offset']}: {m['reason']}"
    ]
    for side in ("source", "mirror"):
        r = m[side]
        if r is None:
            lines.append(f"  {side}: no record")
            continue
        lines.append(
            f"  {side}: offset {r['offset']}, key {_length(r['key_length'])}, value "
            f"{_length(r['value_length'])}, digest {r['digest']}, headers [{', '.join(r['header_names'])}], "
            f"timestamp {r['timestamp']} (type {r['timestamp_type']})"
        )
    return lines


def _length(n: int) -> str:
    return "null" if n < 0 else f"{n} B"
