"""``numbagrad.compat.install_torch_alias()``: a PyTorch-style training script, unchanged,
runs on numbagrad in a fresh process (the real torch must not be imported there)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r'''
import sys
import numbagrad.compat
numbagrad.compat.install_torch_alias()
numbagrad.compat.install_torch_alias()          # idempotent

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.optim.lr_scheduler import StepLR
from torch.nn.modules.linear import Linear
import numbagrad

assert torch is numbagrad and nn is numbagrad.nn and Linear is numbagrad.nn.Linear
assert numbagrad.__spec__.name == "numbagrad"   # the alias does not rename numbagrad
try:
    import torch.fx                             # numbagrad has no FX: a clear error
except ModuleNotFoundError as e:
    assert "torch.fx" in str(e) and "numbagrad.fx" in str(e), e
else:
    raise AssertionError("torch.fx imported")

torch.manual_seed(0)
device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else "cpu"
X = torch.randn(128, 5)
y = (X.sum(1) > 0).long()
model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), Linear(16, 2)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
sched = StepLR(opt, 10, 0.5)
losses = []
for epoch in range(20):
    for xb, yb in DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True):
        loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    sched.step()
    losses.append(loss.item())
print(f"first {losses[0]:.4f} last {losses[-1]:.4f}")
assert losses[-1] < losses[0] / 3, losses
numbagrad.compat.uninstall_torch_alias()
assert "torch" not in sys.modules and "torch.nn" not in sys.modules
print("ok")
'''


def test_a_torch_script_runs_unchanged_under_the_alias():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("ok"), proc.stdout


def test_refuses_when_the_real_torch_is_imported():
    pytest.importorskip("torch")
    import numbagrad.compat as compat
    with pytest.raises(RuntimeError, match="the real torch is already imported"):
        compat.install_torch_alias()
