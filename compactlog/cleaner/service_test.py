"""``CleanerService``'s wait between rounds: a signal handler must run within about a second
whichever thread the kernel handed the signal to (``cleaner run``'s ^C)."""

from __future__ import annotations

import signal
import threading
import time

from .service import CleanerService


def test_a_signal_taken_by_another_thread_ends_the_wait_within_a_second():
    # the kernel may deliver a process's SIGINT to any thread (numba's, a JVM gateway's); Python
    # runs the handler on the main thread only when it next runs bytecode: a 30 s wait in one
    # piece put the handler off for the whole 30 s
    assert threading.current_thread() is threading.main_thread()
    stop = threading.Event()
    before = signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    try:
        other = threading.Thread(target=lambda: (time.sleep(0.3), signal.pthread_kill(threading.get_ident(),
                                                                                       signal.SIGUSR1)))
        began = time.monotonic()
        other.start()
        CleanerService._wait(stop, 30.0)
        took = time.monotonic() - began
        other.join()
    finally:
        signal.signal(signal.SIGUSR1, before)
    assert stop.is_set() and took < 5.0, took


def test_the_wait_lasts_its_time_when_nothing_stops_it():
    stop = threading.Event()
    began = time.monotonic()
    CleanerService._wait(stop, 0.3)
    assert 0.3 <= time.monotonic() - began < 5.0 and not stop.is_set()
