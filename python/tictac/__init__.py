"""tictac: a priority-ordered, zero-copy tensor channel (Python binding).

A thin ctypes layer over libtictac's C ABI (include/tictac/tictac.h); the same
objects and contracts as the C++ API (docs/transport.md, docs/python.md):

    ctx = tictac.Context(ucx_tls="shm", progress_thread=True)
    ch = ctx.connect("10.0.0.2", 18600)          # or ctx.listen(port).accept()
    op = ch.send(7, tensor, priority=0)          # lower = more urgent
    op.wait()                                    # raises tictac.Error on failure

Buffers are used in place, never copied: anything with the writable buffer
protocol (bytearray, numpy arrays, array.array, memoryview) or a contiguous CPU
torch.Tensor. A `bytes` object can be sent (read-only) but not received into.
The library reads (send) or writes (expect) the buffer until the operation
completes; this module keeps it alive until then, even if the Op is dropped.

Completions: Op.wait()/Op.done(), or `on_done(status_name)`, called exactly
once from the progress context (Context.progress(), the progress thread, or a
thread inside Op.wait()), never inside send()/expect().
Priorities: `priority=None` asks the context's ordering hints (the `graph` +
`analyzer` or `hints_tsv` options), else the library's default.
"""
import ctypes
import threading

from . import _capi
from ._args import _backend_config, _buffer, _enc, _int, _ms
from ._capi import lib
from ._handle import Error, _check, _Handle

__all__ = ["Context", "Listener", "Channel", "Op", "Error"]


# Operations in flight: token -> (keepalive, on_done). The C callback removes
# its entry, so buffers outlive dropped Op objects until the library is done.
_inflight = {}
_inflight_lock = threading.Lock()
_next_token = iter(range(1, 1 << 62))


@_capi.CALLBACK
def _trampoline(arg, status):
    with _inflight_lock:
        entry = _inflight.pop(arg, None)
    if entry is not None and entry[1] is not None:
        entry[1](_capi.CODES.get(status, str(status)))


class Op:
    """One send or expect. done(), wait(timeout), status; cancel via Channel.cancel."""

    def __init__(self, handle, what):
        self._h = handle
        self._what = what

    def done(self):
        return lib.tictac_op_test(self._h) == 1

    def wait(self, timeout=None):
        """Waits (driving progress when the context has no thread); raises Error on failure."""
        rc = lib.tictac_op_wait(self._h, _ms(timeout, "wait"))
        if rc == _capi.TIMEOUT and not self.done():
            raise TimeoutError(f"tictac: {self._what} not complete after {timeout} s")
        _check(rc, self._what)

    @property
    def status(self):
        """None while pending, else the completion's status name ("ok", "canceled", ...)."""
        if not self.done():
            return None
        return _capi.CODES.get(lib.tictac_op_wait(self._h, 0))

    def __del__(self):
        if getattr(self, "_h", None):
            lib.tictac_op_release(self._h)
            self._h = None


def _batch_item(item):
    """send()'s keywords of one send_batch() item (a tuple or a dict)."""
    keys = ("tensor_id", "buf", "priority", "on_done")
    if isinstance(item, dict):
        unknown = set(item) - set(keys) - {"name"}
        if unknown or not {"tensor_id", "buf"} <= set(item):
            raise TypeError(f"a dict item needs tensor_id and buf, and takes {keys[2:]} "
                            f"and name (got {sorted(item)})")
        return item
    if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 4:
        raise TypeError("an item is (tensor_id, buf[, priority[, on_done]]) or a dict")
    return dict(zip(keys, item))


class Channel(_Handle):
    """A connection to one peer: send(), expect(), cancel(), close()."""

    _destroy = staticmethod(lambda h: lib.tictac_channel_destroy(h))

    def __init__(self, handle, ctx):
        self._own(ctypes.c_void_p(handle))
        self._ctx = ctx  # the context outlives its channels

    def _post(self, what, fn, buf, writable, on_done):
        addr, n, keep = _buffer(buf, writable)
        token = next(_next_token)
        entry = (keep, on_done)  # built outside the lock (see _trampoline)
        out = ctypes.c_void_p()

        def post(h):
            with _inflight_lock:
                _inflight[token] = entry
            rc = fn(h, addr, n, token, ctypes.byref(out))
            if rc != _capi.OK:  # no completion will come for it
                with _inflight_lock:
                    _inflight.pop(token, None)
            return rc
        # An exception after the post (an interrupt) leaves the entry: the
        # buffer then stays alive until the completion, never freed under it.
        _check(self._call(post), what)
        return Op(out.value, what)

    def send(self, tensor_id, buf, iteration=0, priority=None, name=None, on_done=None):
        """Sends buf as tensor (tensor_id, iteration); priority None = ordering hints."""
        prio = -1 if priority is None else int(priority)
        if not -1 <= prio < (1 << 32):
            raise ValueError("tictac: priority must be None or in [0, 2**32)")
        tid, it = _int(tensor_id, "tensor_id", 64), _int(iteration, "iteration", 32)
        cname = _enc(name, "name")
        return self._post(f"send of tensor {tid}", lambda h, a, n, t, o: lib.tictac_send(
            h, tid, it, cname, a, n, prio, _trampoline, t, o), buf, False, on_done)

    def send_batch(self, items, iteration=0):
        """Sends several tensors as one submission: they leave by priority, not
        by their order in items (a loop of send() may start the first before the
        last is queued). Each item is a tuple (tensor_id, buf[, priority[,
        on_done]]) or a dict of send()'s keywords (tensor_id, buf, priority,
        name, on_done). All or nothing: an error raises and sends none.
        Returns the Ops in the items' order."""
        it = _int(iteration, "iteration", 32)
        items = list(items)
        arr = (_capi.SendItem * max(1, len(items)))()
        tokens, entries = [], []
        for i, item in enumerate(items):
            try:
                kw = _batch_item(item)
                tid = _int(kw["tensor_id"], "tensor_id", 64)
                prio = -1 if kw.get("priority") is None else int(kw["priority"])
                if not -1 <= prio < (1 << 32):
                    raise ValueError("tictac: priority must be None or in [0, 2**32)")
                addr, n, keep = _buffer(kw["buf"], False)
                name = _enc(kw.get("name"), "name")
            except (TypeError, ValueError) as e:
                why = str(e).removeprefix("tictac: ")
                raise type(e)(f"tictac: batch item {i}: {why}") from None
            token = next(_next_token)
            arr[i] = _capi.SendItem(tid, it, name, addr, n, prio, _trampoline, token)
            tokens.append(token)
            entries.append((keep, kw.get("on_done")))
        outs = (ctypes.c_void_p * max(1, len(items)))()

        def post(h):
            with _inflight_lock:
                _inflight.update(zip(tokens, entries))
            rc = lib.tictac_send_batch(h, arr, len(items), ctypes.sizeof(_capi.SendItem), outs)
            if rc != _capi.OK:  # none was queued: no completion will come
                with _inflight_lock:
                    for t in tokens:
                        _inflight.pop(t, None)
            return rc
        _check(self._call(post), f"batch of {len(items)} sends")
        return [Op(outs[i], f"send of tensor {arr[i].id}") for i in range(len(items))]

    def expect(self, tensor_id, buf, iteration=0, on_done=None):
        """Receives tensor (tensor_id, iteration) straight into buf (its size must match)."""
        tid, it = _int(tensor_id, "tensor_id", 64), _int(iteration, "iteration", 32)
        return self._post(f"expect of tensor {tid}", lambda h, a, n, t, o: lib.tictac_expect(
            h, tid, it, a, n, _trampoline, t, o), buf, True, on_done)

    def cancel(self, op):
        """True if canceled (the op then completes with "canceled"); False if too
        late, or the channel is closed."""
        return self._call(lambda h: lib.tictac_cancel(h, op._h), 0) == 1


class Listener(_Handle):
    """Accepts peers on a TCP port (the bootstrap); .port is the bound port."""

    _destroy = staticmethod(lambda h: lib.tictac_listener_destroy(h))
    _exit_order = 0  # first: an accept() it wakes makes no channel after the channels' pass
    _exit_grace = 2.0  # close() wakes a blocked accept(): let it return (_close_all)

    def __init__(self, handle, ctx):
        self._own(ctypes.c_void_p(handle))
        self._ctx = ctx
        self.port = lib.tictac_listener_port(self._h)

    def accept(self, timeout=30.0):
        out, ms = ctypes.c_void_p(), _ms(timeout, "accept")
        _check(self._call(lambda h: lib.tictac_accept(h, ms, ctypes.byref(out))), "accept")
        return Channel(out.value, self._ctx)

    def close(self):
        """Stops listening: the port refuses connections, and an accept()
        blocked in another thread raises Error "canceled" at once (one in a
        handshake finishes it); the handle goes when that call returns."""
        self._call(lib.tictac_listener_close, None)  # held open: never under a destroy
        super().close()

    __del__ = close


class Context(_Handle):
    """Devices, scheduler and progress of one process (see tictac_options_t)."""

    _destroy = staticmethod(lambda h: lib.tictac_context_destroy(h))
    _exit_order = 2

    def __init__(self, backend="ucx", ucx_tls=None, ucx_net_devices=None, progress_thread=False,
                 job_token=0, chunk_bytes=0, window_bytes=0, rate_gbps=0.0, max_queued=0,
                 peer_timeout_ms=0, hints_tsv=None, graph=None, analyzer=None, progress_cpus=None,
                 max_unexpected_bytes=0, backend_config=None):
        o = _capi.Options()
        o.struct_size = ctypes.sizeof(o)
        names = ("backend", "ucx_tls", "ucx_net_devices", "hints_tsv", "graph", "analyzer",
                 "progress_cpus", "backend_config")
        self._strings = [_enc(x, n) for x, n in zip((backend, ucx_tls, ucx_net_devices,
                                                      hints_tsv, graph, analyzer, progress_cpus,
                                                      _backend_config(backend_config)), names)]
        (o.backend, o.ucx_tls, o.ucx_net_devices, o.hints_tsv, o.graph,
         o.analyzer, o.progress_cpus, o.backend_config) = self._strings
        o.progress_thread = 1 if progress_thread else 0
        o.job_token = _int(job_token, "job_token", 64)
        o.chunk_bytes = _int(chunk_bytes, "chunk_bytes", 64)
        o.window_bytes = _int(window_bytes, "window_bytes", 64)
        o.max_queued = _int(max_queued, "max_queued", 64)
        o.max_unexpected_bytes = _int(max_unexpected_bytes, "max_unexpected_bytes", 64)
        o.peer_timeout_ms = _int(peer_timeout_ms, "peer_timeout_ms", 32)
        o.rate_gbps = rate_gbps
        out = ctypes.c_void_p()
        _check(lib.tictac_context_create(ctypes.byref(o), ctypes.byref(out)), "context")
        self._own(out)

    def progress(self, timeout=None):
        """Makes progress (completions fire here); returns the number of events handled.

        timeout None: one non-blocking pass. A number of seconds: when that
        pass handled nothing, sleeps (GIL released) until the backend has
        events or the timeout passed, then makes progress once more; pacing
        (rate_gbps) shortens the sleep. A send/expect from another thread ends
        the sleep at once. Returns at once with a progress
        thread or inside an on_done callback. See tictac_progress_wait."""
        if timeout is None:
            return self._call(lib.tictac_progress, 0)
        us = int(timeout * 1e6)
        if not 0 <= us < (1 << 32):
            raise ValueError("tictac: timeout must be None or in [0, 4294) seconds")
        return self._call(lambda h: lib.tictac_progress_wait(h, us), 0)

    def event_fd(self):
        """The fd to sleep on (select/poll/asyncio) after arm() returned True; -1 if none."""
        return self._call(lib.tictac_event_fd, -1)

    def arm(self):
        """True: the caller may sleep until event_fd() is readable, then call progress().
        False: call progress() now (work pending, pacing, a progress thread, or
        inside a callback)."""
        return self._call(lib.tictac_arm, 0) == 1

    def listen(self, port=0):
        out = ctypes.c_void_p()
        port = _int(port, "port", 16)
        _check(self._call(lambda h: lib.tictac_listen(h, port, ctypes.byref(out))),
               f"listen on port {port}")
        return Listener(out.value, self)

    def connect(self, host, port):
        out = ctypes.c_void_p()
        port = _int(port, "port", 16)
        chost = _enc(host, "host")
        _check(self._call(lambda h: lib.tictac_connect(h, chost, port, ctypes.byref(out))),
               f"connect to {host}:{port}")
        return Channel(out.value, self)
