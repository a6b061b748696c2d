#!/usr/bin/env python3
"""Runs Python unittest modules and reports like a GoogleTest binary.

  gtest_runner.py MODULE.py ... [--gtest_output=json:FILE|xml:FILE]

So the Python suites count case by case in the aggregated summary line
(tools/run-tests reads GTEST_OUTPUT=json:FILE reports; `meson test` passes
--gtest_output=xml:FILE for protocol 'gtest'). Exit status 0 only when every
case passed or was skipped, and at least one ran.
"""
import importlib.util, json, os, sys, time, unittest
from xml.sax.saxutils import quoteattr


class Recorder(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.cases = []  # (suite, name, status, message, seconds)
        self._t0 = 0.0

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _add(self, test, status, msg=""):
        cls = type(test).__name__
        self.cases.append((cls, test._testMethodName, status, msg, time.monotonic() - self._t0))

    def addSuccess(self, test):
        super().addSuccess(test); self._add(test, "ok")

    def addFailure(self, test, err):
        super().addFailure(test, err); self._add(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err); self._add(test, "failed", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason); self._add(test, "skipped", reason)


def write_reports(cases, spec):
    kind, _, path = spec.partition(":")
    suites = {}
    for c in cases:
        suites.setdefault(c[0], []).append(c)
    if kind == "json":
        rep = {"testsuites": [{"name": s, "testsuite": [
            {"name": n, "status": "RUN", "time": f"{t:.3f}s",
             "result": "SKIPPED" if st == "skipped" else "COMPLETED",
             **({"failures": [{"failure": m}]} if st == "failed" else {})}
            for (_, n, st, m, t) in cs]} for s, cs in suites.items()]}
        with open(path, "w") as f:
            json.dump(rep, f, indent=1)
    elif kind == "xml":
        with open(path, "w") as f:
            f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n')
            for s, cs in suites.items():
                fails = sum(1 for c in cs if c[2] == "failed")
                f.write(f'<testsuite name={quoteattr(s)} tests="{len(cs)}" failures="{fails}">\n')
                for (_, n, st, m, t) in cs:
                    f.write(f'<testcase name={quoteattr(n)} classname={quoteattr(s)} time="{t:.3f}"')
                    if st == "ok":
                        f.write("/>\n")
                    elif st == "skipped":
                        f.write("><skipped/></testcase>\n")
                    else:
                        f.write(f"><failure message={quoteattr(m[-2000:])}/></testcase>\n")
                f.write("</testsuite>\n")
            f.write("</testsuites>\n")


def main(argv):
    spec = os.environ.get("GTEST_OUTPUT", "")
    modules = []
    for a in argv:
        if a.startswith("--gtest_output="):
            spec = a.split("=", 1)[1]
        elif not a.startswith("--gtest"):
            modules.append(a)
    suite = unittest.TestSuite()
    for path in modules:
        name = os.path.splitext(os.path.basename(path))[0]
        spec_m = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec_m)
        spec_m.loader.exec_module(mod)
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(mod))
    runner = unittest.TextTestRunner(resultclass=Recorder, verbosity=2, stream=sys.stderr)
    result = runner.run(suite)
    if spec:
        write_reports(result.cases, spec)
    ran = len(result.cases)
    return 0 if ran > 0 and result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
