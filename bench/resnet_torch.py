#!/usr/bin/env python3
"""ResNet-18 in torchvision's layout, in PyTorch: the twin of examples/resnet.cpp.

`resnet18(num_classes)` is torchvision.models.resnet18 written out with
torch alone (the same modules, names, shapes and initialisation:
kaiming_normal fan_out for the convolutions, BatchNorm weight 1 and bias 0,
nn.Linear's default for fc), so that this script, the parity fixture
(tests/parity/make_resnet18_fixture.py) and the benchmark
(bench/compare_resnet.py) need no torchvision; where torchvision is
installed, `--check-torchvision` compares the state_dicts' names and shapes.

Run as a script it trains as examples/resnet.cpp trains: Fashion-MNIST
padded to 32×32 (2 pixels of zeros each side), its one channel repeated to
three, pixels in [0, 1]; a 10-class head; Adam(1e-3) on cross-entropy,
batches of 32 drawn from a fresh permutation each epoch (partial batches
dropped), --limit N training images (the first N), then the test
accuracy. Prints one JSON line: model, steps, seconds (training only),
images, test_accuracy.

  python3 bench/resnet_torch.py --epochs 1 --threads 2 [--limit 10000] [--steps N]
"""
import argparse
import json
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision.models.ResNet for BasicBlock (no zero_init_residual, groups 1, width 64)."""

    def __init__(self, layers=(2, 2, 2, 2), num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _make_layer(self, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride=stride, bias=False),
                                       nn.BatchNorm2d(planes))
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18(num_classes=1000):
    return ResNet((2, 2, 2, 2), num_classes)


def check_torchvision():
    import torchvision
    ours = {k: tuple(v.shape) for k, v in resnet18().state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in torchvision.models.resnet18().state_dict().items()}
    assert list(ours) == list(theirs) and ours == theirs, "state_dicts differ from torchvision's"
    print(f"same {len(ours)} names and shapes as torchvision {torchvision.__version__}'s resnet18")


def fashion_mnist_32(root, split):
    """(N, 3, 32, 32) Float32 images in [0, 1] (padded, channel repeated) and Int64 labels."""
    from fashion_mnist_torch import load
    x, y = load(root, split)
    x = torch.nn.functional.pad(x.reshape(-1, 1, 28, 28), (2, 2, 2, 2))
    return x.expand(-1, 3, -1, -1).contiguous(), y


def main():
    from fashion_mnist_torch import default_data
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batchsize", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--limit", type=int, default=60000, help="train on the first N images")
    p.add_argument("--steps", type=int, default=0, help="stop after N steps (0: the epochs)")
    p.add_argument("--test", type=int, default=10000, help="test on the first N test images")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=default_data())
    p.add_argument("--check-torchvision", action="store_true")
    a = p.parse_args()
    if a.check_torchvision:
        check_torchvision()
        return
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = fashion_mnist_32(a.data, "train")
    xte, yte = fashion_mnist_32(a.data, "test")
    xtr, ytr = xtr[:a.limit], ytr[:a.limit]
    xte, yte = xte[:a.test], yte[:a.test]
    model = resnet18(10)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    lossf = nn.CrossEntropyLoss()
    n, b = len(xtr), a.batchsize
    steps, t0, window, seen = 0, time.perf_counter(), 0.0, 0
    done = False
    model.train()
    for _ in range(a.epochs):
        perm = torch.randperm(n)
        for i in range(0, n - b + 1, b):
            idx = perm[i:i + b]
            opt.zero_grad(set_to_none=True)
            loss = lossf(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            steps += 1
            window += loss.item()
            seen += 1
            if steps % 100 == 0:
                print(f"step {steps:5d}  loss {window / seen:.4f}  ({time.perf_counter() - t0:.0f} s)",
                      file=sys.stderr, flush=True)
                window, seen = 0.0, 0
            if steps == a.steps:
                done = True
                break
        if done:
            break
    seconds = time.perf_counter() - t0
    model.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(xte), 500):
            right += (model(xte[i:i + 500]).argmax(1) == yte[i:i + 500]).sum().item()
    print(json.dumps({"model": "resnet18_torch", "steps": steps, "seconds": round(seconds, 2), "images": n,
                      "test_accuracy": right / len(xte), "torch": torch.__version__, "threads": a.threads}))


if __name__ == "__main__":
    main()
