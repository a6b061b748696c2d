"""The Python tests' fixture: two tictac contexts in this process joined by
a channel over UCX (`tls`, and `devices` for tcp)."""
import threading

import tictac


def make_pair(test, tls, devices=None, progress_thread=True, a_opts=None):
    """Returns (a's channel to b, b's channel to a); a gets a_opts as well.
    test.addCleanup closes both channels, the listener and both contexts."""
    opts = dict(ucx_tls=tls, ucx_net_devices=devices, progress_thread=progress_thread)
    a = tictac.Context(**opts, **(a_opts or {}))
    b = tictac.Context(**opts)
    lst = a.listen(0)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ch", lst.accept(10)))
    t.start()
    ba = b.connect("127.0.0.1", lst.port)
    t.join()
    test.addCleanup(lambda: [x.close() for x in (ba, got["ch"], lst, a, b)])
    return got["ch"], ba
