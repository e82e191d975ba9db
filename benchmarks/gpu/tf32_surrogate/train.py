"""GPU scenario: a float32 surrogate model with TF32 never enabled (SPD304).

A physics-surrogate MLP is trained in float32 on purpose (no autocast), but since torch 1.12
float32 matmuls run in full IEEE FP32 unless TF32 is switched on: the tensor cores sit idle.
speedlint's unsafe fix sets the float32 matmul precision to "high" (TF32) at the start of the
run (this scenario selects SPD304 only, leaving SPD301's AMP codemod out).
Synthetic data: the target is a smooth nonlinear map of the inputs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N_IN = 256
N_OUT = 256
WIDTH = 2048
DEPTH = 6
BATCH = 8192


class Surrogate(nn.Module):
    def __init__(self):
        super().__init__()
        layers = [nn.Linear(N_IN, WIDTH), nn.SiLU()]
        for _ in range(DEPTH - 2):
            layers += [nn.Linear(WIDTH, WIDTH), nn.SiLU()]
        layers.append(nn.Linear(WIDTH, N_OUT))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def make_data(n, gen):
    x = torch.rand(n, N_IN, generator=gen) * 2 - 1
    w = torch.randn(N_IN, N_OUT, generator=gen) / N_IN**0.5
    y = torch.sin(3 * x @ w) + 0.1 * (x @ w) ** 2
    return x, y


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = Surrogate().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    x_all, y_all = make_data(8 * BATCH, gen)
    x_all, y_all = x_all.to(device), y_all.to(device)
    running = 0.0
    for step in range(400):
        idx = (step % 8) * BATCH
        x, y = x_all[idx : idx + BATCH], y_all[idx : idx + BATCH]
        optimizer.zero_grad()
        pred = model(x)
        loss = F.mse_loss(pred, y)
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 50 == 49:
            print(f"step {step + 1}: mse {running / 50:.5f}")
            running = 0.0


if __name__ == "__main__":
    main()
