"""ctypes declarations of libtictac's C ABI (include/tictac/tictac.h).

The library is found, in this order, at $TICTAC_LIB (a path), next to an
installed package (ctypes.util.find_library("tictac")), or as libtictac.so.0
on the loader's path. Everything here mirrors tictac.h one to one; the
Pythonic layer is in __init__.py.
"""
import ctypes
import ctypes.util
import os

CODES = {
    0: "ok", 1: "in_progress", 2: "no_resource", 3: "canceled", 4: "peer_lost",
    5: "timeout", 6: "invalid_argument", 7: "size_mismatch", 8: "no_device",
    9: "io_error", 10: "protocol_error", 11: "unsupported",
}
OK, IN_PROGRESS, TIMEOUT, INVALID_ARGUMENT = 0, 1, 5, 6


class Options(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_char_p),
        ("ucx_tls", ctypes.c_char_p),
        ("ucx_net_devices", ctypes.c_char_p),
        ("progress_thread", ctypes.c_int),
        ("job_token", ctypes.c_uint64),
        ("chunk_bytes", ctypes.c_size_t),
        ("window_bytes", ctypes.c_size_t),
        ("rate_gbps", ctypes.c_double),
        ("max_queued", ctypes.c_size_t),
        ("peer_timeout_ms", ctypes.c_uint32),
        ("hints_tsv", ctypes.c_char_p),
        ("graph", ctypes.c_char_p),
        ("analyzer", ctypes.c_char_p),
        ("progress_cpus", ctypes.c_char_p),
        ("max_unexpected_bytes", ctypes.c_size_t),
        ("backend_config", ctypes.c_char_p),
    ]


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int)


class SendItem(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_uint64),
        ("iteration", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("buf", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("priority", ctypes.c_int64),
        ("cb", CALLBACK),
        ("arg", ctypes.c_void_p),
    ]


_p = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)


def _load():
    path = os.environ.get("TICTAC_LIB") or ctypes.util.find_library("tictac") or "libtictac.so.0"
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"tictac: cannot load the C library ({path}): {e}; "
                          "set TICTAC_LIB to the path of libtictac.so") from None


lib = _load()
_SIGS = {
    "tictac_strerror": (ctypes.c_char_p, [ctypes.c_int]),
    "tictac_last_error": (ctypes.c_char_p, []),
    "tictac_context_create": (ctypes.c_int, [ctypes.POINTER(Options), _pp]),
    "tictac_context_destroy": (None, [_p]),
    "tictac_progress": (ctypes.c_uint, [_p]),
    "tictac_progress_wait": (ctypes.c_uint, [_p, ctypes.c_uint]),
    "tictac_event_fd": (ctypes.c_int, [_p]),
    "tictac_arm": (ctypes.c_int, [_p]),
    "tictac_register_memory": (ctypes.c_int, [_p, _p, ctypes.c_size_t]),
    "tictac_release_memory": (None, [_p, _p, ctypes.c_size_t]),
    "tictac_listen": (ctypes.c_int, [_p, ctypes.c_uint16, _pp]),
    "tictac_listener_port": (ctypes.c_uint16, [_p]),
    "tictac_accept": (ctypes.c_int, [_p, ctypes.c_int, _pp]),
    "tictac_listener_close": (None, [_p]),
    "tictac_listener_destroy": (None, [_p]),
    "tictac_connect": (ctypes.c_int, [_p, ctypes.c_char_p, ctypes.c_uint16, _pp]),
    "tictac_channel_destroy": (None, [_p]),
    "tictac_send": (ctypes.c_int, [_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_char_p, _p,
                                   ctypes.c_size_t, ctypes.c_int64, CALLBACK, _p, _pp]),
    "tictac_send_batch": (ctypes.c_int, [_p, ctypes.POINTER(SendItem), ctypes.c_size_t,
                                         ctypes.c_size_t, _pp]),
    "tictac_expect": (ctypes.c_int, [_p, ctypes.c_uint64, ctypes.c_uint32, _p, ctypes.c_size_t,
                                     CALLBACK, _p, _pp]),
    "tictac_cancel": (ctypes.c_int, [_p, _p]),
    "tictac_op_test": (ctypes.c_int, [_p]),
    "tictac_op_wait": (ctypes.c_int, [_p, ctypes.c_int]),
    "tictac_op_release": (None, [_p]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args

NO_CALLBACK = ctypes.cast(None, CALLBACK)


def last_error():
    msg = lib.tictac_last_error()
    return msg.decode(errors="replace") if msg else ""
