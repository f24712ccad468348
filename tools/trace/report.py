#!/usr/bin/env python3
"""Summarises a ferry trace (FERRY_TRACE, --trace FILE): per device and queue, how busy the
device was, how long submissions took to start and to run, the copy bandwidth while a copy ran,
the idle gaps between submissions, and how much the queues overlapped.

It answers "is the copy engine slow, or idle between submissions?" without opening Perfetto.
Standard library only. Usage:

    python3 tools/trace/report.py trace.json[.gz] [--from-ms A] [--to-ms B] [--json]

--from-ms/--to-ms keep the device executions that start in that window (milliseconds from the
trace's first event): a bench runs several cases one after another.
"""
import argparse
import bisect
import gzip
import json
import statistics
import sys
from collections import defaultdict

QUEUES = ("upload", "download", "compute")


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def union_ns(intervals):
    """Total length of the union of [start, end) intervals."""
    total = 0
    end_so_far = None
    for start, end in sorted(intervals):
        if end_so_far is None or start > end_so_far:
            total += end - start
            end_so_far = end
        elif end > end_so_far:
            total += end - end_so_far
            end_so_far = end
    return total


def intersection_ns(a, b):
    """Length of (union of a) intersected with (union of b)."""
    return union_ns(a) + union_ns(b) - union_ns(list(a) + list(b))


def merged(intervals):
    """The union of intervals as sorted, disjoint [start, end) pairs."""
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def covered(merged_intervals, starts, start, end):
    """How much of [start, end) the merged intervals cover (starts: their start points)."""
    total = 0.0
    i = max(0, bisect.bisect_right(starts, start) - 1)
    while i < len(merged_intervals) and merged_intervals[i][0] < end:
        total += max(0.0, min(end, merged_intervals[i][1]) - max(start, merged_intervals[i][0]))
        i += 1
    return total


def pct(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def size_label(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def analyse(events, from_ms=None, to_ms=None):
    """Returns {device name: {queue: stats}, ...} plus overlaps, from the trace's events."""
    process = {}
    track = {}
    origin = None
    for e in events:
        if e.get("ph") == "M":
            if e.get("name") == "process_name":
                process[e["pid"]] = e["args"]["name"]
            elif e.get("name") == "thread_name":
                track[(e["pid"], e["tid"])] = e["args"]["name"]
        elif "ts" in e:
            origin = e["ts"] if origin is None else min(origin, e["ts"])
    origin = origin or 0.0

    # Per (pid, queue): dispatches by submission, executions by submission (microseconds).
    dispatch = defaultdict(dict)
    execution = defaultdict(dict)
    host_spans = defaultdict(lambda: defaultdict(list))  # pid -> span name -> durations
    waits = defaultdict(list)  # pid -> (start, end, value) of Timeline::wait
    for e in events:
        if e.get("ph") != "X":
            continue
        name = track.get((e["pid"], e["tid"]), "")
        if not name.endswith("device execution"):
            rel_ms = (e["ts"] - origin) / 1e3
            if (from_ms is None or rel_ms >= from_ms) and (to_ms is None or rel_ms <= to_ms):
                host_spans[e["pid"]][e["name"]].append(e.get("dur", 0))
            if e["name"] == "Timeline::wait" and "value" in e.get("args", {}):
                waits[e["pid"]].append((e["ts"], e["ts"] + e.get("dur", 0), e["args"]["value"]))
        queue = name.split(" ")[0]
        if queue not in QUEUES:
            continue
        sub = e.get("args", {}).get("submission")
        if not sub:
            continue
        start, end = e["ts"], e["ts"] + e.get("dur", 0)
        if name.endswith("submissions") and e["name"] == "dispatch":
            dispatch[(e["pid"], queue)][sub] = (start, end, e["args"].get("copy_bytes", 0))
        elif name.endswith("device execution") and e["name"] == "execution":
            rel_ms = (start - origin) / 1e3
            if from_ms is not None and rel_ms < from_ms:
                continue
            if to_ms is not None and rel_ms > to_ms:
                continue
            execution[(e["pid"], queue)][sub] = (start, end)

    report = {}
    for pid, pname in sorted(process.items()):
        device = {"queues": {}, "overlap": {}}
        spans_of = {}
        # Each queue's executions merged, to tell a submission that ran alone from one that ran
        # while another queue's work did (both copy directions at once; a kernel during a copy).
        busy_of = {q: merged(execution.get((pid, q), {}).values()) for q in QUEUES}
        busy_starts = {q: [b[0] for b in busy_of[q]] for q in QUEUES}

        def company(queue, start, end):
            """'alone', or the other queues busy for most of [start, end)."""
            others = [q for q in QUEUES if q != queue and
                      covered(busy_of[q], busy_starts[q], start, end) > 0.5 * (end - start)]
            return "+".join(others) if others else "alone"

        for queue in QUEUES:
            runs = execution.get((pid, queue), {})
            if not runs:
                continue
            spans = sorted(runs.values())
            spans_of[queue] = spans
            window = spans[-1][1] - spans[0][0]
            busy = union_ns(spans)
            durations = [end - start for start, end in spans]
            gaps = [max(0.0, b[0] - a[1]) for a, b in zip(spans, spans[1:])]
            latencies = []
            by_size = defaultdict(list)
            by_company = defaultdict(list)
            for sub, (start, end) in runs.items():
                d = dispatch.get((pid, queue), {}).get(sub)
                if d is None:
                    continue
                # From the dispatch's start: the backend may start the work before its call
                # returns (CUDA does).
                latencies.append(start - d[0])
                with_whom = company(queue, start, end)
                by_company[with_whom].append(end - start)
                if d[2] > 0:
                    by_size[(d[2], with_whom)].append(end - start)
            # Host wake-up: a Timeline::wait for this submission's number (the queue's progress
            # value, as Queue::submit returns it) that began before the work ended, from the
            # end of the work to the end of the wait. (Another timeline waited for at the same
            # value could be taken for it: a bench waiting on its submissions is the use.)
            wakes = []
            for w_start, w_end, value in waits.get(pid, []):
                run = runs.get(value)
                if run is not None and w_start <= run[1] <= w_end:
                    wakes.append(w_end - run[1])
            sizes = []
            for (size, with_whom), times in sorted(by_size.items()):
                median_us = statistics.median(times)
                sizes.append({
                    "copy_bytes": size,
                    "with": with_whom,
                    "submissions": len(times),
                    "median_us": median_us,
                    "gb_per_s": size / (median_us * 1e3) if median_us > 0 else None,
                })
            device["queues"][queue] = {
                "submissions": len(spans),
                "window_ms": window / 1e3,
                "busy_pct": 100.0 * busy / window if window > 0 else 100.0,
                "execution_us": {"median": pct(durations, 0.5), "p90": pct(durations, 0.9)},
                "gap_us": {"median": pct(gaps, 0.5), "p90": pct(gaps, 0.9)},
                "dispatch_to_start_us": {"median": pct(latencies, 0.5), "p90": pct(latencies, 0.9)},
                "end_to_host_wake_us": {"waits": len(wakes), "median": pct(wakes, 0.5),
                                        "p90": pct(wakes, 0.9)},
                "copies_by_size": sizes,
                "execution_by_company_us": {
                    k: {"submissions": len(v), "median": statistics.median(v)}
                    for k, v in sorted(by_company.items())},
            }
        names = list(spans_of)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                both = intersection_ns(spans_of[a], spans_of[b])
                least = min(union_ns(spans_of[a]), union_ns(spans_of[b]))
                device["overlap"][f"{a}+{b}"] = {
                    "both_busy_ms": both / 1e3,
                    "pct_of_shorter": 100.0 * both / least if least > 0 else 0.0,
                }
        # Host work by span name, the most time first: what the CPU spent where.
        device["host_us"] = {
            name: {"count": len(d), "median": pct(d, 0.5), "p90": pct(d, 0.9), "total_ms": sum(d) / 1e3}
            for name, d in sorted(host_spans[pid].items(), key=lambda kv: -sum(kv[1]))[:12]}
        if device["queues"]:
            report[pname] = device
    return report


def fmt(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def print_text(report, out=sys.stdout):
    for pname, device in report.items():
        print(pname, file=out)
        for queue, q in device["queues"].items():
            print(f"  {queue}: {q['submissions']} submissions over {fmt(q['window_ms'], 2)} ms, "
                  f"device busy {fmt(q['busy_pct'])}%; execution median {fmt(q['execution_us']['median'])} us "
                  f"(p90 {fmt(q['execution_us']['p90'])}); idle gap median {fmt(q['gap_us']['median'])} us "
                  f"(p90 {fmt(q['gap_us']['p90'])}); dispatch start to execution start median "
                  f"{fmt(q['dispatch_to_start_us']['median'])} us (p90 {fmt(q['dispatch_to_start_us']['p90'])})",
                  file=out)
            wake = q["end_to_host_wake_us"]
            if wake["waits"]:
                print(f"    host waits that saw the end: {wake['waits']}, from the end of the work to "
                      f"the wait's return median {fmt(wake['median'])} us (p90 {fmt(wake['p90'])})",
                      file=out)
            for s in q["copies_by_size"]:
                print(f"    copies of {size_label(s['copy_bytes'])} ({s['with']}): "
                      f"{s['submissions']} submissions, median {fmt(s['median_us'])} us on the "
                      f"device = {fmt(s['gb_per_s'], 2)} GB/s", file=out)
            for with_whom, c in q["execution_by_company_us"].items():
                print(f"    executions ({with_whom}): {c['submissions']}, median "
                      f"{fmt(c['median'])} us", file=out)
        for name, h in device["host_us"].items():
            print(f"  host {name}: {h['count']} spans, median {fmt(h['median'])} us "
                  f"(p90 {fmt(h['p90'])}), {fmt(h['total_ms'], 2)} ms in all", file=out)
        for pair, o in device["overlap"].items():
            print(f"  {pair} busy at once: {fmt(o['both_busy_ms'], 2)} ms "
                  f"({fmt(o['pct_of_shorter'])}% of the less busy one)", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--from-ms", type=float)
    parser.add_argument("--to-ms", type=float)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    data = load(args.trace)
    events = data["traceEvents"] if isinstance(data, dict) else data
    report = analyse(events, args.from_ms, args.to_ms)
    if not report:
        print(f"{args.trace}: no device executions (was the backend able to time its queues?)",
              file=sys.stderr)
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
    else:
        print_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
