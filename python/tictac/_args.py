"""Arguments crossing into the C ABI, checked: ctypes wraps out-of-range
integers silently (2**64 + 7 would reach the library as tensor 7), so every
integer is range-checked against its C type, timeouts against the ABI's int
milliseconds, strings for NUL bytes, and buffers for what the library can use
in place (C-contiguous memory, CPU torch tensors whose memory is their value).
"""
import ctypes
import operator


def _enc(s, what="string"):
    """s (str or bytes) as a C string; None stays NULL."""
    if s is None:
        return None
    b = bytes(s) if isinstance(s, (bytes, bytearray)) else str(s).encode()
    if b"\0" in b:
        raise ValueError(f"tictac: {what} holds a NUL byte")
    return b


def _int(value, what, bits, signed=False):
    """value as an integer that fits the C type (ctypes would wrap it silently)."""
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"tictac: {what} must be an integer, got {type(value).__name__}") from None
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    if not lo <= v < hi:
        raise ValueError(f"tictac: {what} {v} is outside [{lo}, {hi})")
    return v


_MAX_WAIT_S = (2**31 - 1) // 1000  # the C ABI's int milliseconds


def _ms(timeout, what):
    """A timeout in seconds (None: no limit) as the C ABI's int milliseconds."""
    if timeout is None:
        return -1
    t = float(timeout)
    if t != t or t > _MAX_WAIT_S:
        raise ValueError(f"tictac: {what} timeout {timeout} s: give at most {_MAX_WAIT_S} s, "
                         "or None to wait without limit")
    return max(0, int(t * 1000))


def _buffer(obj, writable):
    """(address, nbytes, keepalive) of obj's memory, without copying."""
    if hasattr(obj, "data_ptr") and hasattr(obj, "element_size"):  # torch.Tensor
        if obj.device.type != "cpu" or not obj.is_contiguous():
            raise TypeError("tictac: a torch tensor must be contiguous and on the CPU")
        if any(getattr(obj, f, lambda: False)() for f in ("is_conj", "is_neg")):
            raise TypeError("tictac: a lazily conjugated/negated tensor's memory is not its "
                            "value; call .resolve_conj().resolve_neg() first")
        return obj.data_ptr(), obj.numel() * obj.element_size(), obj
    if isinstance(obj, bytes):
        if writable:
            raise TypeError("tictac: cannot receive into bytes (read-only); use a bytearray")
        return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value, len(obj), obj
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise TypeError("tictac: the buffer must be C-contiguous")
    if mv.readonly:
        raise TypeError("tictac: the buffer is read-only; " + (
            "pass a writable one (e.g. bytearray)" if writable else
            "only bytes can be sent read-only: pass bytes(buf) or a writable buffer"))
    mv = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    if mv.nbytes == 0:
        return None, 0, obj
    view = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return ctypes.addressof(view), mv.nbytes, (obj, mv, view)


def _backend_config(cfg):
    """Backend options (a dict, or the C ABI's "key=value;..." text) as that text."""
    if cfg is None or isinstance(cfg, (str, bytes, bytearray)):
        return cfg

    def text(x):
        if isinstance(x, bool):
            return "1" if x else "0"
        if isinstance(x, (bytes, bytearray)):
            return bytes(x).decode()
        if isinstance(x, (str, int, float)):
            return str(x)
        raise TypeError(f"tictac: backend_config takes str, bytes or numbers, got {type(x).__name__}")

    pairs = []
    for k, v in dict(cfg).items():
        k, v = text(k), text(v)
        if not k or "=" in k or ";" in k or ";" in v:
            raise ValueError(f"tictac: backend_config {k!r}: {v!r}: a key must be non-empty "
                             "without '=' or ';', a value without ';'")
        pairs.append(f"{k}={v}")
    return ";".join(pairs)
