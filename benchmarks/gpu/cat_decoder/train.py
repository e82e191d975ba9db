"""GPU scenario: decoder outputs grown with torch.cat inside the time loop (SPD404).

A GRU forecaster unrolled over 768 time steps with teacher forcing; each step's hidden state
is appended to the outputs with `torch.cat`, so step t copies all t previous outputs again:
quadratic memory traffic per training step. speedlint's safe fix collects the states in a
list and concatenates once after the loop (bit-for-bit the same results, tolerance 1e-5).
Synthetic data: noisy sums of sines, predict the next value of every channel.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

CHANNELS = 64
HIDDEN = 512
STEPS = 768
BATCH = 128


class Forecaster(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(CHANNELS, HIDDEN)
        self.head = nn.Linear(HIDDEN, CHANNELS)

    def forward(self, series):  # series: (batch, time, channels)
        h = series.new_zeros(series.size(0), HIDDEN)
        outputs = series.new_zeros(series.size(0), 0, HIDDEN)
        for t in range(series.size(1)):
            h = self.cell(series[:, t], h)
            outputs = torch.cat([outputs, h.unsqueeze(1)], dim=1)
        return self.head(outputs)


def make_series(n, gen):
    t = torch.arange(STEPS + 1, dtype=torch.float32)
    freq = 0.01 + 0.05 * torch.rand(n, 1, CHANNELS, generator=gen)
    phase = 6.28 * torch.rand(n, 1, CHANNELS, generator=gen)
    clean = torch.sin(freq * t[None, :, None] + phase)
    return clean + 0.05 * torch.randn(n, STEPS + 1, CHANNELS, generator=gen)


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = Forecaster().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    data = make_series(4 * BATCH, gen).to(device)
    running = 0.0
    for step in range(200):
        idx = (step % 4) * BATCH
        batch = data[idx : idx + BATCH]
        optimizer.zero_grad()
        pred = model(batch[:, :-1])
        loss = F.mse_loss(pred, batch[:, 1:])
        loss.backward()
        optimizer.step()
        running += loss.item()
        if step % 20 == 19:
            print(f"step {step + 1}: mse {running / 20:.5f}")
            running = 0.0


if __name__ == "__main__":
    main()
