"""Helpers shared by the tests (not fixtures)."""

from __future__ import annotations

import threading

import pytest


def run_within(seconds: float, fn, *args, **kwargs):
    """Runs fn on a daemon thread and fails the test if it has not returned within `seconds`
    (a hang would otherwise stall the suite). Returns fn's result, re-raises its exception."""
    result = {}

    def target():
        try:
            result["value"] = fn(*args, **kwargs)
        except BaseException as error:  # noqa: BLE001 (re-raised on the test's thread)
            result["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} did not return within {seconds} s (hang)")
    if "error" in result:
        raise result["error"]
    return result.get("value")


def dlpack_host_exportable(dev) -> bool:
    """Whether `dev`'s device memory is host memory that DLPack exports as kDLCPU."""
    return dev.backend == "cpu"


def put(device, data, dst, **kwargs):
    """Uploads `data` into `dst` and waits until it is there. device.upload returns once the host
    array may be reused; the copy completes at the returned tensor's `ready` point, and only
    commands naming that tensor wait for it automatically: work on another queue that names the
    buffer itself (a fill, a copy, a download) is not ordered after the upload by anything."""
    tensor = device.upload(data, dst, **kwargs)
    tensor.ready.wait(timeout=60)
    return tensor
