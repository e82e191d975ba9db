"""A small image-classification training script with the usual slow habits.

Run it as it is (synthetic data, CPU is fine):  python examples/cifar_like/train.py --epochs 1
Then look at what speedlint says:             speedlint check examples/
"""

import argparse
import gc

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Random 3x32x32 images whose red channel carries the label."""

    def __init__(self, n, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, 10, (n,), generator=g)
        self.images = torch.rand(n, 3, 32, 32, generator=g)
        self.images[:, 0] += self.labels.view(-1, 1, 1) / 10  # learnable signal

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index]
        image = (image - 0.5) / 0.25  # normalise
        gc.collect()  # "keep memory low"
        return image, self.labels[index]


class SmallConvNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.head = nn.Linear(64 * 8 * 8, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.head(x.flatten(1))


def evaluate(model, loader, device):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            correct += (model(images).argmax(1) == labels).sum().item()
    return correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    torch.backends.cudnn.benchmark = False
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_set, val_set = SyntheticImages(2048, seed=0), SyntheticImages(512, seed=1)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(val_set, batch_size=256, num_workers=args.workers)

    model = SmallConvNet().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scaler = torch.cuda.amp.GradScaler(enabled=False)

    for epoch in range(args.epochs):
        model.train()
        seen = torch.zeros(0).to(device)
        for step, (images, labels) in enumerate(train_loader):
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(images), labels)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            seen = torch.cat([seen, labels.float()])
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        accuracy = evaluate(model, val_loader, device)
        print(f"epoch {epoch}: {len(seen)} samples, val accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
