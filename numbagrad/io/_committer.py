"""The commit process of :class:`~numbagrad.io.AsyncSaver`: a small interpreter (it never
imports numbagrad: it starts in ~20 ms and uses almost no CPU) that writes the files the
training process built, crash-safely: a temporary file next to the target, fsync, rename
over the target, fsync of the folder. The training process never waits for the disk and
never runs a second thread.

Why a process, and why this one does so little (measured on the digits job, a ~14 ms
epoch, 2-core machine; perf/test_bench_checkpoint.py):

* a saver *thread* that only did a finished file's fsync and rename made the epoch 5-6 ms
  longer: each time it wakes it takes the GIL and a core from the training thread at
  moments it does not choose. Another process costs the training thread nothing of that;
* a saver process that imports numbagrad and builds the file itself (the training
  process only sending the state) cost the epoch less, but the whole job ~5% more: its
  ~1 s of start-up CPU ran beside the job, and this machine's two cores share one
  physical core (any work on one slows the other).

The protocol, over a Unix socket pair (a 4 MiB buffer, so a small file is handed over in
one copy without waiting for this process):

* a request is ``<QIQ`` (save id, bytes of the target path, bytes of the file) followed
  by the path (``os.fsencode``) and the file's bytes;
* an answer is ``<Qii`` (save id, failed step, errno): step 0 done, 1 writing the
  temporary file, 2 its fsync, 3 its rename over the target. A failed save's temporary
  file is removed.

Requests that arrived together are coalesced per target: only the newest file of a target
is written, and every request is answered (the older ones with the newest's outcome:
the target holds a newer complete state). At the end of its input (the saver closed, or
the training process died) the process writes what it has read and exits. It runs at
nice +10.
"""
import os
import socket
import struct
import subprocess
import sys

REQUEST = struct.Struct("<QIQ")
ANSWER = struct.Struct("<Qii")
STEPS = {1: "write", 2: "fsync", 3: "rename"}
BUFFER = 4 << 20
_IOV_MAX = 1024    # buffers per sendmsg (POSIX's minimum IOV_MAX)
_RECV = 1 << 16    # bytes asked of one recv of answers

_MAIN = r'''
import os, secrets, select, socket, struct, sys
try:
    os.nice(10)
except (AttributeError, OSError):
    pass
REQ, ANS = struct.Struct("<QIQ"), struct.Struct("<Qii")
sock = socket.socket(fileno=int(sys.argv[1]))

def exact(n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf

def commit(dst, data):
    folder, name = os.path.split(dst)
    tmp = os.path.join(folder, ".%s.tmp-%d-%s" % (name, os.getpid(), secrets.token_hex(4)))
    step = 1
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            step = 2
            os.fsync(fd)
        finally:
            os.close(fd)
        step = 3
        os.replace(tmp, dst)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
        return step, e.errno or 0
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return 0, 0

alive = True
while alive:
    reqs = []
    while True:  # one request, waiting for it, then those already there
        try:
            i, a, n = REQ.unpack(exact(REQ.size))
            reqs.append((i, os.fsdecode(bytes(exact(a))), exact(n)))
        except (EOFError, OSError):
            alive = False
            break
        if not select.select([sock], [], [], 0)[0]:
            break
    newest = {dst: k for k, (i, dst, data) in enumerate(reqs)}
    done = {}
    for k, (i, dst, data) in enumerate(reqs):
        if newest[dst] == k:
            done[dst] = commit(dst, data)
    try:
        sock.sendall(b"".join(ANS.pack(i, *done[dst]) for i, dst, data in reqs))
    except OSError:
        break
'''


class Committer:
    """The commit process, started by the constructor. :meth:`send` hands it a file,
    :meth:`answers` reads the answers that have arrived (or waits for one)."""

    def __init__(self):
        mine, theirs = socket.socketpair()
        for sk in (mine, theirs):
            try:
                sk.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER)
                sk.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER)
            except OSError:
                pass
        try:
            self.proc = subprocess.Popen([sys.executable, "-S", "-c", _MAIN, str(theirs.fileno())],
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = mine
        self._buf = b""

    @property
    def pid(self):
        return self.proc.pid

    def send(self, i, path, parts, nbytes):
        """Hand over the file ``parts`` (bytes-like, ``nbytes`` in all) to be written at
        ``path``; raises ``OSError`` if the process is gone. One ``sendmsg`` of the parts as
        they are, as a rule (views of them are made only to resume a short write, or
        to send over ``IOV_MAX`` pieces)."""
        p = os.fsencode(path)
        head = REQUEST.pack(i, len(p), nbytes) + p
        if len(parts) < _IOV_MAX:
            n = self.sock.sendmsg([head, *parts])
            if n == len(head) + nbytes:
                return
        else:
            n = 0
        bufs = [memoryview(head)] + [memoryview(x).cast("B") for x in parts]
        k = 0
        while k < len(bufs):
            while k < len(bufs) and n >= bufs[k].nbytes:
                n -= bufs[k].nbytes
                k += 1
            if n:
                bufs[k] = bufs[k][n:]
            if k < len(bufs):
                n = self.sock.sendmsg(bufs[k:k + _IOV_MAX])

    def answers(self, timeout=0.0):
        """``[(save id, step, errno), ...]`` that arrived, waiting up to ``timeout``
        seconds (None: without limit) for the first; raises ``EOFError`` once the
        process is gone and every answer it gave was read. One ``recv`` as a rule (a
        ``select`` before it for a finite wait)."""
        sock = self.sock
        while True:
            try:
                if len(self._buf) >= ANSWER.size or timeout == 0.0:
                    data = sock.recv(_RECV, socket.MSG_DONTWAIT)
                elif timeout is None:
                    data = sock.recv(_RECV)
                else:
                    import select
                    select.select([sock], [], [], timeout)
                    data = sock.recv(_RECV, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError:
                data = b""
            if not data:
                if len(self._buf) < ANSWER.size:
                    raise EOFError
                break
            self._buf += data
            if len(data) < _RECV:
                break
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
        """End its input: it writes what it has and exits (not waited for)."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
