"""Python-side lifetimes of the binding's handles: what interpreter exit does
to contexts, listeners and channels left open (closed by an atexit hook while
threads still run, so a pending op's on_done still fires, "canceled"), run in
a child interpreter so its exit can be watched; and close() while another
thread is inside a call on the same object (the handle outlives the call)."""
import os, subprocess, sys, textwrap, threading, time, unittest

import tictac
from pairs import make_pair

CHILD = textwrap.dedent("""
    import sys, threading, tictac
    a = tictac.Context(ucx_tls="shm", progress_thread=True)
    b = tictac.Context(ucx_tls="shm", progress_thread=True)
    lst = b.listen(0)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("ch", lst.accept(30)))
    t.start()
    ab = a.connect("127.0.0.1", lst.port)
    t.join()
    ba = got["ch"]
    dst = bytearray(64)
    def done(status):
        print("on_done", status, flush=True)
    ba.expect(5, dst, on_done=done)  # never sent: pending at exit
    print("exiting", flush=True)
    sys.exit(0)  # nothing closed
""")


class InterpreterExit(unittest.TestCase):
    def test_open_handles_are_closed_at_exit_and_pending_ops_complete(self):
        env = dict(os.environ)
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                             text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.split()
        self.assertIn("exiting", lines, out.stdout + out.stderr)
        self.assertIn("on_done canceled", out.stdout, out.stdout + out.stderr)
        self.assertEqual(out.stdout.count("on_done"), 1, out.stdout)
        self.assertNotIn("Exception ignored", out.stderr, out.stderr)


class CloseDuringACall(unittest.TestCase):
    def test_listener_closed_while_accept_blocks(self):
        with tictac.Context(ucx_tls="shm") as ctx:
            lst = ctx.listen(0)
            port, got = lst.port, {}

            def accept():
                try:
                    lst.accept(1.5)
                except (tictac.Error, TimeoutError) as e:
                    got["error"] = e

            t = threading.Thread(target=accept)
            t.start()
            time.sleep(0.3)  # inside tictac_accept
            t0 = time.monotonic()
            lst.close()
            self.assertLess(time.monotonic() - t0, 0.5, "close() waited for accept()")
            with self.assertRaises(tictac.Error) as cm:
                lst.accept(0.1)
            self.assertIn("closed", str(cm.exception))
            with self.assertRaises(tictac.Error):  # still listening: accept() runs on
                ctx.listen(port).close()
            t.join(10)
            self.assertFalse(t.is_alive())
            self.assertIn("error", got)  # its timeout
            ctx.listen(port).close()  # the first listener is gone now

    def test_channel_closed_while_another_thread_sends(self):
        ab, ba = make_pair(self, "shm")
        errors, stop = [], threading.Event()

        def sender():
            i = 0
            while not stop.is_set():
                try:
                    ab.send(i, bytes(64))
                except tictac.Error as e:
                    errors.append(e)
                    return
                i += 1

        t = threading.Thread(target=sender)
        t.start()
        time.sleep(0.2)
        ab.close()
        t.join(10)
        stop.set()
        self.assertFalse(t.is_alive())
        self.assertTrue(errors and "closed" in str(errors[0]), errors)

    def test_context_closed_during_progress_wait(self):
        ctx = tictac.Context(ucx_tls="shm")  # caller-driven: progress() sleeps
        t = threading.Thread(target=lambda: ctx.progress(1.0))
        t.start()
        time.sleep(0.2)
        ctx.close()  # destroyed when progress() returns
        t.join(10)
        self.assertFalse(t.is_alive())
        with self.assertRaises(tictac.Error):
            ctx.listen(0)


if __name__ == "__main__":
    unittest.main()
