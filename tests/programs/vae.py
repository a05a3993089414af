"""A variational autoencoder in the shape of the classic VAE example (784-400-20 encoder,
20-400-784 decoder, binary cross-entropy plus the KL divergence), trained on synthetic
28x28 images in [0, 1] made with NumPy (no download).

The images are a sigmoid of a few random smooth patterns mixed with per-image weights, so
they lie near a low-dimensional manifold that a 20-dimensional latent space can learn.

Besides the usual options, it keeps the contract of ``tests/programs/harness.py``:
``--steps N`` (stop after N optimizer steps, printing ``loss <step> <value>`` for each:
the batch's loss per image), ``--dump-init PATH`` and ``--init PATH``. ``--no-shuffle``
keeps the batches in the data's own order: the shuffling permutation comes from the
framework's random stream, which differs between frameworks, so runs that are compared
use it.
"""
import argparse

import numpy as np
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


def synthetic_images(n, rng, n_patterns=6):
    """``n`` images (n, 1, 28, 28) float32 in (0, 1) and a dummy label per image."""
    yy, xx = np.mgrid[0:28, 0:28] / 27.0
    patterns = []
    for _ in range(n_patterns):
        fy, fx, py, px = rng.uniform(0.5, 2.5), rng.uniform(0.5, 2.5), rng.uniform(0, 6.3), rng.uniform(0, 6.3)
        patterns.append(np.sin(np.pi * fy * yy + py) * np.cos(np.pi * fx * xx + px))
    patterns = np.stack(patterns).reshape(n_patterns, 784)
    weights = rng.normal(0, 1.5, size=(n, n_patterns))
    logits = weights @ patterns - 1.0 + rng.normal(0, 0.3, size=(n, 784))
    images = 1.0 / (1.0 + np.exp(-logits))
    return images.reshape(n, 1, 28, 28).astype(np.float32), np.zeros(n, dtype=np.int64)


class VAE(nn.Module):
    def __init__(self, noise_seed=0):
        super(VAE, self).__init__()

        self.fc1 = nn.Linear(784, 400)
        self.fc21 = nn.Linear(400, 20)
        self.fc22 = nn.Linear(400, 20)
        self.fc3 = nn.Linear(20, 400)
        self.fc4 = nn.Linear(400, 784)
        # The reparameterization noise comes from NumPy (not torch.randn_like), so that a
        # run under torch and a run under numbagrad draw exactly the same eps.
        self.noise = np.random.default_rng(noise_seed)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        # NumPy noise moved to the tensor's device: the same eps in both frameworks.
        eps = torch.from_numpy(self.noise.standard_normal(tuple(std.shape)).astype(np.float32)).to(std.device)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')

    # see Appendix B from VAE paper:
    # Kingma and Welling. Auto-Encoding Variational Bayes. ICLR, 2014
    # https://arxiv.org/abs/1312.6114
    # 0.5 * sum(1 + log(sigma^2) - mu^2 - sigma^2)
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())

    return BCE + KLD


def train(args, model, device, train_loader, optimizer, epoch, step):
    """One epoch (or until ``args.steps`` optimizer steps in all); returns the step count."""
    model.train()
    train_loss = 0
    seen = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        if step >= args.steps:
            break
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        seen += len(data)
        optimizer.step()
        print(f"loss {step} {loss.item() / len(data):.8f}")
        step += 1
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader),
                loss.item() / len(data)))

    print('====> Epoch: {} Average loss: {:.4f}'.format(epoch, train_loss / max(seen, 1)))
    return step


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for data, _ in test_loader:
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()

    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.4f}'.format(test_loss))


def main():
    parser = argparse.ArgumentParser(description='Synthetic-image VAE example')
    parser.add_argument('--batch-size', type=int, default=64, metavar='N',
                        help='input batch size for training (default: 64)')
    parser.add_argument('--epochs', type=int, default=3, metavar='N',
                        help='number of epochs to train (default: 3)')
    parser.add_argument('--steps', type=int, default=None, metavar='N',
                        help='stop after N optimizer steps in all (default: the whole epochs)')
    parser.add_argument('--lr', type=float, default=1e-3,
                        help='Adam learning rate (default: 1e-3)')
    parser.add_argument('--no-accel', action='store_true',
                        help='disables accelerator')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--train-size', type=int, default=1024,
                        help='number of synthetic training images (default: 1024)')
    parser.add_argument('--test-size', type=int, default=256,
                        help='number of synthetic test images (default: 256)')
    parser.add_argument('--no-shuffle', action='store_true',
                        help='keep the training data in order (for comparing runs)')
    parser.add_argument('--dump-init', metavar='PATH', help='save the initial state_dict with numpy.savez')
    parser.add_argument('--init', metavar='PATH', help='load the initial state_dict from a numpy .npz')
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()

    torch.manual_seed(args.seed)

    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    print(f"Using device: {device}")

    kwargs = {'pin_memory': True} if use_accel else {}
    rng = np.random.default_rng(args.seed)
    x_train, y_train = synthetic_images(args.train_size, rng)
    x_test, y_test = synthetic_images(args.test_size, rng)
    train_loader = DataLoader(TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train)),
                              batch_size=args.batch_size, shuffle=not args.no_shuffle, **kwargs)
    test_loader = DataLoader(TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test)),
                             batch_size=args.batch_size, shuffle=False, **kwargs)

    model = VAE(noise_seed=args.seed).to(device)
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    optimizer = optim.Adam(model.parameters(), lr=args.lr)

    if args.steps is None:
        args.steps = args.epochs * len(train_loader)
    step = 0
    for epoch in range(1, args.epochs + 1):
        step = train(args, model, device, train_loader, optimizer, epoch, step)
        test(model, device, test_loader)
        with torch.no_grad():
            sample = torch.from_numpy(model.noise.standard_normal((64, 20)).astype(np.float32)).to(device)
            sample = model.decode(sample).cpu()
            print('====> Sample mean intensity: {:.4f}'.format(sample.mean().item()))
        if step >= args.steps:
            break


if __name__ == "__main__":
    main()
