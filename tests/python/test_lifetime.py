"""Python-side lifetimes of the binding's handles: what interpreter exit does
to contexts, listeners and channels left open (closed by an atexit hook while
threads still run, so a pending op's on_done still fires, "canceled"), run in
a child interpreter so its exit can be watched; and close() while another
thread is inside a call on the same object (the handle outlives the call)."""
import os, subprocess, sys, textwrap, threading, time, unittest

import tictac
from pairs import make_pair

# The peer lives in the parent process: the child's exit then closes only the
# child's own handles, so its pending op completes "canceled" (with both ends
# in the child, closing one channel first could fail the other "peer_lost").
CHILD = textwrap.dedent("""
    import sys, threading, tictac
    a = tictac.Context(ucx_tls="shm", progress_thread=True)
    lst = a.listen(0)  # with an accept() blocked in a daemon thread: woken at exit
    def serve():
        try:
            lst.accept(None)
        except tictac.Error as e:  # "canceled" (if the thread still runs then)
            print("accept", e.name, flush=True)
    threading.Thread(target=serve, daemon=True).start()
    ab = a.connect("127.0.0.1", int(sys.argv[1]))
    dst = bytearray(64)
    def done(status):
        print("on_done", status, flush=True)
    ab.expect(5, dst, on_done=done)  # never sent: pending at exit
    sys.stdin.readline()  # the parent has accepted: exit now
    print("exiting", flush=True)
    sys.exit(0)  # nothing closed
""")


class InterpreterExit(unittest.TestCase):
    def test_open_handles_are_closed_at_exit_and_pending_ops_complete(self):
        with tictac.Context(ucx_tls="shm", progress_thread=True) as ctx:
            lst = ctx.listen(0)
            got = {}
            t = threading.Thread(target=lambda: got.setdefault("ch", lst.accept(60)))
            t.start()
            child = subprocess.Popen([sys.executable, "-c", CHILD, str(lst.port)],
                                     env=dict(os.environ), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                while t.is_alive() and child.poll() is None:  # a child that died: no 60 s wait
                    t.join(0.1)
                try:  # the child exits once this side holds the channel
                    stdout, stderr = child.communicate("go\n", timeout=120)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.communicate()
                    raise
            finally:
                lst.close()  # wakes the accept() if the child never connected
                t.join(20)
            out = subprocess.CompletedProcess(child.args, child.returncode, stdout, stderr)
            self.assertIn("ch", got, "the child never connected: " + stderr)
            got["ch"].close()
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.split()
        self.assertIn("exiting", lines, out.stdout + out.stderr)
        self.assertIn("on_done canceled", out.stdout, out.stdout + out.stderr)
        self.assertEqual(out.stdout.count("on_done"), 1, out.stdout)
        self.assertNotIn("Exception ignored", out.stderr, out.stderr)


def wait_until(pred, what):
    deadline = time.monotonic() + 10
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class CloseDuringACall(unittest.TestCase):
    """close() from one thread while another is inside a call on the object:
    the C handle must outlive that call (it was freed under it before)."""

    def test_listener_closed_while_accept_blocks(self):
        with tictac.Context(ucx_tls="shm", progress_thread=True) as ctx, \
                tictac.Context(ucx_tls="shm", progress_thread=True) as peer:
            with ctx.listen(0) as probe:  # a free port, then bound by number
                port = probe.port
            lst = ctx.listen(port)
            got = {}

            def accept():
                try:
                    got["ch"] = lst.accept(20)
                except Exception as e:  # recorded, asserted below
                    got["error"] = e

            t = threading.Thread(target=accept)
            t.start()
            wait_until(lambda: lst._users == 1, "accept() to start")
            t0 = time.monotonic()
            lst.close()  # stops listening: the blocked accept() returns now
            t.join(20)
            self.assertFalse(t.is_alive())
            self.assertLess(time.monotonic() - t0, 5, "accept() waited out its timeout")
            self.assertNotIn("ch", got)
            self.assertIsInstance(got.get("error"), tictac.Error, got)
            self.assertEqual(got["error"].name, "canceled", got["error"])
            self.assertIn("listener is closed", str(got["error"]))
            self.assertIsNone(lst._dead, "not destroyed after accept() returned")
            with self.assertRaises(tictac.Error) as cm:
                lst.accept(0.1)
            self.assertIn("listener is closed", str(cm.exception))
            # The port is free again: a new listener takes it and serves a peer.
            with ctx.listen(port) as lst2:
                t = threading.Thread(target=lambda: got.setdefault("ch", lst2.accept(20)))
                t.start()
                ba = peer.connect("127.0.0.1", port)
                t.join(20)
            ab, dst = got["ch"], bytearray(5)
            e = ab.expect(1, dst)
            ba.send(1, b"hello").wait(10)
            e.wait(10)
            self.assertEqual(dst, b"hello")
            ab.close()
            ba.close()

    def test_channel_closed_while_another_thread_sends(self):
        ab, ba = make_pair(self, "shm")
        sending, result = threading.Event(), {}

        def sender():
            i = 0
            try:
                while True:
                    result["op"] = ab.send(i, bytes(64))
                    i += 1
                    if i == 100:
                        sending.set()
            except tictac.Error as e:
                result["error"] = e

        t = threading.Thread(target=sender)
        t.start()
        self.assertTrue(sending.wait(20))
        ab.close()
        t.join(20)
        self.assertFalse(t.is_alive())
        self.assertIn("channel is closed", str(result.get("error")))
        self.assertFalse(ab.cancel(result["op"]))  # closed: "too late", not an error

    def test_context_closed_during_progress_wait(self):
        ctx = tictac.Context(ucx_tls="shm")  # caller-driven: progress(timeout) sleeps
        result = {}
        t = threading.Thread(target=lambda: result.setdefault("n", ctx.progress(2.0)))
        t.start()
        wait_until(lambda: ctx._users == 1, "progress() to start")
        ctx.close()
        self.assertIsNotNone(ctx._dead, "closed under a running progress()")
        t.join(20)
        self.assertFalse(t.is_alive())
        self.assertIn("n", result)
        self.assertIsNone(ctx._dead)
        with self.assertRaises(tictac.Error) as cm:
            ctx.listen(0)
        self.assertIn("context is closed", str(cm.exception))
        self.assertEqual((ctx.progress(), ctx.arm(), ctx.event_fd()), (0, False, -1))


if __name__ == "__main__":
    unittest.main()
