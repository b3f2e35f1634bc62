"""The latency benchmark's table: one row per mode, then what each copier did and the burst rates."""

from __future__ import annotations

import re
from typing import Any

from benchmarks.latency_cpu import BENCHMARK_ROLE

W = 18  # mode column
FROM = 41  # "measured from" column
# In a follow epoch's line: how many of its partitions waited for the next epoch.
LEFT_TO_NEXT_EPOCH = r"; ([\d,]+) partition\(s\) left to the next epoch"


def topics_of(params: dict[str, Any]) -> str:
    """`1,000 topics x ` when the load spread over several topics (--topics), else nothing."""
    topics = params.get("topics", 1)
    return f"{topics:,} topics x " if topics > 1 else ""


def render_table(r: dict[str, Any]) -> str:
    p = r["params"]
    modes = r["modes"]
    mm2_p99 = (modes.get("mm2") or {}).get("latency", {}).get("p99_ms")
    head = (
        f"{'mode':<{W}} {'measured from':<{FROM}} {'records':>9} {'p50 ms':>9} {'p90 ms':>9} {'p99 ms':>9} "
        f"{'max ms':>9} {'lost':>6} {'dup':>6} {'p99/MM2':>8} {'other load':>11}"
    )
    rule = "-" * len(head)
    lines = [
        f"mirror-pipeline latency: {p['rate']:,.0f} records/s x {p['record_bytes']} B, {topics_of(p)}{p['partitions']} "
        f"partitions, {p['seconds']:g} s of steady load per mode; {p['cpus']} CPUs shared by both brokers, the "
        f"copiers and the load",
        "",
        head,
        rule,
    ]
    for mode, m in modes.items():
        lines.append(_row(mode, m, mm2_p99))
    lines.append(rule)
    for mode, m in modes.items():
        lines += [f"{mode}: {line}" for line in _notes(mode, m, p)]
    lines += _cpu_against_mm2(modes)
    lines += _bursts(modes.get("follow", {}).get("burst"), r.get("burst_cycle"))
    return "\n".join(lines)


def copier_cpu_s(cpu: dict[str, float]) -> float:
    """A mode's copier and both brokers, in CPU seconds: every role of ours but the benchmark's load and probe."""
    return sum(v for k, v in cpu.items() if k not in (BENCHMARK_ROLE, "not-ours", "wall"))


def _cpu_against_mm2(modes: dict[str, Any]) -> list[str]:
    """Each mode's copier-and-brokers CPU beside MirrorMaker 2's: over the steady load, the same records
    in the same time for every mode (the fair comparison), then over each mode's whole run, whose
    start-ups, drains and stops differ in length (so in all and per second of it)."""
    load = {mode: m["load_cpu_s"] for mode, m in modes.items() if (m.get("load_cpu_s") or {}).get("wall")}
    whole = {mode: m["cpu_s"] for mode, m in modes.items() if (m.get("cpu_s") or {}).get("wall")}
    if not whole:
        return []
    out = ["", "CPU of the copier and both brokers (the benchmark's load and probe left out):"]
    if load:
        out.append("  during the steady load:")
        out += _cpu_lines(load, per_second=False)
        out.append("  over each mode's whole run (start, warm-up, drain and stop included):")
    out += _cpu_lines(whole, per_second=True)
    return out


def _cpu_lines(measured: dict[str, dict[str, float]], per_second: bool) -> list[str]:
    mm2 = measured.get("mm2")
    lines = []
    for mode, cpu in measured.items():
        total, wall = copier_cpu_s(cpu), cpu["wall"]
        line = f"  {mode + ':':<{W}} {total:>8.1f} CPU-s in {wall:g} s ({total / wall:.2f} cores)"
        if mm2 and mode != "mm2" and copier_cpu_s(mm2):
            line += f": {total / copier_cpu_s(mm2):.2f}x MirrorMaker 2's"
            if per_second:
                per_s = (total / wall) / (copier_cpu_s(mm2) / mm2["wall"])
                line += f" in all, {per_s:.2f}x per second"
        lines.append(line)
    return lines


def _row(mode: str, m: dict[str, Any], mm2_p99: float | None) -> str:
    if "skipped" in m or "latency" not in m:
        why = m.get("skipped") or m.get("error") or "not measured"
        return f"{mode:<{W}} not measured: {why}"
    lat = m["latency"]
    if "p50_ms" not in lat:
        return f"{mode:<{W}} {_measured_from(mode, m):<{FROM}} {lat.get('received', 0):>9,}  (no record arrived)"
    ratio = f"{lat['p99_ms'] / mm2_p99:>7.1f}x" if mm2_p99 else f"{'-':>8}"
    cpu = m.get("cpu_s") or {}
    other = f"{cpu['not-ours'] / max(cpu['wall'], 1e-9):>6.2f} cores" if "not-ours" in cpu else ""
    return (
        f"{mode:<{W}} {_measured_from(mode, m):<{FROM}} {lat['received']:>9,} {lat['p50_ms']:>9,.0f} "
        f"{lat.get('p90_ms', 0):>9,.0f} {lat['p99_ms']:>9,.0f} {lat['max_ms']:>9,.0f} {lat['lost']:>6,} "
        f"{lat['duplicated']:>6,} {ratio} {other}"
    )


def _measured_from(mode: str, m: dict[str, Any]) -> str:
    if m.get("start_up_s") is not None:
        warm = f" + {m['warm_s']:g} s" if m.get("warm_s") else ""
        return f"running (start-up {m['start_up_s']:.1f} s{warm} excluded)"
    runs = m.get("copier", {}).get("runs_count", 0)
    return f"load start ({runs} run{'s' if runs != 1 else ''}, whole processes)"


def _notes(mode: str, m: dict[str, Any], p: dict[str, Any]) -> list[str]:
    if "latency" not in m:
        return [f"not measured: {m.get('skipped') or m.get('error')}"] + _copier_notes(mode, m.get("copier", {}), p)
    out = [_load_note(m)]
    warm = m.get("warm_up") or {}
    if warm.get("sent"):
        steady = f", then {p['rate']:,.0f}/s for {m['warm_s']:g} s" if m.get("warm_s") else ""
        out.append(
            f"{warm['sent']:,} warm-up records (one per 0.2 s until the first arrived{steady}) left out of "
            f"the figures; received {warm.get('received', 0):,}, lost {warm.get('lost', 0)}, "
            f"duplicated {warm.get('duplicated', 0)}"
        )
    out += _copier_notes(mode, m.get("copier", {}), p)
    lat = m["latency"]
    if lat.get("tracked_partitions", 0) < lat.get("partitions", 0):
        out.append(
            f"the figures are those of {lat['tracked_partitions']:,} of the {lat['partitions']:,} partitions "
            "(evenly spread; a tracker of every partition would load the destination broker itself)"
        )
    if lat.get("timestamp_changed") or lat.get("unexpected"):
        out.append(
            f"WARNING: {lat.get('timestamp_changed')} records with a changed timestamp, "
            f"{lat.get('unexpected')} unexpected sequence numbers"
        )
    if not m.get("drained"):
        out.append(f"NOT everything arrived within the drain timeout ({m.get('drain_s')} s after the load)")
    if "gaps" in lat and mode.startswith("follow"):
        g = lat["gaps"]
        where = ", ".join(f"{length:g} s from {at:+.1f} s" for at, length in g.get("at_s", [])[:12])
        out.append(
            f"arrival gaps of 1 s or more: {g['count']} (longest {g['longest_ms'] / 1000:.1f} s, "
            f"{g.get('total_s', 0)} s in all)" + (f": {where}" if where else "")
        )
    if "timeline" in lat and not mode.startswith(("cycles", "scheduled")):
        t = lat["timeline"]
        span = t[1]["from_s"] - t[0]["from_s"] if len(t) > 1 else 0
        out.append(f"max ms per {span:g} s of production: " + " ".join(f"{w['max_ms']:.0f}" for w in t))
        if all("p99_ms" in w for w in t):
            out.append(f"p99 ms per {span:g} s of production: " + " ".join(f"{w['p99_ms']:.0f}" for w in t))
        if s := lat.get("slowest"):
            steps = " ".join("-" if v is None else f"{v}" for v in s["max_ms"])
            out.append(
                f"around the slowest record (produced at {s['at_s']:.2f} s), max ms per {s['step_ms']} ms of "
                f"production from {s['from_s']:.1f} s: {steps}"
            )
    cpu = m.get("cpu_s") or {}
    if cpu:
        roles = ", ".join(f"{k} {v:g}" for k, v in cpu.items() if k not in ("not-ours", "wall"))
        out.append(f"CPU s: {roles}; everything else {cpu['not-ours']:g} ({cpu['wall']:g} s wall)")
    largest = m.get("largest_process") or {}
    if largest:
        each = ", ".join(f"{k} {v['threads']:.0f} threads, {v['rss_mib']:.0f} MiB" for k, v in largest.items())
        out.append(f"largest process of each kind (most threads, peak RSS): {each}")
    for key in ("tracker_error", "foreign_records", "spark_master"):
        if key in m:
            out.append(f"{key.replace('_', ' ')}: {m[key]}")
    if "spark_cluster_up_s" in m:
        out.append(
            f"local Spark standalone cluster started in {m['spark_cluster_up_s']} s (before the mode, not measured)"
        )
    return out


def _after_ack(p: dict[str, Any]) -> str:
    if "after_ack_p50_ms" not in p:
        return ""
    return f" and the mirror had them p50 {p['after_ack_p50_ms']:.0f} ms, p99 {p['after_ack_p99_ms']:.0f} ms after that"


def _load_note(m: dict[str, Any]) -> str:
    ld, p = m.get("load") or {}, m.get("latency") or {}
    source = (
        f"the source acknowledged them p50 {p['source_ack_p50_ms']:.0f} ms, p99 {p['source_ack_p99_ms']:.0f} ms "
        f"after sending{_after_ack(p)}; "
        if "source_ack_p50_ms" in p
        else ""
    )
    return (
        f"load {ld.get('records', 0):,} records in {ld.get('seconds')} s ({ld.get('rate', 0):,.0f}/s, at most "
        f"{ld.get('max_behind_schedule_ms')} ms behind schedule at {ld.get('max_behind_at_s')} s, "
        f"{ld.get('failed', 0)} failed); {source}{_owed(ld)}"
        f"all arrived {m.get('drain_s')} s after the load ended"
    )


def _owed(ld: dict[str, Any]) -> str:
    """The acknowledgements the source still owed when the load ended (the drain waited for them)."""
    if not ld.get("unacknowledged"):
        return ""
    after = ld.get("unacknowledged_after_drain")
    return f"{ld['unacknowledged']:,} still unacknowledged when it ended ({after:,} after the drain's wait); "


def _copier_notes(mode: str, c: dict[str, Any], p: dict[str, Any]) -> list[str]:
    out = []
    if "runs_count" in c:
        walls = ", ".join(f"{r['wall_s']:.0f}" for r in c["runs"])
        out.append(
            f"{c['runs_count']} `run` processes ({c['failed']} failed), wall s: {walls}; "
            f"mean {c['wall_s_mean']} s of which the cycle itself {c['cycle_s_mean']} s "
            "(the rest: interpreter and Spark start, "
            f"recording in Dagster)"
        )
        if mode == "scheduled":
            out.append(
                f"started every {p['schedule_seconds']:g} s from the load's start; latest start "
                f"{c['late_s_max']} s late"
            )
    if "dagster_runs" in c:
        statuses = ", ".join(f"{n} {s.lower()}" for s, n in sorted(c["run_statuses"].items()))
        out.append(
            f"{c['dagster_runs']} replicate runs launched by the daemon ({statuses}): each took "
            f"{c['run_wall_s_mean']} s on average from its run worker's start to its end (at most "
            f"{c['run_wall_s_max']} s); one was created every {c['run_interval_s_mean']} s"
        )
    if "runs_error" in c:
        out.append(f"the runs could not be read from the Dagster home: {c['runs_error']}")
    if "stop_s" in c:
        out.append(f"{c.get('stopped_with', 'SIGTERM')} -> exit code {c['exit_code']} after {c['stop_s']} s")
    if c.get("epochs"):
        out.append(_epoch_summary([e["line"] for e in c["epochs"]]))
        if c.get("task_memory"):
            out.append(_task_memory(c["task_memory"]))
        out.append("its output, stamped in s from the measured load's start:")
        out += [f"  {e['at_s']:+8.1f} s  {e['line']}" for e in c["epochs"]]
    for key in ("died", "killed"):
        if key in c:
            out.append(f"{key.upper()}: {c[key]}")
    if "log_tail" in c:
        out.append("log tail:\n    " + c["log_tail"].replace("\n", "\n    "))
    return out


def _epoch_summary(lines: list[str]) -> str:
    """How many epochs failed something or left partitions to the next: one raced hand-over can set
    a run's tail, so a reader must know whether the figures include one."""
    epochs = [line for line in lines if re.match(r"epoch \d+:", line)]
    failed = [line for line in epochs if "not fully copied" in line or ": not run:" in line]
    left = sum(int(n.replace(",", "")) for line in epochs for n in re.findall(LEFT_TO_NEXT_EPOCH, line))
    grew = [line for line in epochs if "more than the link's task memory budget" in line]
    return (
        f"epochs reported: {len(epochs)}; with a failure: {len(failed)}; partitions left to the next epoch: {left}; "
        f"with a copy task grown past its memory budget: {len(grew)}"
    )


def _task_memory(epochs: list[dict[str, int]]) -> str:
    """Each epoch's largest copy task: what its worker grew by and peaked at, against the budget."""
    mib = 1 << 20
    measured = [m for m in epochs if m["growth_bytes"] >= 0]
    if not measured:
        return "a copy task's memory: not measured (no task could read its own)"
    grew = " ".join(f"{m['growth_bytes'] / mib:.0f}" for m in measured)
    peaks = " ".join(f"{m['peak_rss_bytes'] / mib:.0f}" for m in measured)
    return (
        f"a copy task's memory per epoch (MiB): grew {grew}; its worker peaked at {peaks}; "
        f"the budget for its record buffers {measured[0]['budget_bytes'] / mib:.0f}"
    )


def _bursts(follow: dict[str, Any] | None, cycle: dict[str, Any] | None) -> list[str]:
    if not (follow or cycle):
        return []
    out = [
        "",
        "burst throughput: records produced as fast as possible; records/s from the first to the last "
        "arrival on the mirror",
    ]
    for label, b in (("follow (running)", follow), ("one `run --link` process", cycle)):
        if not b:
            continue
        line = (
            f"  {label + ':':<26} {b['records']:>9,} records at {b['records_per_s'] or 0:>7,.0f}/s over "
            f"{b['first_to_last_s']:.2f} s (producer {b['produced']['rate']:,.0f}/s); lost {b['lost']}, "
            f"dup {b['duplicated']}"
        )
        if "run" in b:
            line += (
                f"; the process took {b['run']['wall_s']} s (its cycle {b['run'].get('duration_s')} s): "
                f"{b.get('records_per_s_process', 0):,.0f}/s over the whole process"
            )
        elif b.get("after_produced_s") is not None:
            line += f"; last arrival {b['after_produced_s']} s after the producer's last acknowledgement"
        out.append(line)
    return out
