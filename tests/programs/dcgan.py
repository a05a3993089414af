"""DCGAN on small synthetic grayscale images.

The shape of the classic DCGAN example at 16x16 pixels and one channel: a generator of
transposed convolutions, batch norm and ReLU ending in Tanh, a discriminator of strided
convolutions, batch norm and LeakyReLU ending in Sigmoid, the DCGAN weight init, BCELoss
and two Adam optimizers with beta1 = 0.5, trained with the alternating D step / G step.

The "dataset" is NumPy-generated: soft bright discs at random places on a dark background,
scaled to [-1, 1] like normalized images.
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
import torch.utils.data


def make_images(n, image_size, rng):
    """``n`` images (n, 1, H, W) in [-1, 1]: a blurred disc of random centre and radius."""
    yy, xx = np.mgrid[0:image_size, 0:image_size].astype(np.float32)
    cy = rng.uniform(4, image_size - 4, size=(n, 1, 1)).astype(np.float32)
    cx = rng.uniform(4, image_size - 4, size=(n, 1, 1)).astype(np.float32)
    r = rng.uniform(2.5, 4.5, size=(n, 1, 1)).astype(np.float32)
    d = np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2)
    img = 1.0 / (1.0 + np.exp(2.0 * (d - r)))           # 1 inside the disc, 0 outside
    return (img * 2.0 - 1.0)[:, None].astype(np.float32)


# custom weights initialization called on netG and netD
def weights_init(m):
    classname = m.__class__.__name__
    if classname.find('Conv') != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find('BatchNorm') != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x 16 x 16
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, nc, ndf):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            # input is (nc) x 16 x 16
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 8 x 8
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 4 x 4
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def main():
    parser = argparse.ArgumentParser(description="DCGAN on synthetic 16x16 images")
    parser.add_argument('--steps', type=int, default=20, help='number of D+G updates')
    parser.add_argument('--batchSize', type=int, default=32, help='input batch size')
    parser.add_argument('--imageSize', type=int, default=16, help='height / width of the images')
    parser.add_argument('--nz', type=int, default=16, help='size of the latent z vector')
    parser.add_argument('--ngf', type=int, default=16)
    parser.add_argument('--ndf', type=int, default=16)
    parser.add_argument('--lr', type=float, default=0.0002, help='learning rate')
    parser.add_argument('--beta1', type=float, default=0.5, help='beta1 for adam')
    parser.add_argument('--seed', type=int, default=999, help='manual seed')
    parser.add_argument('--dump-init', metavar='PATH', help='save the initial weights (npz) and go on')
    parser.add_argument('--init', metavar='PATH', help='load initial weights (npz) before training')
    parser.add_argument('--save', metavar='PATH', help='torch.save both networks at the end')
    opt = parser.parse_args()
    print(opt)

    torch.manual_seed(opt.seed)
    # NumPy drives the data and the latent vectors z: torch and numbagrad have different
    # random generators, and drawing z from NumPy lets both frameworks see the same noise
    rng = np.random.default_rng(opt.seed)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    nz, nc = opt.nz, 1

    images = torch.from_numpy(make_images(512, opt.imageSize, rng))
    dataset = torch.utils.data.TensorDataset(images)
    # no shuffling: its order would come from the framework's own generator
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=False, drop_last=True)

    netG = Generator(nz, opt.ngf, nc).to(device)
    netG.apply(weights_init)
    netD = Discriminator(nc, opt.ndf).to(device)
    netD.apply(weights_init)
    nets = {"netG": netG, "netD": netD}
    if opt.init:
        init = np.load(opt.init)
        for name, net in nets.items():
            net.load_state_dict({k[len(name) + 1:]: torch.from_numpy(init[k])
                                 for k in init.files if k.startswith(name + ".")})
    if opt.dump_init:
        np.savez(opt.dump_init, **{f"{name}.{k}": v.detach().cpu().numpy()
                                   for name, net in nets.items() for k, v in net.state_dict().items()})
    print(netG)
    print(netD)

    criterion = nn.BCELoss()

    fixed_noise = torch.from_numpy(rng.standard_normal((16, nz, 1, 1)).astype(np.float32)).to(device)
    real_label = 1
    fake_label = 0

    # setup optimizer
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    step = 0
    epoch = 0
    while step < opt.steps:
        for i, data in enumerate(dataloader, 0):
            if step >= opt.steps:
                break
            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            # train with real
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=torch.float, device=device)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            # train with fake
            noise = torch.from_numpy(rng.standard_normal((batch_size, nz, 1, 1)).astype(np.float32)).to(device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()

            print('[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
                  % (step, opt.steps, i, len(dataloader),
                     errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            # the harness's line is the sum errD + errG (a GAN's sum need not go down,
            # but it pins the whole step for the torch / numbagrad comparison)
            print(f"loss {step} {errD.item() + errG.item():.8f}")
            print(f"lossD {step} {errD.item():.8f} lossG {step} {errG.item():.8f}")
            print(f"dx {step} {D_x:.8f} dgz {step} {D_G_z1:.8f}")
            step += 1
        epoch += 1

    with torch.no_grad():
        fake = netG(fixed_noise).detach().cpu()
    print(f"fixed-noise samples: shape {tuple(fake.shape)}, range [{fake.min().item():.3f}, {fake.max().item():.3f}]")

    if opt.save:
        # do checkpointing
        torch.save({'netG': netG.state_dict(), 'netD': netD.state_dict()}, opt.save)
        print(f"saved checkpoint to {opt.save}")


if __name__ == "__main__":
    main()
