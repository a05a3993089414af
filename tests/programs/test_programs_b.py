"""A minimal GPT (``gpt.py``) and a DCGAN (``dcgan.py``), written as PyTorch programs,
run unchanged under numbagrad's ``torch`` alias; where the real torch is installed, the
first steps of both frameworks agree from the same initial weights."""
import importlib.util
import math
import os
import re
import sys

import pytest

import numbagrad as ng

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="the real torch is not installed")

# Both frameworks compute in float32 and sum in different orders (BLAS matmuls, reductions,
# convolution kernels), so identical inputs give losses that differ in the last few of the
# ~7 significant digits; over 3 optimizer steps that stays far below 1e-4 relative (we
# measured ~1e-7), while a wrong gradient, a missed op or a different init shows up at the
# first or second step as differences of 1e-3 and more.
RTOL = 1e-4
N_COMPARE = 3

GPT_ARGS = ["--n-layer", "2", "--n-head", "2", "--n-embd", "32", "--block-size", "16", "--vocab-size", "32"]
N_GENERATE = 8
N_CONTEXT = 4       # gpt.py starts sampling from the stream's first 4 tokens


def _pairs(name, stdout):
    """``<name> <step> <value>`` pairs anywhere on a line, as a list of floats in step order."""
    found = [(int(s), float(v)) for s, v in re.findall(rf"\b{name} (\d+) (\S+)", stdout)]
    return [v for _, v in sorted(found)]


def _compare_first_losses(script, args, tmp_path):
    init = str(tmp_path / "init.npz")
    steps = ["--steps", str(N_COMPARE)]
    ref = harness.losses(harness.run_ok(script, [*args, *steps, "--dump-init", init], "torch"))
    got = harness.losses(harness.run_ok(script, [*args, *steps, "--init", init], "numbagrad"))
    assert len(ref) == len(got) == N_COMPARE, (ref, got)
    for step, (r, g) in enumerate(zip(ref, got)):
        assert math.isfinite(g) and abs(g - r) <= RTOL * abs(r), (step, r, g)


def _run_save(script, args):
    """Run ``script`` under numbagrad through its final ``torch.save``."""
    rc, out, err = harness.run(script, args, "numbagrad")
    assert rc == 0, f"{script} under numbagrad exited {rc}:\n{out[-2000:]}\n{err[-4000:]}"


# --- gpt.py -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gpt_trained():
    """One numbagrad run of gpt.py: 15 steps with dropout on, then sampling."""
    return harness.run_ok("gpt.py", [*GPT_ARGS, "--steps", "15", "--generate", str(N_GENERATE)], "numbagrad")


def test_gpt_trains_under_numbagrad(gpt_trained):
    losses = harness.losses(gpt_trained)
    assert len(losses) == 15 and all(math.isfinite(v) for v in losses), losses
    # starts near log(32) = 3.47; the repeating patterns are learnable
    assert losses[0] > 3.0, losses
    assert sum(losses[-3:]) / 3 < losses[0] - 0.5, losses


def test_gpt_generate_gives_tokens_in_range(gpt_trained):
    lines = [ln for ln in gpt_trained.splitlines() if ln.startswith("tokens ")]
    assert len(lines) == 1, gpt_trained[-2000:]
    tokens = [int(t) for t in lines[0].split()[1:]]
    assert len(tokens) == N_CONTEXT + N_GENERATE, tokens
    assert all(0 <= t < 32 for t in tokens), tokens


@needs_torch
def test_gpt_first_losses_match_torch(tmp_path):
    _compare_first_losses("gpt.py", [*GPT_ARGS, "--dropout", "0"], tmp_path)


def test_gpt_saves_a_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    _run_save("gpt.py", [*GPT_ARGS, "--steps", "1", "--save", str(ckpt)])
    ck = ng.load(ckpt)  # what the script saved, read back: the model, AdamW's state, argparse's vars
    assert set(ck) == {"model", "optimizer", "model_args", "iter_num"} and ck["iter_num"] == 1
    assert all(isinstance(v, ng.Tensor) for v in ck["model"].values()) and len(ck["model"]) > 10
    assert sorted(ck["optimizer"]["state"]) == list(range(len(ck["optimizer"]["state"])))  # int keys stay ints
    assert all(isinstance(s["exp_avg"], ng.Tensor) for s in ck["optimizer"]["state"].values())


# --- dcgan.py -----------------------------------------------------------------------------

def test_dcgan_trains_under_numbagrad():
    out = harness.run_ok("dcgan.py", ["--steps", "10"], "numbagrad")
    losses = harness.losses(out)            # errD + errG per step
    d_real = _pairs("dx", out)              # D's mean output on the real batch, per step
    assert len(losses) == len(d_real) == 10, out[-2000:]
    assert all(math.isfinite(v) for v in losses + d_real), (losses, d_real)
    # the sum of a GAN's losses need not fall; what reliably happens in the first steps is
    # that D learns to tell the (easy) real discs from G's noise: D(x) starts near 0.5 and
    # rises (by 0.12 to 0.2 over 10 steps for seeds we tried)
    assert 0.3 < d_real[0] < 0.7, d_real
    assert sum(d_real[-3:]) / 3 > d_real[0] + 0.05, d_real
    assert "fixed-noise samples: shape (16, 1, 16, 16)" in out


@needs_torch
def test_dcgan_first_losses_match_torch(tmp_path):
    # no dropout in a DCGAN; the data and the latent vectors come from NumPy in the script
    _compare_first_losses("dcgan.py", [], tmp_path)


def test_dcgan_saves_a_checkpoint(tmp_path):
    ckpt = tmp_path / "netGD.pth"
    _run_save("dcgan.py", ["--steps", "1", "--save", str(ckpt)])
    ck = ng.load(ckpt)
    assert set(ck) == {"netG", "netD"}
    assert any(k.endswith("running_mean") for k in ck["netG"]) and all(isinstance(v, ng.Tensor) for v in ck["netD"].values())
