"""The Python binding's receive limit: a sender that runs past the
receiver's max_unexpected_bytes (tensors sent before their expect) is
failed, with the limit named, and learns it too (its sends fail
peer_lost instead of waiting). And backend_config, checked. Over UCX shm and tcp, two contexts in this
process, each with its progress thread."""
import contextlib, unittest

import tictac
from pairs import make_pair


class Base:
    TLS = None
    DEVICES = None

    def test_unexpected_tensors_past_the_limit_fail_the_peer(self):
        # a receives
        ab, ba = make_pair(self, self.TLS, self.DEVICES, a_opts=dict(max_unexpected_bytes=64 * 1024))
        pending = ab.expect(999, bytearray(8))
        # 4096 bytes travel eagerly (their payload is held at the receiver and
        # counted); 40 of them pass 64 KiB. None is expected.
        sends = [ba.send(i, bytes(4096)) for i in range(40)]
        with self.assertRaises(tictac.Error) as cm:
            pending.wait(30)
        self.assertEqual(cm.exception.name, "peer_lost")
        self.assertIn("max_unexpected_bytes", str(cm.exception))
        for s in sends:  # the sender learns it too: its sends past the limit fail
            with contextlib.suppress(tictac.Error):
                s.wait(30)
        self.assertIn("peer_lost", {s.status for s in sends})

    def test_backend_config(self):
        # A dict or the C ABI's text; UCX takes its names from it.
        tictac.Context(ucx_tls=self.TLS, backend_config={"TLS": self.TLS}).close()
        tictac.Context(ucx_tls=self.TLS, backend_config=f"TLS={self.TLS}").close()
        for bad in ({"": "x"}, {"A=B": "1"}, {"TLS": "tcp;x"}):
            with self.assertRaises(ValueError):
                tictac.Context(ucx_tls=self.TLS, backend_config=bad)
        with self.assertRaises(tictac.Error) as cm:
            tictac.Context(ucx_tls=self.TLS, backend_config="TLS")
        self.assertEqual(cm.exception.name, "invalid_argument")
        for bad in ({"TLS": None}, {"TLS": ["tcp"]}):
            with self.assertRaises(TypeError):
                tictac.Context(ucx_tls=self.TLS, backend_config=bad)
        tictac.Context(ucx_tls=self.TLS, backend_config={b"TLS": self.TLS.encode()}).close()
        # verbs checks its keys before it looks for a device, so this holds on
        # any host whose build has verbs ("unsupported" names a build without).
        with self.assertRaises(tictac.Error) as cm:
            tictac.Context(backend="verbs", backend_config={"windows": True, "windws": 1})
        if cm.exception.name != "unsupported":
            self.assertEqual(cm.exception.name, "invalid_argument")
            self.assertIn("unknown option 'windws'", str(cm.exception))

    def test_out_of_range_limit(self):
        for bad in (-1, 2**64):
            with self.assertRaises(ValueError):
                tictac.Context(ucx_tls=self.TLS, max_unexpected_bytes=bad)


class Shm(Base, unittest.TestCase):
    TLS = "shm"


class Tcp(Base, unittest.TestCase):
    TLS = "tcp"
    DEVICES = "lo"


if __name__ == "__main__":
    unittest.main()
