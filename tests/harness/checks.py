"""Soft checks: a scenario goes on after a failed check, so one run names every failure, and the
number of checks each module made stays visible (a check that silently stopped running shows as a
smaller count)."""

import time


class Checks:
    def __init__(self, label):
        self.label = label
        self.passed = 0
        self.failures = []

    def log(self, text):
        print(f"{self.label} | {time.strftime('%H:%M:%S')} {text}", flush=True)

    def __call__(self, ok, what, why=""):
        """Records one check; returns `ok` so a caller can skip what depends on it."""
        if ok:
            self.passed += 1
            self.log(f"ok   {what}")
        else:
            self.failures.append(f"{what}: {why}" if why else what)
            self.log(f"FAIL {what}" + (f": {why}" if why else ""))
        return bool(ok)

    check = __call__

    @property
    def failed(self):
        return len(self.failures)
