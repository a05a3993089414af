"""Run a PyTorch-style program from ``tests/programs/`` as ``python <script>`` under real
torch, or under numbagrad through ``numbagrad.compat.install_torch_alias()`` with the
script's file unchanged, and read the losses it prints.

The contract every program here keeps (they are written in the style of common PyTorch
examples, plus these three options so that a test can compare the two frameworks):

* ``--steps N``: train N optimizer steps on synthetic data (NumPy-seeded, so both runs
  see the same batches), printing one line ``loss <step> <value>`` per step;
* ``--dump-init PATH``: after building the model(s), save the initial ``state_dict``
  values to ``PATH`` with ``numpy.savez`` (keys as in the state dict, prefixed with the
  model's name and a dot when a program has several);
* ``--init PATH``: load those values into the model(s) before training.

Randomness inside a step (dropout, the VAE's noise, the GAN's latent vectors) comes from
NumPy in the programs, or is switched off for the comparison, so that the two runs
compute the same thing.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

_ALIAS = ("import sys, runpy, numbagrad.compat\n"
          "numbagrad.compat.install_torch_alias()\n"
          "sys.argv = sys.argv[1:]\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def run(script, args, framework, timeout=300):
    """Run ``tests/programs/<script>`` with ``args`` under ``framework`` ("torch" or
    "numbagrad"); returns ``(returncode, stdout, stderr)``."""
    path = os.path.join(HERE, script)
    if framework == "torch":
        cmd = [sys.executable, path, *args]
    elif framework == "numbagrad":
        cmd = [sys.executable, "-c", _ALIAS, path, *args]
    else:
        raise ValueError(framework)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def losses(stdout):
    """The ``loss <step> <value>`` lines of a run, as a list of floats in step order."""
    found = [(int(s), float(v)) for s, v in re.findall(r"^loss (\d+) (\S+)$", stdout, flags=re.M)]
    return [v for _, v in sorted(found)]


def run_ok(script, args, framework):
    """:func:`run`, asserting a zero exit status (the output tail in the message)."""
    rc, out, err = run(script, args, framework)
    assert rc == 0, f"{script} under {framework} exited {rc}:\n{out[-2000:]}\n{err[-4000:]}"
    return out
