"""GPU scenario: anomaly detection left on in a ViT training run (SPD702).

`torch.autograd.set_detect_anomaly(True)` was switched on to hunt a NaN and never switched
off: every forward op records a Python stack trace and every backward op checks its outputs
for NaN, synchronising with the GPU each time. speedlint's unsafe fix removes the call.
The model is a small Vision Transformer on synthetic 64x64 images, under bfloat16 autocast.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

IMAGE = 64
PATCH = 8
DIM = 384
DEPTH = 8
HEADS = 6
N_CLASSES = 10
BATCH = 128


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        y = attn.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self):
        super().__init__()
        n_patches = (IMAGE // PATCH) ** 2
        self.patch = nn.Conv2d(3, DIM, PATCH, stride=PATCH)
        self.cls = nn.Parameter(torch.zeros(1, 1, DIM))
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, DIM) * 0.02)
        self.blocks = nn.ModuleList(Block(DIM, HEADS) for _ in range(DEPTH))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, N_CLASSES)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.size(0), -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


def synthetic_images(n, gen):
    """Blobs whose position encodes the class, plus noise."""
    labels = torch.randint(0, N_CLASSES, (n,), generator=gen)
    yy, xx = torch.meshgrid(torch.arange(IMAGE), torch.arange(IMAGE), indexing="ij")
    cy = 12 + (labels // 5) * 40
    cx = 6 + (labels % 5) * 13
    blob = torch.exp(-((yy - cy[:, None, None]) ** 2 + (xx - cx[:, None, None]) ** 2) / 40.0)
    images = blob[:, None].repeat(1, 3, 1, 1) + 0.5 * torch.randn(n, 3, IMAGE, IMAGE, generator=gen)
    return images, labels


torch.autograd.set_detect_anomaly(True)  # TODO remove: was chasing a NaN


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = ViT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    gen = torch.Generator().manual_seed(0)
    images, labels = synthetic_images(32 * BATCH, gen)
    images, labels = images.to(device), labels.to(device)
    running = 0.0
    for step in range(400):
        idx = (step % 32) * BATCH
        x, y = images[idx : idx + BATCH], labels[idx : idx + BATCH]
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running += loss.item()
        if step % 50 == 49:
            print(f"step {step + 1}: loss {running / 50:.4f}")
            running = 0.0


if __name__ == "__main__":
    main()
