"""The Python binding (python/tictac) over UCX shm and tcp, two contexts in
this process, each with its progress thread: data intact for several sizes
and buffer kinds (bytearray, bytes, array.array, numpy, torch), callbacks
exactly once, size mismatch and cancel as errors, urgent overtakes bulk,
priorities from a model graph analyzed in process, buffers kept alive for
dropped ops, caller-driven progress with a timeout (arm, event_fd), bad
input rejected with a clear error."""
import array, gc, hashlib, json, os, tempfile, threading, time, unittest

import tictac
from pairs import make_pair

try:
    import numpy
except ImportError:
    numpy = None
try:
    import torch
except ImportError:
    torch = None


def pattern(n, seed):
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{i}".encode()).digest()
        i += 1
    return out[:n]


def chain_graph(n=6, size=256 << 10):
    """w0..w{n-1}, each consumed by one op of a chain: TAC sends w0 first."""
    ops = [{"name": "x", "kind": "compute", "time_us": 0, "inputs": []}]
    prev = "x"
    for i in range(n):
        ops.append({"name": f"w{i}", "kind": "recv", "bytes": size})
        ops.append({"name": f"op{i}", "kind": "compute", "time_us": 1000, "inputs": [prev, f"w{i}"]})
        prev = f"op{i}"
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"name": "chain", "ops": ops, "outputs": [prev]}, f)
    f.close()
    return f.name


class Base:
    TLS = None
    DEVICES = None

    def pair(self, progress_thread=True, a=None):
        return make_pair(self, self.TLS, self.DEVICES, progress_thread, a)  # (a->b, b->a)

    def test_roundtrip_sizes_and_callbacks(self):
        ab, ba = self.pair()
        fired = []
        for i, n in enumerate([0, 1, 4096, 3 << 20]):
            src, dst = pattern(n, n), bytearray(n)
            e = ba.expect(i, dst, on_done=lambda s, i=i: fired.append(("e", i, s)))
            s = ab.send(i, src, priority=5, on_done=lambda s, i=i: fired.append(("s", i, s)))
            s.wait(30)
            e.wait(30)
            self.assertEqual(dst, src, f"size {n}")
            self.assertEqual((s.status, e.status), ("ok", "ok"))
        deadline = time.monotonic() + 5
        while len(fired) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertEqual(sorted(fired), sorted([(k, i, "ok") for i in range(4) for k in "es"]))

    def test_bytes_send_into_array(self):
        ab, ba = self.pair()
        src = bytes(pattern(8 * 1000, 3))
        dst = array.array("d", [0.0]) * 1000
        e = ba.expect(1, dst, iteration=4)
        ab.send(1, src, iteration=4).wait(30)
        e.wait(30)
        self.assertEqual(dst.tobytes(), src)

    @unittest.skipIf(numpy is None, "python3-numpy not installed")
    def test_numpy_arrays(self):
        ab, ba = self.pair()
        src = numpy.arange(1 << 18, dtype=numpy.float32).reshape(512, 512)
        dst = numpy.zeros_like(src)
        e = ba.expect(2, dst)
        ab.send(2, src).wait(30)
        e.wait(30)
        self.assertTrue(numpy.array_equal(src, dst))
        with self.assertRaises(TypeError):
            ab.send(3, src[:, ::2])  # not contiguous

    @unittest.skipIf(torch is None, "python3-torch not installed")
    def test_torch_tensors(self):
        ab, ba = self.pair()
        src = torch.randn(1000, 300)
        dst = torch.empty_like(src)
        e = ba.expect(7, dst)
        ab.send(7, src).wait(30)
        e.wait(30)
        self.assertTrue(torch.equal(src, dst))
        with self.assertRaises(TypeError):
            ab.send(8, src.t())  # transposed view: not contiguous

    def test_size_mismatch_fails_both_sides(self):
        ab, ba = self.pair()
        e = ba.expect(9, bytearray(10))
        # The expect must be in place when the data comes: a tensor that
        # arrives first is acked at once (it must not hold the sender's
        # window), so its send may complete ok. b's progress thread takes
        # expects in order: once tensor 10 has landed, 9's expect is there.
        e10 = ba.expect(10, bytearray(1))
        ab.send(10, b"x").wait(30)
        e10.wait(30)
        s = ab.send(9, bytearray(20))
        for op in (e, s):
            with self.assertRaises(tictac.Error) as cm:
                op.wait(30)
            self.assertEqual(cm.exception.name, "size_mismatch")

    def test_progress_cpus(self):
        cpu = max(os.sched_getaffinity(0))
        ab, ba = self.pair(a={"progress_cpus": str(cpu)})
        src, dst = pattern(100000, 3), bytearray(100000)
        e = ba.expect(12, dst)
        ab.send(12, src).wait(30)
        e.wait(30)
        self.assertEqual(dst, src)
        with self.assertRaises(tictac.Error) as cm:
            tictac.Context(ucx_tls=self.TLS, ucx_net_devices=self.DEVICES, progress_thread=True,
                           progress_cpus="2-1")
        self.assertEqual(cm.exception.name, "invalid_argument")
        self.assertIn('progress_cpus "2-1"', str(cm.exception))

    def test_cancel_unmatched_expect(self):
        ab, ba = self.pair()
        e = ba.expect(11, bytearray(100))
        self.assertTrue(ba.cancel(e))
        with self.assertRaises(tictac.Error) as cm:
            e.wait(10)
        self.assertEqual(cm.exception.name, "canceled")

    def test_bad_buffers_and_priorities_rejected(self):
        ab, ba = self.pair()
        with self.assertRaises(TypeError):
            ba.expect(12, b"read-only")
        with self.assertRaises(ValueError):
            ab.send(12, bytearray(4), priority=1 << 40)
        # Out of the C types' range: refused, not wrapped by ctypes (to tensor 12).
        for bad in (dict(tensor_id=2**64 + 12), dict(tensor_id=12, iteration=-1)):
            with self.assertRaises(ValueError):
                ab.send(buf=bytearray(4), **bad)
        with self.assertRaises(ValueError):
            ab.send(12, bytearray(4), name="w\0x")
        with self.assertRaises(TypeError) as cm:
            ab.send(12, memoryview(b"ro"))
        self.assertIn("bytes(buf)", str(cm.exception))
        op = ba.expect(13, bytearray(4))
        with self.assertRaises(ValueError):
            op.wait(3e6)  # above the C ABI's int milliseconds (it wrapped to a negative)
        self.assertTrue(ba.cancel(op))
        if torch is not None:
            with self.assertRaises(TypeError):
                ab.send(12, torch.ones(2, dtype=torch.complex64).conj())

    def test_urgent_overtakes_bulk(self):
        # Paced (16 MiB take ~134 ms, the urgent 64 KiB ~0.5 ms): bulk is still
        # on the wire when urgent is posted, however late this thread wakes.
        ab, ba = self.pair(a=dict(chunk_bytes=64 << 10, window_bytes=128 << 10, rate_gbps=1.0))
        order = []
        bulk, bulk_dst = bytearray(16 << 20), bytearray(16 << 20)
        urgent, urgent_dst = pattern(64 << 10, 1), bytearray(64 << 10)
        eb = ba.expect(20, bulk_dst, on_done=lambda s: order.append("bulk"))
        eu = ba.expect(21, urgent_dst, on_done=lambda s: order.append("urgent"))
        sb = ab.send(20, bulk, priority=100)
        time.sleep(0.002)
        su = ab.send(21, urgent, priority=0)
        for op in (sb, su, eb, eu):
            op.wait(60)
        self.assertEqual(urgent_dst, urgent)
        self.assertEqual(order[0], "urgent", order)

    def test_priorities_from_a_graph(self):
        g = chain_graph()
        self.addCleanup(os.unlink, g)
        # Paced, so every tensor is queued while the first (explicit priority)
        # one is still on the wire; the rest then leave in the graph's order.
        ab, ba = self.pair(a=dict(graph=g, analyzer="tac", chunk_bytes=64 << 10,
                                  window_bytes=64 << 10, rate_gbps=0.5))
        order, dsts, ops = [], {}, []
        srcs = [pattern(256 << 10, i) for i in range(6)]
        for i in range(6):
            dsts[i] = bytearray(256 << 10)
            ops.append(ba.expect(100 + i, dsts[i], on_done=lambda s, i=i: order.append(i)))
        ops.append(ba.expect(99, bytearray(4 << 20)))
        ops.append(ab.send(99, bytearray(4 << 20), priority=0))  # ~67 ms on the wire
        for i in reversed(range(6)):  # posted least urgent first
            ops.append(ab.send(100 + i, srcs[i], name=f"w{i}"))
        for op in ops:
            op.wait(60)
        self.assertEqual(order, list(range(6)))
        self.assertEqual(dsts[3], srcs[3])

    def test_dropped_ops_keep_their_buffers(self):
        ab, ba = self.pair()
        done = threading.Event()
        got = []
        ba.expect(30, bytearray(1 << 20), on_done=lambda s: (got.append(s), done.set()))
        ab.send(30, pattern(1 << 20, 30))
        gc.collect()  # the Op objects and buffers are unreachable from here
        self.assertTrue(done.wait(30))
        self.assertEqual(got, ["ok"])

    def test_progress_timeout_arm_and_event_fd(self):
        ab, ba = self.pair(progress_thread=False)
        a, b = ab._ctx, ba._ctx
        self.assertGreaterEqual(b.event_fd(), 0)
        src, dst, got = pattern(1 << 20, 40), bytearray(1 << 20), []
        e = ba.expect(40, dst, on_done=got.append)
        s = ab.send(40, src)
        t0 = time.monotonic()
        while not (s.done() and e.done()):  # caller-driven, sleeping instead of spinning
            self.assertLess(time.monotonic() - t0, 30)
            a.progress(0.001)
            b.progress(0.001)
        self.assertEqual((s.status, e.status, got), ("ok", "ok", ["ok"]))
        self.assertEqual(dst, src)
        for _ in range(100000):
            if b.arm():
                break
            b.progress()
        else:
            self.fail("an idle context never armed")
        # It sleeps out the timeout; over UCX tcp a call may return 0 early
        # after an empty wake-up (documented), so a few calls may take it.
        # Such wake-ups come right after arming, so one call still sleeps long.
        t0, calls, handled, longest = time.monotonic(), 0, 0, 0.0
        while time.monotonic() - t0 < 0.2 and calls < 100:
            c0 = time.monotonic()
            handled += b.progress(max(0.0, 0.2 - (c0 - t0)))
            longest = max(longest, time.monotonic() - c0)
            calls += 1
        self.assertEqual(handled, 0)
        self.assertLess(calls, 20, "progress(timeout) did not sleep")
        self.assertGreaterEqual(longest, 0.1, f"no call slept most of the timeout ({calls} calls)")
        with self.assertRaises(ValueError):
            b.progress(-1)
        # With a progress thread: no sleeping in progress(), arm() is False.
        ab2, _ = self.pair()
        t0 = time.monotonic()
        ab2._ctx.progress(10)
        self.assertLess(time.monotonic() - t0, 1)
        self.assertFalse(ab2._ctx.arm())


class Shm(Base, unittest.TestCase):
    TLS = "shm"


class Tcp(Base, unittest.TestCase):
    TLS = "tcp"
    DEVICES = "lo"


class BadInput(unittest.TestCase):
    def test_out_of_range_options_ports_and_double_close(self):
        for bad in (dict(peer_timeout_ms=2**32), dict(chunk_bytes=-1)):
            with self.assertRaises(ValueError):
                tictac.Context(ucx_tls="shm", **bad)
        with tictac.Context(ucx_tls="shm") as ctx:
            with self.assertRaises(ValueError):
                ctx.listen(70000)  # would bind port 4464
            lst = ctx.listen(0)
            closers = [threading.Thread(target=lst.close) for _ in range(8)]
            for t in closers:
                t.start()
            for t in closers:
                t.join()
            self.assertIsNone(lst._h)

    def test_unreadable_graph_names_the_file(self):
        with self.assertRaises(tictac.Error) as cm:
            tictac.Context(graph="/nonexistent/model.json")
        self.assertEqual(cm.exception.name, "io_error")
        self.assertIn("/nonexistent/model.json", str(cm.exception))

    def test_malformed_graph_is_invalid_argument(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write('{"ops": [{"name": "a", "kind": "recv"}]}')
            f.flush()
            with self.assertRaises(tictac.Error) as cm:
                tictac.Context(graph=f.name)
        self.assertEqual(cm.exception.name, "invalid_argument")

    def test_unknown_analyzer(self):
        g = chain_graph()
        self.addCleanup(os.unlink, g)
        with self.assertRaises(tictac.Error) as cm:
            tictac.Context(graph=g, analyzer="no-such-algo")
        self.assertIn("no-such-algo", str(cm.exception))

    def test_connect_refused_is_an_error_not_a_hang(self):
        ctx = tictac.Context(ucx_tls="tcp", ucx_net_devices="lo")
        self.addCleanup(ctx.close)
        t0 = time.monotonic()
        with self.assertRaises(tictac.Error):
            ctx.connect("127.0.0.1", 1)  # nothing listens on port 1
        self.assertLess(time.monotonic() - t0, 30)


if __name__ == "__main__":
    unittest.main()
