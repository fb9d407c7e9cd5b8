"""The Work objects of backend "lpmpi" and the thread that completes their futures.

Every call of the process group (lpmpi/torch/_group.py) returns a ``Work`` at once; ``wait()``
completes it in the calling thread (no thread hop: the common ``async_op=False`` path costs one
lpmpi request), ``get_future()`` hands the request to one completer thread that completes the
future when the request does (DDP chains its buckets on those futures).  The DDP hooks of
``lpmpi.torch`` complete their futures through the same thread (``_completer``).

A Work's requests are lpmpi requests, mpi4py requests (MPI's own calls: send/recv, barrier),
other Works (the coalesced forms) and ``_Keep`` (a buffer kept alive until its work completes).
"""

from __future__ import annotations

import datetime
import queue
import threading
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

import lpmpi


# ---- completing futures: one thread waits for the requests whose future was asked for ----

class _Completer:
    """A daemon thread that waits for requests in the order they were handed over (the GIL
    released while it waits) and completes their futures."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, wait, fut: torch.futures.Future, value: Any) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
        self._q.put((wait, fut, value))

    def stop(self) -> None:
        """Let the thread finish its queue and end (at exit: a thread still running into the
        interpreter's shutdown may end the process in torch's C++ with std::terminate)."""
        with self._lock:
            t, self._thread = self._thread, None
        if t is not None and t.is_alive():
            self._q.put(None)
            t.join()

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            wait, fut, value = item
            try:
                wait()
            except BaseException as e:  # noqa: BLE001  (the future carries it to its waiter)
                fut.set_exception(e)
                continue
            fut.set_result(value)


_completer = _Completer("lpmpi-torch-work")


class _Work(dist.Work):
    """The requests of one torch call (lpmpi requests and/or mpi4py requests), and what runs
    after them (copies back into the caller's tensors).  ``result`` is what ``get_future()``
    completes with: the output tensors."""

    def __init__(self, reqs: Sequence[Any], result: list[torch.Tensor], after=None,
                 timeout: float = 0.0) -> None:
        super().__init__()
        self._reqs = list(reqs)
        self._result = result
        self._after = after
        self._timeout = timeout
        self._done = False
        self._exc: BaseException | None = None
        self._lock = threading.Lock()      # the caller's wait against the completer thread's
        self._fut: torch.futures.Future | None = None

    def _finish(self) -> None:
        with self._lock:
            if self._done:
                if self._exc is not None:
                    raise self._exc
                return
            try:
                for r in self._reqs:
                    _wait_one(r, self._timeout)
                if self._after is not None:
                    self._after()
            except BaseException as e:
                self._exc = e
                self._done = True
                raise
            self._done = True

    def wait(self, timeout: datetime.timedelta | None = None) -> bool:
        self._finish()
        return True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if all(_test_one(r) for r in self._reqs):
            self._finish()
            return True
        return False

    def is_success(self) -> bool:
        return self._done and self._exc is None

    def exception(self):
        return self._exc

    def result(self) -> list[torch.Tensor]:
        self._finish()
        return self._result

    def get_future(self) -> torch.futures.Future:
        with self._lock:
            if self._fut is None:
                self._fut = torch.futures.Future()
                if self._done and self._exc is None:
                    self._fut.set_result(self._result)
                elif self._done:
                    self._fut.set_exception(self._exc)
                else:
                    _completer.submit(self._finish, self._fut, self._result)
            return self._fut

    def synchronize(self) -> None:
        self._finish()


def _test_one(r) -> bool:
    if isinstance(r, dist.Work):
        return r.is_completed()
    return r.test() if isinstance(r, lpmpi.Request) else r.Test()


def _wait_one(r, timeout: float) -> None:
    if isinstance(r, _Work):
        r._finish()
    elif isinstance(r, dist.Work):
        r.wait()
    elif isinstance(r, lpmpi.Request):
        r.wait()           # lpmpi's watchdog (LPMPI_TIMEOUT / the group's timeout) bounds it
    elif timeout > 0:      # MPI's own calls: poll, so that a lost peer raises
        import time
        end = time.monotonic() + timeout
        while not r.Test():
            if time.monotonic() > end:
                raise lpmpi.LPError(f"lpmpi.torch: an MPI operation of this process group was not "
                                    f"complete after {timeout:g} s (the group's timeout); the "
                                    f"communicator is unusable now")
            time.sleep(0)
    else:
        r.Wait()


class _Done(dist.Work):
    """The Work of a call the caller waits for at once (complete before it is returned)."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def is_success(self) -> bool:
        return True

    def get_future(self) -> torch.futures.Future:
        f = torch.futures.Future()
        f.set_result([])
        return f


_DONE = _Done()


class _Keep:
    """A buffer kept alive until its work completes (a request that is always complete)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def Test(self) -> bool:
        return True

    def Wait(self) -> None:
        return None
