"""The long-running commands' ^C (InterruptToStop): one SIGINT always ends them."""

from __future__ import annotations

import gc
import os
import signal

import pytest

from .common import InterruptToStop


def test_the_first_interrupt_asks_to_stop_and_the_second_stops_at_once():
    before = signal.getsignal(signal.SIGINT)
    with InterruptToStop() as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.stop.wait(5)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            interrupt.stop.wait(5)      # the handler runs here at the latest
            pytest.fail("a second ^C did not interrupt")
    assert signal.getsignal(signal.SIGINT) is before


def test_sigterm_asks_to_stop_and_the_handlers_are_put_back():
    before = signal.getsignal(signal.SIGTERM)
    with InterruptToStop() as interrupt:
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupt.stop.wait(5)
    assert signal.getsignal(signal.SIGTERM) is before


class _InterruptedWhileFinalized:
    """An object whose finalizer is where the main thread is when ^C comes."""

    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):           # bytecode runs here: the pending handler runs in this frame
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_that_comes_during_a_finalizer_is_not_lost():
    # Python's default handler raises KeyboardInterrupt in the finalizer, where it is printed as
    # "Exception ignored in ..." and dropped: a command looping on would never see that ^C
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        reached_the_caller = False
        try:
            _InterruptedWhileFinalized()
            gc.collect()
        except KeyboardInterrupt:
            reached_the_caller = True
        assert not reached_the_caller
    finally:
        signal.signal(signal.SIGINT, before)
    with InterruptToStop() as interrupt:
        _InterruptedWhileFinalized()
        gc.collect()
        assert interrupt.stop.is_set()


def test_keep_puts_the_handler_back_after_a_library_replaced_it():
    with InterruptToStop() as interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)      # what PySpark's SparkContext does
        interrupt.keep()
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.stop.wait(5)
