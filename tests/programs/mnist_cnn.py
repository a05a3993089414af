"""A small convolutional classifier in the shape of the classic MNIST example, trained on
synthetic 1x28x28 "digits" made with NumPy (no download).

Each class is a bright blob at its own place on a 28x28 canvas plus a fainter second blob
and pixel noise, so a convolutional net can learn the labels in a few hundred steps.

Besides the usual options, it keeps the contract of ``tests/programs/harness.py``:
``--steps N`` (stop after N optimizer steps, printing ``loss <step> <value>`` for each),
``--dump-init PATH`` and ``--init PATH``. ``--no-shuffle`` keeps the batches in the
data's own order: the shuffling permutation comes from the framework's random stream,
which differs between frameworks, so runs that are compared use it.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, dropout=0.25):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.fc1 = nn.Linear(16 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def synthetic_digits(n, rng):
    """``n`` images (n, 1, 28, 28) float32 in [0, 1] and their labels (n,) int64."""
    labels = rng.integers(0, 10, size=n)
    angles = 2 * np.pi * np.arange(10) / 10
    centres = np.stack([14 + 8 * np.cos(angles), 14 + 8 * np.sin(angles)], axis=1)
    yy, xx = np.mgrid[0:28, 0:28]
    images = np.empty((n, 1, 28, 28), dtype=np.float32)
    for k, c in enumerate(labels):
        cy, cx = centres[c] + rng.normal(0, 1.0, size=2)
        oy, ox = centres[(c * 3 + 1) % 10]
        img = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 2.5 ** 2))
        img += 0.5 * np.exp(-((yy - oy) ** 2 + (xx - ox) ** 2) / (2 * 1.5 ** 2))
        img += rng.normal(0, 0.15, size=(28, 28))
        images[k, 0] = np.clip(img, 0, 1)
    return images, labels.astype(np.int64)


def train(args, model, device, train_loader, optimizer, epoch, step):
    """One epoch (or until ``args.steps`` optimizer steps in all); returns the step count."""
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        if step >= args.steps:
            break
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        print(f"loss {step} {loss.item():.8f}")
        step += 1
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.item()))
            if args.dry_run:
                break
    return step


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()

    test_loss /= len(test_loader.dataset)
    print('\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n'.format(
        test_loss, correct, len(test_loader.dataset),
        100. * correct / len(test_loader.dataset)))


def main():
    parser = argparse.ArgumentParser(description='Synthetic MNIST-style CNN example')
    parser.add_argument('--batch-size', type=int, default=32, metavar='N',
                        help='input batch size for training (default: 32)')
    parser.add_argument('--test-batch-size', type=int, default=128, metavar='N',
                        help='input batch size for testing (default: 128)')
    parser.add_argument('--epochs', type=int, default=3, metavar='N',
                        help='number of epochs to train (default: 3)')
    parser.add_argument('--steps', type=int, default=None, metavar='N',
                        help='stop after N optimizer steps in all (default: the whole epochs)')
    parser.add_argument('--lr', type=float, default=1.0, metavar='LR',
                        help='learning rate (default: 1.0)')
    parser.add_argument('--gamma', type=float, default=0.7, metavar='M',
                        help='learning rate step gamma (default: 0.7)')
    parser.add_argument('--dropout', type=float, default=0.25,
                        help='dropout probability (default: 0.25)')
    parser.add_argument('--no-accel', action='store_true',
                        help='disables accelerator')
    parser.add_argument('--dry-run', action='store_true',
                        help='quickly check a single pass')
    parser.add_argument('--seed', type=int, default=1, metavar='S',
                        help='random seed (default: 1)')
    parser.add_argument('--log-interval', type=int, default=10, metavar='N',
                        help='how many batches to wait before logging training status')
    parser.add_argument('--train-size', type=int, default=1024,
                        help='number of synthetic training images (default: 1024)')
    parser.add_argument('--test-size', type=int, default=256,
                        help='number of synthetic test images (default: 256)')
    parser.add_argument('--workers', type=int, default=0,
                        help='DataLoader worker processes (default: 0)')
    parser.add_argument('--no-shuffle', action='store_true',
                        help='keep the training data in order (for comparing runs)')
    parser.add_argument('--save-model', action='store_true',
                        help='for saving the current model')
    parser.add_argument('--save-path', default='mnist_cnn.pt',
                        help='where --save-model writes (default: mnist_cnn.pt)')
    parser.add_argument('--dump-init', metavar='PATH', help='save the initial state_dict with numpy.savez')
    parser.add_argument('--init', metavar='PATH', help='load the initial state_dict from a numpy .npz')
    args = parser.parse_args()

    use_accel = not args.no_accel and torch.accelerator.is_available()

    torch.manual_seed(args.seed)

    if use_accel:
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")

    train_kwargs = {'batch_size': args.batch_size, 'shuffle': not args.no_shuffle}
    test_kwargs = {'batch_size': args.test_batch_size}
    if args.workers:
        train_kwargs['num_workers'] = args.workers
    if use_accel:
        train_kwargs['pin_memory'] = True
        test_kwargs['pin_memory'] = True

    rng = np.random.default_rng(args.seed)
    x_train, y_train = synthetic_digits(args.train_size, rng)
    x_test, y_test = synthetic_digits(args.test_size, rng)
    # the usual MNIST normalisation (mean 0.1307, std 0.3081)
    x_train = (x_train - 0.1307) / 0.3081
    x_test = (x_test - 0.1307) / 0.3081
    dataset1 = TensorDataset(torch.from_numpy(x_train), torch.from_numpy(y_train))
    dataset2 = TensorDataset(torch.from_numpy(x_test), torch.from_numpy(y_test))
    train_loader = DataLoader(dataset1, **train_kwargs)
    test_loader = DataLoader(dataset2, **test_kwargs)

    model = Net(args.dropout).to(device)
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.dump_init:
        np.savez(args.dump_init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)

    if args.steps is None:
        args.steps = args.epochs * len(train_loader)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    step = 0
    for epoch in range(1, args.epochs + 1):
        step = train(args, model, device, train_loader, optimizer, epoch, step)
        test(model, device, test_loader)
        scheduler.step()
        if step >= args.steps:
            break

    if args.save_model:
        torch.save(model.state_dict(), args.save_path)


if __name__ == '__main__':
    main()
