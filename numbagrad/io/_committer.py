"""The commit process of :class:`~numbagrad.io.AsyncSaver`: a small interpreter that makes
written temporary files durable and puts them in place (fsync, rename, folder fsync),
so that the training process never waits for the disk and never runs a second thread.

Why a process and not a thread: the digits job's epoch (~14 ms) with a saver *thread*
doing only a finished file's fsync and rename took 5-6 ms longer; with this process
doing the same, 0.6 ms longer (perf/test_bench_checkpoint.py's interleaved epochs, and
the measurements in the README's checkpoint section). Any thread of the training
process that wakes while the training thread runs costs it a GIL hand-over and a
cross-core wake; another process costs it nothing.

The protocol, over the process's stdin and stdout (pipes):

* a request is ``<QII`` (save id, bytes of the temporary path, bytes of the target
  path) followed by the two paths (``os.fsencode``);
* an answer is ``<Qii`` (save id, failed step, errno): step 0 done, 1 the fsync of the
  temporary file, 2 its rename over the target. A failed save's temporary file is
  removed.

Requests that arrive together are coalesced per target: only the newest file of a
target is committed, the older ones are removed, and every request is answered (the
older ones as done: their target holds a newer complete state). At the end of its
input (the saver closed, or the training process died) the process commits what it
has read and exits; it never imports numbagrad (it starts in ~20 ms) and runs at nice
+10.
"""
import os
import struct
import subprocess
import sys

REQUEST = struct.Struct("<QII")
ANSWER = struct.Struct("<Qii")
STEPS = {1: "fsync", 2: "rename"}

_MAIN = r'''
import os, select, struct
try:
    os.nice(10)
except (AttributeError, OSError):
    pass
REQ, ANS = struct.Struct("<QII"), struct.Struct("<Qii")

def commit(tmp, dst):
    step = 1
    try:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        step = 2
        os.replace(tmp, dst)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        return step, e.errno or 0
    try:
        fd = os.open(os.path.dirname(dst) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return 0, 0

buf = b""
alive = True
while alive:
    more = True
    while more:  # what is there now, waiting for the first bytes only
        data = os.read(0, 1 << 16)
        if not data:
            alive = False
            break
        buf += data
        more = bool(select.select([0], [], [], 0)[0])
    reqs = []
    while len(buf) >= REQ.size:
        i, a, b = REQ.unpack_from(buf)
        end = REQ.size + a + b
        if len(buf) < end:
            break
        reqs.append((i, buf[REQ.size:REQ.size + a], buf[REQ.size + a:end]))
        buf = buf[end:]
    newest = {}
    for n, (i, tmp, dst) in enumerate(reqs):
        newest[dst] = n
    out = []
    done = {}
    for n, (i, tmp, dst) in enumerate(reqs):
        if newest[dst] != n:
            try:
                os.remove(tmp)
            except OSError:
                pass
            continue
        done[dst] = commit(tmp, dst)
    for i, tmp, dst in reqs:
        out.append(ANS.pack(i, *done[dst]))
    if out:
        data = b"".join(out)
        while data:
            data = data[os.write(1, data):]
'''


class Committer:
    """The commit process, started by the constructor. :meth:`send` asks for a commit,
    :meth:`answers` reads the answers that have arrived (or waits for one)."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-S", "-c", _MAIN], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
        self._out = self.proc.stdin.fileno()
        self._in = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buf = b""

    @property
    def pid(self):
        return self.proc.pid

    def send(self, i, tmp, path):
        """Ask for the commit of ``tmp`` (written and closed) over ``path``; raises
        ``OSError`` (``BrokenPipeError``) if the process is gone."""
        a, b = os.fsencode(tmp), os.fsencode(path)
        data = REQUEST.pack(i, len(a), len(b)) + a + b
        while data:
            data = data[os.write(self._out, data):]

    def answers(self, timeout=0.0):
        """``[(save id, step, errno), ...]`` that arrived, waiting up to ``timeout``
        seconds (None: without limit) for the first; raises ``EOFError`` once the
        process is gone and every answer it gave was read."""
        import select
        if timeout != 0.0 and len(self._buf) < ANSWER.size:
            select.select([self._in], [], [], timeout)
        while True:
            try:
                data = os.read(self._in, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                if len(self._buf) < ANSWER.size:
                    raise EOFError
                break
            self._buf += data
        n = len(self._buf) // ANSWER.size
        out = [ANSWER.unpack_from(self._buf, k * ANSWER.size) for k in range(n)]
        self._buf = self._buf[n * ANSWER.size:]
        return out

    def exit_code(self, timeout=5):
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self):
        """End its input: it commits what it has and exits (not waited for)."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
