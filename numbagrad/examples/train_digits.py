"""Train an MLP on scikit-learn's bundled 8x8 handwritten digits (no download).

``python -m numbagrad`` runs this: a 64-128-64-10 ReLU MLP, 80/20 train/test split,
Adam (lr 1e-3), batch 32, 20 epochs; it prints each epoch's mean training loss and
the final test accuracy (about 97-98%).

Flags: ``--epochs``, ``--batch-size``, ``--lr``, ``--seed``, ``--quiet`` (no progress
bar or per-epoch lines, only the final accuracy), ``--checkpoint PATH`` (save the whole
run state there after every epoch, crash-safely: an epoch's line is printed once its
checkpoint is on disk), ``--async-checkpoint`` (write those checkpoints from a background
process instead, :class:`numbagrad.io.AsyncSaver`, so the training loop does not wait for
them; a kill can then lose the newest epochs' checkpoints, never the file; every save is
written before ``main`` returns) and ``--resume`` (continue from that checkpoint if it
exists: a run killed and resumed ends bit-identical to one never stopped).
"""
import argparse
import os
import sys
import time

import numpy as np

import numbagrad as ng
from numbagrad import nn, optim
from numbagrad.nn import functional as F
from numbagrad.data import DataLoader, TensorDataset, load_digits, train_test_split


def build_model():
    """The default model: 64-128-64-10 with ReLU."""
    return nn.Sequential(
        nn.Linear(64, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )


def accuracy(model, X, y):
    """Fraction of rows of ``X`` whose arg-max logit is the label ``y``."""
    was_training = model.training
    model.eval()
    with ng.no_grad():
        logits = model(X)
    model.train(was_training)
    pred = np.argmax(logits.numpy(), axis=1)
    return float(np.mean(pred == y.numpy()))


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m numbagrad",
                                description="Train an MLP on the scikit-learn digits with numbagrad.")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="print only the final test accuracy")
    p.add_argument("--checkpoint", metavar="PATH", help="save the run's state to PATH after every epoch")
    p.add_argument("--async-checkpoint", action="store_true",
                   help="write the --checkpoint saves from a background process (the loop does not wait)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint if the file exists")
    args = p.parse_args(argv)
    if args.resume and not args.checkpoint:
        p.error("--resume needs --checkpoint PATH")
    if args.async_checkpoint and not args.checkpoint:
        p.error("--async-checkpoint needs --checkpoint PATH")
    return args


def run_state(model, opt, loader, epoch, losses):
    """Everything an exact resume needs, as plain data for ``numbagrad.save``."""
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "loader": loader.state_dict(),
            "rng": ng.get_rng_state(), "epoch": epoch, "train_losses": list(losses)}


def main(argv=None):
    """Run the training job; returns ``{"test_accuracy", "train_losses", "seconds"}``."""
    args = parse_args(argv)
    from tqdm import tqdm

    # --async-checkpoint: a background saver process (numbagrad.io.AsyncSaver), started
    # first so that its start-up overlaps the data and model set-up
    saver = ng.io.AsyncSaver() if args.async_checkpoint else None
    ng.manual_seed(args.seed)
    X, y = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, seed=args.seed)
    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=args.batch_size, shuffle=True)
    model = build_model()
    opt = optim.Adam(model.parameters(), lr=args.lr)

    t0 = time.perf_counter()
    losses = []
    start = 1
    if args.resume and os.path.exists(args.checkpoint):
        ck = ng.load(args.checkpoint)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        loader.load_state_dict(ck["loader"])
        ng.set_rng_state(ck["rng"])
        losses = list(ck["train_losses"])
        start = ck["epoch"] + 1
        if not args.quiet:
            print(f"resumed from {args.checkpoint} after epoch {ck['epoch']}", flush=True)
    try:
        for epoch in range(start, args.epochs + 1):
            model.train()
            total, count = 0.0, 0
            bar = tqdm(loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch", leave=False,
                       disable=args.quiet, file=sys.stderr)
            for xb, yb in bar:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                v = loss.item()
                total += v * len(yb)
                count += len(yb)
                bar.set_postfix(loss=f"{v:.4f}", refresh=False)
            bar.close()
            losses.append(total / count)
            if saver is not None:
                saver.save(run_state(model, opt, loader, epoch, losses), args.checkpoint)
            elif args.checkpoint:
                ng.save(run_state(model, opt, loader, epoch, losses), args.checkpoint)
            if not args.quiet:
                print(f"epoch {epoch:3d}/{args.epochs}  train loss {losses[-1]:.4f}  "
                      f"test acc {accuracy(model, X_test, y_test):.4f}", flush=True)
        if saver is not None:
            saver.wait()  # every checkpoint written (or its error raised) before main() returns
    finally:
        if saver is not None:
            saver.close()
    acc = accuracy(model, X_test, y_test)
    seconds = time.perf_counter() - t0
    print(f"test accuracy: {acc:.4f}  ({len(y_test)} test digits, {seconds:.1f} s)", flush=True)
    return {"test_accuracy": acc, "train_losses": losses, "seconds": seconds}


if __name__ == "__main__":
    main()
