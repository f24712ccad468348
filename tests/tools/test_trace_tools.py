#!/usr/bin/env python3
"""Tests of tools/trace (report.py, timeline_svg.py) on a real trace: hello_transfer, run here
with --trace, moves a known 3000001 bytes up and back down, so the report must find exactly
those bytes on the upload and download queues. Plus the interval arithmetic against closed-form
cases. Standard library only (unittest).

    test_trace_tools.py HELLO_TRANSFER BACKEND TOOLS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HELLO, BACKEND, TOOLS = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, TOOLS)
import report  # noqa: E402  (tools/trace/report.py)

HELLO_BYTES = 3_000_001  # samples/hello_transfer/main.cpp: kBytes


class IntervalArithmetic(unittest.TestCase):
    def test_union_and_intersection(self):
        self.assertEqual(report.union_ns([(0, 10), (5, 15), (20, 30)]), 25)
        self.assertEqual(report.union_ns([(3, 4), (0, 10)]), 10)
        self.assertEqual(report.union_ns([]), 0)
        self.assertEqual(report.intersection_ns([(0, 10)], [(5, 15), (8, 20)]), 5)
        self.assertEqual(report.intersection_ns([(0, 10)], [(10, 20)]), 0)

    def test_covered(self):
        merged = report.merged([(0, 10), (5, 15), (20, 30)])
        self.assertEqual(merged, [[0, 15], [20, 30]])
        starts = [m[0] for m in merged]
        self.assertEqual(report.covered(merged, starts, 12, 25), 3 + 5)
        self.assertEqual(report.covered(merged, starts, 15, 20), 0)
        self.assertEqual(report.covered(merged, starts, -5, 40), 25)


class OnARealTrace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.trace = os.path.join(cls.dir.name, "hello.json")
        subprocess.run([HELLO, BACKEND, "--trace", cls.trace], check=True,
                       stdout=subprocess.DEVNULL)
        out = subprocess.run([sys.executable, os.path.join(TOOLS, "report.py"), cls.trace,
                              "--json"], check=True, capture_output=True, text=True).stdout
        cls.report = json.loads(out)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def device(self):
        self.assertEqual(len(self.report), 1, self.report.keys())
        return next(iter(self.report.values()))

    def test_every_byte_moved_is_found_once(self):
        queues = self.device()["queues"]
        for queue in ("upload", "download"):
            moved = sum(s["copy_bytes"] * s["submissions"] for s in queues[queue]["copies_by_size"])
            self.assertEqual(moved, HELLO_BYTES, queue)
        # The fill is an op, not a copy.
        self.assertEqual(queues["compute"]["submissions"], 1)
        self.assertEqual(queues["compute"]["copies_by_size"], [])

    def test_figures_are_consistent(self):
        for queue, q in self.device()["queues"].items():
            self.assertGreater(q["window_ms"], 0.0, queue)
            self.assertTrue(0.0 < q["busy_pct"] <= 100.0 + 1e-9, (queue, q["busy_pct"]))
            self.assertGreaterEqual(q["execution_us"]["p90"], q["execution_us"]["median"])
            runs = sum(c["submissions"] for c in q["execution_by_company_us"].values())
            self.assertEqual(runs, q["submissions"], queue)
        self.assertIn("Queue::submit", self.device()["host_us"])

    def test_a_window_keeps_only_its_executions(self):
        text = subprocess.run([sys.executable, os.path.join(TOOLS, "report.py"), self.trace,
                               "--from-ms", "1e9"], capture_output=True, text=True)
        self.assertEqual(text.returncode, 1)  # nothing starts that late
        self.assertIn("no device executions", text.stderr)

    def test_picture(self):
        svg = os.path.join(self.dir.name, "hello.svg")
        subprocess.run([sys.executable, os.path.join(TOOLS, "timeline_svg.py"), self.trace,
                        "--from-ms", "0", "--to-ms", "1e6", "--title", "hello", "-o", svg],
                       check=True)
        root = ET.parse(svg).getroot()  # well-formed XML
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        for queue in ("upload", "download", "compute"):
            self.assertIn(f"{queue} queue: device execution", texts)
        boxes = [r for r in root.iter("{http://www.w3.org/2000/svg}rect")
                 if r.find("{http://www.w3.org/2000/svg}title") is not None]
        executions = [b for b in boxes
                      if b.find("{http://www.w3.org/2000/svg}title").text.startswith("execution ")]
        self.assertEqual(len(executions), sum(q["submissions"] for q in self.device()["queues"].values()))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
