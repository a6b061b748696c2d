"""Channel.send_batch() in the Python binding, over UCX shm and tcp: the
tensors of one batch reach the receiver by priority, not by their order in
the batch (with one 64 KiB chunk in flight, the receiver's completions follow
the order they were handed out); each item's on_done fires once and the Ops
come back in the items' order; items may be tuples or dicts (with a name);
an error (a bad item, named by its index; a batch larger than max_queued)
raises and sends none of it."""
import threading, unittest

import tictac
from pairs import make_pair

CHUNK = 64 << 10


class Base:
    TLS = None
    DEVICES = None

    def pair(self, **a):
        a = dict(chunk_bytes=CHUNK, window_bytes=CHUNK, **a)
        return make_pair(self, self.TLS, self.DEVICES, True, a)

    def test_batch_leaves_by_priority(self):
        ab, ba = self.pair()
        prios = [50, 10, 40, 20, 60, 30]
        srcs = [bytes([i + 1]) * CHUNK for i in range(len(prios))]
        dsts = [bytearray(CHUNK) for _ in prios]
        arrived, sent, lock = [], [], threading.Lock()

        def note(where, i):
            def done(status):
                with lock:
                    where.append((i, status))
            return done
        exps = [ba.expect(i, dsts[i], on_done=note(arrived, i)) for i in range(len(prios))]
        # The fence: b's submissions start in order, so its tensor arriving at
        # a means b's expects are in place before any tensor of the batch lands.
        fence = ab.expect(100, bytearray(8))
        ba.send(100, bytes(8)).wait(30)
        fence.wait(30)
        items = [(i, srcs[i], prios[i], note(sent, i)) for i in range(len(prios) - 1)]
        last = len(prios) - 1  # a dict item, with send()'s keywords
        items.append(dict(tensor_id=last, buf=srcs[last], priority=prios[last],
                          name="w5", on_done=note(sent, last)))
        ops = ab.send_batch(items)
        self.assertEqual(len(ops), len(prios))
        for op in ops + exps:
            op.wait(30)
        self.assertEqual(dsts, [bytearray(s) for s in srcs])
        by_prio = sorted(range(len(prios)), key=lambda i: prios[i])
        self.assertEqual([i for i, _ in arrived], by_prio)
        self.assertEqual(sorted(sent), [(i, "ok") for i in range(len(prios))])

    def test_errors_send_nothing(self):
        ab, ba = self.pair(max_queued=4)
        buf = bytearray(b"x" * 1000)
        fired = []
        good = [(i, buf, None, fired.append) for i in range(4)]
        with self.assertRaises(TypeError) as cm:  # a read-only buffer at item 2
            ab.send_batch(good[:2] + [(2, memoryview(b"ro"))] + good[3:])
        self.assertIn("batch item 2:", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ab.send_batch([(0, buf, 1 << 40)])
        self.assertIn("batch item 0: priority", str(cm.exception))
        for bad in ((0,), 7, dict(buf=buf), dict(tensor_id=0, buf=buf, iteration=3)):
            with self.assertRaises(TypeError):
                ab.send_batch([bad])
        with self.assertRaises(tictac.Error) as cm:  # five never fit max_queued=4
            ab.send_batch(good + [(4, buf)])
        self.assertEqual(cm.exception.name, "invalid_argument")
        self.assertIn("exceeds max_queued (4)", str(cm.exception))
        self.assertEqual(ab.send_batch([]), [])
        dsts = [bytearray(1000) for _ in range(4)]
        exps = [ba.expect(i, dsts[i]) for i in range(4)]
        for op in ab.send_batch(good) + exps:  # the same ids: none was left queued
            op.wait(30)
        self.assertEqual(dsts, [buf] * 4)
        self.assertEqual(fired, ["ok"] * 4)


class Shm(Base, unittest.TestCase):
    TLS = "shm"


class Tcp(Base, unittest.TestCase):
    TLS = "tcp"
    DEVICES = "lo"


if __name__ == "__main__":
    unittest.main()
