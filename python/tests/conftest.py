"""Fixtures of ferry's Python test suite.

- ``backend``: every backend compiled into the module (ferry.list_backends()), plus any named in
  FERRY_REQUIRE; an unavailable backend is skipped, unless FERRY_REQUIRE (a comma list such as
  "cpu,vulkan") names it: then its tests fail.
- ``device``: an open device of ``backend`` (Vulkan with validation on), shared by the tests of
  the session; each test checks at teardown that it added no validation message and left the
  device open.
- ``open_device``: a factory for devices a test owns (closes, drops); each is checked for
  validation messages at teardown.
- ``rng``: numpy's default_rng with a printed seed (FERRY_TEST_SEED fixes it).

A test that runs past FERRY_TEST_TIMEOUT seconds (default 120) dumps every thread's stack and
ends the run: a hang inside ferry (a wait with the GIL released) cannot be interrupted otherwise,
and a stalled CI job says less than a stack trace.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import secrets
import sys
import threading

import numpy as np
import pytest

import ferry

KNOWN_BACKENDS = ("cpu", "vulkan", "cuda")


def required_backends() -> list[str]:
    value = os.environ.get("FERRY_REQUIRE", "")
    return [name.strip() for name in value.split(",") if name.strip()]


def _backend_infos():
    return {str(info.backend): info for info in ferry.list_backends()}


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        names = list(_backend_infos())
        for name in required_backends():
            if name not in names:
                names.append(name)
        names.sort(key=lambda n: KNOWN_BACKENDS.index(n) if n in KNOWN_BACKENDS else 99)
        metafunc.parametrize("backend", names, scope="session")


def pytest_report_header(config):
    try:
        lines = []
        for info in ferry.list_backends():
            devices = ", ".join(f"{d.name} ({d.driver})" for d in info.devices)
            state = "available" if info.available else f"unavailable: {info.reason}"
            lines.append(f"ferry backend {info.backend}: {state}; {devices}")
        lines.append(f"FERRY_REQUIRE={os.environ.get('FERRY_REQUIRE', '')!r}")
        return lines
    except Exception as error:  # noqa: BLE001 (the header must not break collection)
        return [f"ferry.list_backends() failed: {error!r}"]


def ensure_backend(backend: str):
    """Skips (or fails, if FERRY_REQUIRE names it) when `backend` cannot be used here."""
    info = _backend_infos().get(backend)
    required = backend in required_backends()
    if info is None:
        reason = f"backend {backend!r} is not built into this ferry module"
    elif not info.available:
        reason = f"backend {backend!r} is unavailable: {info.reason}"
    elif not info.devices:
        reason = f"backend {backend!r} has no device"
    else:
        return info
    if required:
        pytest.fail(f"FERRY_REQUIRE names {backend!r} but {reason}", pytrace=False)
    pytest.skip(reason)


def device_options(backend: str) -> dict:
    return {"validation": True} if backend == "vulkan" else {}


@pytest.fixture(scope="session")
def _session_devices():
    devices = {}
    yield devices
    for dev in devices.values():
        count = dev.validation_message_count
        dev.close(timeout=30)
        assert count == 0, f"{dev.backend}: {count} validation messages over the session"


@pytest.fixture
def device(backend, _session_devices):
    """An open device of `backend`, shared by the session's tests."""
    ensure_backend(backend)
    dev = _session_devices.get(backend)
    if dev is None or not dev.is_open:
        dev = ferry.Device.open(backend, 0, **device_options(backend))
        _session_devices[backend] = dev
    before = dev.validation_message_count
    yield dev
    gc.collect()
    assert dev.is_open, "a test closed the shared device (use open_device)"
    try:
        dev.wait_idle(timeout=10)
    except ferry.TimeoutError:
        # The test left work held back on a value nobody will signal (it failed half-way):
        # closing fails that work; later tests get a fresh device.
        del _session_devices[backend]
        dev.close(timeout=10)
        pytest.fail(f"the test left work on the {backend} device that never completes")
    after = dev.validation_message_count
    assert after == before, f"{after - before} new validation message(s) on {backend}"


@pytest.fixture
def open_device(backend):
    """Opens devices of `backend` owned by the test: open_device(**options)."""
    ensure_backend(backend)
    opened = []

    def open_(track=True, **options):
        """track=False: the fixture keeps no reference (for tests that drop the device; they
        check its validation messages themselves)."""
        merged = dict(device_options(backend))
        merged.update(options)
        dev = ferry.Device.open(backend, 0, **merged)
        if track:
            opened.append(dev)
        return dev

    yield open_
    gc.collect()
    for dev in opened:
        if dev.is_open:
            count = dev.validation_message_count
            dev.close(timeout=30)
            assert count == 0, f"{count} validation message(s) on {backend}"


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("FERRY_TEST_SEED", "0")) or secrets.randbits(63)
    print(f"rng seed for {request.node.nodeid}: {seed} (FERRY_TEST_SEED={seed} repeats it)")
    request.node.user_properties.append(("seed", seed))
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _hang_guard(request):
    seconds = float(os.environ.get("FERRY_TEST_TIMEOUT", "120"))
    if seconds <= 0:
        yield
        return
    nodeid = request.node.nodeid
    capman = request.config.pluginmanager.getplugin("capturemanager")

    def on_hang():
        # Show the stacks on the real stderr (pytest captures fd 2 during the test), then end
        # the process: nothing else can stop a thread blocked in ferry with the GIL released.
        try:
            if capman is not None:
                capman.suspend_global_capture(in_=False)
        except Exception:  # noqa: BLE001 (best effort: the process ends next)
            pass
        sys.stderr.write(f"\n\n*** {nodeid} ran past {seconds:g} s (FERRY_TEST_TIMEOUT): "
                         "a hang; stacks of every thread:\n")
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(3)

    timer = threading.Timer(seconds, on_hang)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
