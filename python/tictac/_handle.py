"""The binding's error type and its owned C handles (Channel, Listener and
Context derive from _Handle): close once, never under a running call, and at
interpreter exit."""
import atexit
import threading
import time
import weakref

from . import _capi


class Error(RuntimeError):
    """A failed call or operation: .code (int, tictac.h) and .name ("peer_lost", ...)."""

    def __init__(self, code, message):
        self.code = code
        self.name = _capi.CODES.get(code, str(code))
        super().__init__(f"{self.name}: {message}" if message else self.name)


def _check(rc, what):
    if rc != _capi.OK:
        raise Error(rc, f"{what}: {_capi.last_error()}")


# Guards every _Handle's _h, _users and _dead.
_close_lock = threading.Lock()


class _Handle:
    """An owned C handle: close() (also on `with` exit, on collection and at
    interpreter exit) destroys it once with the class's _destroy function.

    Every call goes through _call(), which holds the handle open: a close()
    from another thread meanwhile returns at once, later calls raise Error
    ("... is closed"), and the handle is destroyed when the last call in
    progress returns (a progress() waits out its timeout; a Listener's close()
    first wakes its accept()), so the C object is never freed under a running
    call."""

    _h = None
    _users = 0  # calls in progress (under _close_lock)
    _dead = None  # the handle close() left to the last of them
    _exit_order = 1  # at exit: listeners (0), then channels (1), then contexts (2)
    _exit_grace = 0.0  # at exit, seconds a call still in progress gets to return after close()

    def _own(self, handle):
        self._h = handle
        _live.add(self)

    _CLOSED = object()

    def _call(self, fn, if_closed=_CLOSED):
        """fn(handle) with the handle held open; on a closed object returns
        if_closed, or raises Error when none is given."""
        with _close_lock:  # nothing that allocates much (a GC pass may close())
            h = self._h
            if h:
                self._users += 1
        if not h:
            if if_closed is not _Handle._CLOSED:
                return if_closed
            raise Error(_capi.INVALID_ARGUMENT, f"{type(self).__name__.lower()} is closed")
        try:
            return fn(h)
        finally:
            with _close_lock:
                self._users -= 1
                dead = self._dead if self._users == 0 else None
                if dead:
                    self._dead = None
            if dead:
                type(self)._destroy(dead)

    def close(self):
        # Under a lock: two threads closing at once destroy it once.
        with _close_lock:
            h, self._h = self._h, None
            if h and self._users > 0:
                self._dead, h = h, None  # destroyed by the last call in progress
        if h:
            type(self)._destroy(h)

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Every open Channel, Listener and Context, closed at interpreter exit while
# threads still run: pending ops then complete ("canceled") through callbacks
# that can still take the GIL, instead of dying inside interpreter teardown.
_live = weakref.WeakSet()


@atexit.register
def _close_all():
    for h in sorted(list(_live), key=lambda h: h._exit_order):
        h.close()
        # A call close() woke (a Listener's accept()) returns now and destroys
        # the handle (the GIL is free while this sleeps): a listener holds its
        # context, which would else outlive its own close(), and its pending
        # ops' callbacks meet interpreter teardown.
        deadline = time.monotonic() + h._exit_grace
        while h._dead is not None and time.monotonic() < deadline:
            time.sleep(0.001)
