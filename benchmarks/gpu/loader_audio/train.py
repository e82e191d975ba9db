"""GPU scenario: an input-bound audio classifier (SPD101, SPD102, SPD202).

The Dataset synthesises a waveform per clip and turns it into a log-spectrogram with a random
time mask on the CPU, in `__getitem__` (a stand-in for decoding + feature extraction +
augmentation). The DataLoader loads in the main process (`num_workers=0`) into pageable
memory, and the batches are copied to the GPU with blocking copies, so the GPU waits for the
CPU on every step. The step itself already uses bfloat16 autocast.
speedlint's fixes: workers from the CPU count with persistent workers (SPD101, unsafe),
`pin_memory` (SPD102) and `non_blocking=True` copies (SPD202).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

SAMPLE_RATE = 16000
CLIP = 16000  # one second
N_FFT = 400
HOP = 160
N_CLASSES = 35


class SyntheticSpeechCommands(Dataset):
    """Clip i: a few harmonics whose pitch depends on its label, plus noise; features computed
    per sample from the clip's own seed (deterministic, whatever process loads it)."""

    def __init__(self, n):
        self.n = n
        self.window = torch.hann_window(N_FFT)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(1000 + i)
        label = i % N_CLASSES
        t = torch.arange(CLIP) / SAMPLE_RATE
        f0 = 120.0 + 15.0 * label + 5.0 * torch.rand(1, generator=g)
        wave = sum(torch.sin(2 * torch.pi * f0 * k * t) / k for k in range(1, 6))
        wave = wave + 0.3 * torch.randn(CLIP, generator=g)
        spec = torch.stft(wave, N_FFT, HOP, window=self.window, return_complex=True).abs()
        feats = torch.log1p(spec[:128])  # 128 frequency bins x 101 frames
        start = int(torch.randint(0, feats.size(1) - 20, (1,), generator=g))
        feats[:, start : start + 20] = 0.0  # time masking (SpecAugment)
        feats = (feats - feats.mean()) / (feats.std() + 1e-5)
        return feats.T.contiguous(), label


class FrameClassifier(nn.Module):
    def __init__(self, n_bins=128, hidden=1024):
        super().__init__()
        self.frame = nn.Sequential(nn.Linear(n_bins, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Sequential(nn.LayerNorm(2 * hidden), nn.Linear(2 * hidden, hidden), nn.GELU(), nn.Linear(hidden, N_CLASSES))

    def forward(self, x):  # x: (batch, frames, bins)
        h = self.frame(x)
        pooled = torch.cat([h.mean(dim=1), h.amax(dim=1)], dim=1)
        return self.head(pooled)


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = FrameClassifier().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = DataLoader(SyntheticSpeechCommands(20000), batch_size=128, shuffle=True, num_workers=0, drop_last=True)
    for epoch in range(3):
        model.train()
        total, correct, seen = 0.0, 0, 0
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
            loss.backward()
            optimizer.step()
            total += loss.item() * y.size(0)
            correct += (logits.argmax(dim=1) == y).sum().item()
            seen += y.size(0)
        print(f"epoch {epoch}: loss {total / seen:.4f} accuracy {correct / seen:.3f}")


if __name__ == "__main__":
    main()
