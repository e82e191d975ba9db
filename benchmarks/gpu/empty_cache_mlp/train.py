"""GPU scenario: allocator churn in a residual-MLP training step (SPD402, SPD403, SPD203).

A "defensive" training loop: `torch.cuda.empty_cache()` after every step (hands every cached
block back to the driver, so the next step's activations are cudaMalloc'ed again, with device
synchronisation), `zero_grad(set_to_none=False)` (a memset of every gradient per step) and
per-step helper tensors created on the CPU and then copied to the GPU.
All three fixes are safe: results stay bit-for-bit the same (tolerance 1e-5).
The model is a residual MLP on tabular features, under bfloat16 autocast.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_FEATURES = 512
WIDTH = 1024
N_BLOCKS = 12
BATCH = 4096
N_CLASSES = 100


class ResidualBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class TabularNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(N_FEATURES, WIDTH)
        self.blocks = nn.Sequential(*[ResidualBlock(WIDTH) for _ in range(N_BLOCKS)])
        self.head = nn.Linear(WIDTH, N_CLASSES)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = TabularNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    # a fixed synthetic task: the label is the argmax of a random projection of the features
    features = torch.randn(16 * BATCH, N_FEATURES).to(device)
    projection = torch.randn(N_FEATURES, N_CLASSES).to(device)
    labels = (features @ projection).argmax(dim=1)
    running = 0.0
    for step in range(300):
        idx = (step % 16) * BATCH
        x, y = features[idx : idx + BATCH], labels[idx : idx + BATCH]
        weights = torch.ones(N_CLASSES).to(device)  # class weights, rebuilt every step
        optimizer.zero_grad(set_to_none=False)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            logits = model(x)
            loss = F.cross_entropy(logits.float(), y, weight=weights, label_smoothing=0.05)
        loss.backward()
        optimizer.step()
        torch.cuda.empty_cache()  # "keeps memory low" (it does not: the next step needs it all again)
        running += loss.item()
        if step % 50 == 49:
            print(f"step {step + 1}: loss {running / 50:.4f}")
            running = 0.0


if __name__ == "__main__":
    main()
