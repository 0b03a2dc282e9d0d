"""The broker's kernel warm-up (``server/warm.py``), in a fresh process each (numba's state is the
process's): after it, a produce past the plain-Python budget and a fetch load no kernel code."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from compactlog import aot

SCRIPT = textwrap.dedent("""
    import sys, tempfile
    from compactlog.record import compression, jit
    from compactlog.server import warm
    from compactlog.server.apis.fetch import read_fetch
    from compactlog.server.conftest import batch, fetch_body, produce
    from compactlog.server.dispatch import advertised_apis, dispatch_table
    from compactlog.server.state import BrokerState, Listener, ProducerIdManager, load_identity
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir

    def loaded():
        # every signature numba holds machine code for, over every kernel module built
        return {(m, k, sig) for m, shadow in jit._shadows.items() for k, d in vars(shadow).items()
                if hasattr(d, "overloads") for sig in list(d.overloads)}

    assert not jit.compiled() and not jit.warm()
    how = warm.warm_kernels()
    assert jit.warm() and how == sys.argv[1], how
    # numba's route: every kernel compiled; the ahead-of-time route: numba never imported
    assert jit.compiled() if how == "numba" else "numba" not in sys.modules
    before = loaded()
    with tempfile.TemporaryDirectory() as tmp:
        dd = DataDir(tmp, broker=BrokerConfig({}), writable=True, command="test")
        node, cluster = load_identity(dd.path, None)
        state = BrokerState(dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092),
                            producer_ids=ProducerIdManager(dd.path))
        state.apis = advertised_apis(dispatch_table())
        state.create_topic("c", 1, {"cleanup.policy": "compact"})
        state.create_topic("p", 1)
        keys = [b"key-%07d" % i for i in range(4000)]       # ~100 KB a batch, 400 KB in all
        for topic in ("c", "p"):
            for codec in (compression.NONE, compression.LZ4):
                [r] = produce(state, [(topic, 0, batch(keys, codec=codec))])
                assert r.error_code == 0, r
            read_fetch(state, fetch_body(topic, 0, 0, isolation=1), 12, zero_copy_min=1 << 30).close()
        dd.close()
    new = loaded() - before
    assert not new, f"loaded after the warm-up: {sorted(f'{m}.{k}{sig}' for m, k, sig in new)}"
    assert how == "numba" or "numba" not in sys.modules, "numba imported after the warm-up"
    print("ok", len(before))
""")


@pytest.mark.slow          # a fresh interpreter loading numba: seconds
@pytest.mark.parametrize("route", aot.ROUTES)
def test_after_the_warm_up_a_first_produce_and_fetch_load_no_kernel(route):
    if route == "ahead-of-time" and aot.unusable_reason():
        pytest.skip(aot.unusable_reason())
    env = {**os.environ, **aot.route_environment(route)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, route], capture_output=True, text=True, timeout=300, env=env,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok")


STOP_SCRIPT = textwrap.dedent("""
    import os, sys, tempfile, time
    from compactlog.record import jit
    from compactlog.server import warm
    w = warm.start()
    deadline = time.monotonic() + 240
    # stop it once its scratch directory exists: mid-warm-up, as a broker stopped right after its start
    while not any(n.startswith("compactlog-warm-") for n in os.listdir(tempfile.gettempdir())):
        assert w.thread.is_alive(), "the warm-up ended before its scratch directory was seen"
        assert time.monotonic() < deadline
        time.sleep(0.001)
    w.stop()
    assert not w.thread.is_alive()
    left = [n for n in os.listdir(tempfile.gettempdir()) if n.startswith("compactlog-warm-")]
    assert not left, left
    print("ok", jit.warm())
""")


@pytest.mark.slow          # a fresh interpreter loading numba: seconds
def test_a_broker_stopped_mid_warm_up_leaves_no_scratch_directory_and_no_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COMPACTLOG_KERNELS"}
    env["TMPDIR"] = str(tmp_path)
    env["COMPACTLOG_AOT"] = "0"     # numba's route: its scratch directory lives long enough to be seen
    r = subprocess.run([sys.executable, "-c", STOP_SCRIPT], capture_output=True, text=True, timeout=300, env=env,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.startswith("ok"), r.stdout
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert not list(tmp_path.iterdir())
