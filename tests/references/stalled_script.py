"""An example script run in a subprocess that stalls in a chosen function, for interrupt tests: the test signals it
at a known point of its work (mid-write, mid-simulation) instead of after a guessed delay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

STALLED = "STALLED-FOR-THE-TEST"
"""The line the child prints (flushed) once it sits in the stalled function."""

_LAUNCHER = f"""
import importlib, runpy, sys, time
module_name, attribute, calls_before, script = sys.argv[1:5]
module = importlib.import_module(module_name)
original = getattr(module, attribute)
calls = [0]

def stall(*args, **kwargs):
    calls[0] += 1
    if calls[0] <= int(calls_before):
        return original(*args, **kwargs)
    print({STALLED!r}, flush=True)
    while True:
        time.sleep(3600)

setattr(module, attribute, stall)
sys.argv = [script, *sys.argv[5:]]
runpy.run_path(script, run_name="__main__")
"""


@dataclass
class Stopped:
    """How a stalled script ended after the signal."""

    returncode: int
    stdout: str
    stderr: str

    def error_lines(self) -> list[str]:
        """stderr without blank lines and Warp's missing-CUDA notice."""
        return [line for line in self.stderr.splitlines() if line.strip() and "CUDA driver" not in line]


def run_until_stalled_then_signal(
    script: Path, target: str, args: list[str], sig: int, *, calls_before: int = 0, timeout_s: float = 300
) -> Stopped:
    """Runs ``script`` with ``args`` (as ``python script args``) where ``target`` (``"module.attribute"``, e.g.
    ``"sim.audit.plot_timeline"``) is replaced by a function that lets ``calls_before`` calls through and then
    sleeps; sends ``sig`` once the child sleeps there and returns how the child ended.

    The child gets the default SIGINT disposition (a shell's background jobs inherit SIGINT ignored, and Python then
    raises no KeyboardInterrupt). Raises AssertionError when the child ends before it reaches the stall.
    """
    module, _, attribute = target.rpartition(".")
    with tempfile.TemporaryFile("w+") as err:  # a file, not a pipe: a chatty child cannot fill it and block
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, module, attribute, str(calls_before), str(script), *args],
            cwd=Path(script).resolve().parents[1],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        watchdog = threading.Timer(timeout_s, proc.kill)
        watchdog.start()
        try:
            lines = []
            for line in proc.stdout:
                lines.append(line)
                if line.strip() == STALLED:
                    break
            else:
                proc.wait()
                err.seek(0)
                raise AssertionError(f"{script} ended (status {proc.returncode}) before {target}:\n{err.read()}")
            proc.send_signal(sig)
            rest, _ = proc.communicate(timeout=timeout_s)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return Stopped(proc.returncode, "".join(lines) + rest, err.read())
