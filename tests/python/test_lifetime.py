"""Python-side lifetimes of the binding's handles: what interpreter exit does
to contexts, listeners and channels left open (closed by an atexit hook while
threads still run, so a pending op's on_done still fires, "canceled"), run in
a child interpreter so its exit can be watched."""
import os, subprocess, sys, textwrap, unittest

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


if __name__ == "__main__":
    unittest.main()
