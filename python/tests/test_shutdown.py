"""Interpreter exit with ferry objects still alive: pipelines whose threads call into Python,
held batches, pending egress steps, exported arrays. The process must exit cleanly (no abort,
no hang), the way a script that forgets close() ends."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import ferry
from conftest import ensure_backend

SCENARIO = textwrap.dedent("""
    import sys, time, threading
    import numpy as np
    import ferry

    dev = ferry.Device.open(sys.argv[1])
    params = ferry.NormalizeParams(2, 5, 7, 3)
    image = np.zeros(params.input_bytes, np.uint8)

    def endless():
        while True:
            yield image

    # an ingress pipeline whose producer keeps calling the Python source, one batch held
    held_pipe = ferry.IngressPipeline(dev, endless(), normalize=params, depth=2)
    held = held_pipe.next(timeout=30)
    # another, its batch released: the producer runs ahead into the source
    free_pipe = ferry.IngressPipeline(dev, endless(), normalize=params, depth=3)
    free_pipe.next(timeout=30).release()

    # an egress pipeline with steps still pending behind a slow consumer
    def slow(chunk):
        time.sleep(0.01)

    egress = ferry.EgressPipeline(dev, slow, chunk_bytes=64, max_pending_steps=8)
    buf = dev.upload(np.zeros(1024, np.uint8))
    for _ in range(3):
        egress.push(buf)

    # an exported array outliving everything
    pool = dev.create_staging_pool("host_upload", slab_bytes=4096, max_slabs=1)
    lease = pool.acquire(64)
    exported = np.from_dlpack(lease) if dev.backend != "cuda" else None
    time.sleep(0.05)
    print("exiting", flush=True)
""")


@pytest.mark.parametrize("attempt", range(3))
def test_exit_with_live_pipelines(backend, attempt):
    ensure_backend(backend)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(ferry.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_dir, env.get("PYTHONPATH", "")])
    env.pop("FERRY_VALIDATION", None)
    result = subprocess.run([sys.executable, "-c", SCENARIO, backend], env=env,
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert "exiting" in result.stdout, output
    assert result.returncode == 0, (
        f"exit status {result.returncode} (negative: killed by signal {-result.returncode}) at "
        f"interpreter exit with live pipelines:\n{output}")
    assert "terminate called" not in output, output
