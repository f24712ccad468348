#!/usr/bin/env python3
"""Draws a time window of a ferry trace (FERRY_TRACE, --trace FILE) as an SVG picture: one row
per track (each queue's device execution and submissions, then the host threads), a span per
box, so that overlap, or its absence, is seen at a glance (docs/TRACES.md shows some). Standard
library only. Usage:

    python3 tools/trace/timeline_svg.py trace.json[.gz] --from-ms 120 --to-ms 122 \
        [--process vulkan] [--title TEXT] [--host-tracks REGEX] -o picture.svg

Times are milliseconds from the trace's first event (tools/trace/report.py uses the same origin).
"""
import argparse
import gzip
import html
import json
import re
import sys

WIDTH = 1100        # of the time axis, pixels
LABEL = 250         # the track names' column
ROW = 16
GAP = 4
COLOURS = {
    "upload": "#1f77b4",
    "download": "#d62728",
    "compute": "#2ca02c",
}
HOST_COLOURS = [
    (re.compile(r"wait|acquire", re.I), "#bbbbbb"),
    (re.compile(r"memcpy|convert|consum|work", re.I), "#9467bd"),
    (re.compile(r"submit|dispatch", re.I), "#8c564b"),
]


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def colour(track_name, span_name):
    queue = track_name.split(" ")[0]
    if track_name.endswith("device execution") and queue in COLOURS:
        return COLOURS[queue] if span_name == "execution" else "#ff7f0e"
    for pattern, c in HOST_COLOURS:
        if pattern.search(span_name):
            return c
    return "#17becf"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--from-ms", type=float, required=True)
    parser.add_argument("--to-ms", type=float, required=True)
    parser.add_argument("--process", default="", help="only devices whose name contains this")
    parser.add_argument("--host-tracks", default=".",
                        help="regular expression: host thread tracks to draw (default: all)")
    parser.add_argument("--title", default="")
    parser.add_argument("-o", "--out", required=True)
    args = parser.parse_args(argv)
    if args.to_ms <= args.from_ms:
        parser.error("--to-ms must be after --from-ms")

    events = load(args.trace)
    process, track = {}, {}
    origin = None
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            process[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            track[(e["pid"], e["tid"])] = e["args"]["name"]
        elif "ts" in e:
            origin = e["ts"] if origin is None else min(origin, e["ts"])
    origin = origin or 0.0
    t0 = origin + args.from_ms * 1e3
    t1 = origin + args.to_ms * 1e3
    host_filter = re.compile(args.host_tracks)

    spans = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        start, end = e["ts"], e["ts"] + e.get("dur", 0)
        if end < t0 or start > t1:
            continue
        if args.process not in process.get(e["pid"], ""):
            continue
        name = track.get((e["pid"], e["tid"]), f"track {e['tid']}")
        is_queue = name.split(" ")[0] in COLOURS and " queue: " in name
        if not is_queue and not host_filter.search(name):
            continue
        spans.setdefault((e["pid"], e["tid"]), []).append((start, end, e["name"]))
    if not spans:
        print("no spans in that window", file=sys.stderr)
        return 1

    def order(key):
        pid, tid = key
        name = track.get(key, "")
        # Device execution first, then the queues' host side, then host threads.
        rank = 0 if name.endswith("device execution") else 1 if " queue: " in name else 2
        return (pid, rank, tid)

    rows = sorted(spans, key=order)
    x = lambda t: LABEL + (min(max(t, t0), t1) - t0) / (t1 - t0) * WIDTH
    height = 40 + len(rows) * (ROW + GAP) + 24 * len({pid for pid, _ in rows}) + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LABEL + WIDTH + 20}" '
           f'height="{height}" font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="white"/>']
    if args.title:
        out.append(f'<text x="10" y="16" font-size="13" font-weight="bold">'
                   f'{html.escape(args.title)}</text>')
    y = 30
    last_pid = None
    for key in rows:
        pid, _ = key
        if pid != last_pid:
            y += 6
            out.append(f'<text x="4" y="{y + 12}" font-weight="bold">'
                       f'{html.escape(process.get(pid, str(pid)))}</text>')
            y += 18
            last_pid = pid
        name = track.get(key, "")
        out.append(f'<text x="10" y="{y + 12}">{html.escape(name)}</text>')
        out.append(f'<line x1="{LABEL}" y1="{y + ROW / 2}" x2="{LABEL + WIDTH}" '
                   f'y2="{y + ROW / 2}" stroke="#eeeeee"/>')
        for start, end, span_name in sorted(spans[key]):
            left, right = x(start), x(end)
            out.append(f'<rect x="{left:.2f}" y="{y}" width="{max(right - left, 0.6):.2f}" '
                       f'height="{ROW}" fill="{colour(name, span_name)}" stroke="white" '
                       f'stroke-width="0.3"><title>{html.escape(span_name)} '
                       f'{(end - start):.1f} us</title></rect>')
        y += ROW + GAP
    # Time axis: about ten ticks at a round step.
    span_us = t1 - t0
    step = 10 ** len(str(int(span_us / 10))) / 10 if span_us >= 10 else 1
    while span_us / step > 12:
        step *= 2
    y += 6
    out.append(f'<line x1="{LABEL}" y1="{y}" x2="{LABEL + WIDTH}" y2="{y}" stroke="black"/>')
    tick = 0.0
    while tick <= span_us + 1e-9:
        tx = LABEL + tick / span_us * WIDTH
        label = f"{tick / 1e3:g} ms" if step >= 100 else f"{tick:g} us"
        out.append(f'<line x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{y + 4}" stroke="black"/>')
        out.append(f'<text x="{tx:.1f}" y="{y + 16}" text-anchor="middle">{label}</text>')
        tick += step
    # Legend.
    y += 30
    lx = LABEL
    for label, c in (("upload execution", COLOURS["upload"]), ("download execution", COLOURS["download"]),
                     ("compute execution", COLOURS["compute"]), ("submit / dispatch", "#8c564b"),
                     ("host wait / acquire", "#bbbbbb"), ("host copy / consumer work", "#9467bd"),
                     ("other host work", "#17becf")):
        out.append(f'<rect x="{lx}" y="{y - 10}" width="12" height="12" fill="{c}"/>')
        out.append(f'<text x="{lx + 16}" y="{y}">{label}</text>')
        lx += 24 + 7 * len(label)
    out.append("</svg>")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
