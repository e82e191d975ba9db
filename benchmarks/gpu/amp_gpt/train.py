"""GPU scenario: a GPT-style language model trained in float32 (SPD301, SPD304).

Every matmul runs in full IEEE float32 on the CUDA cores: no autocast, TF32 never enabled.
speedlint's unsafe fixes wrap the forward and the loss in `torch.autocast` and switch
float32 matmuls to TF32. Synthetic data: a learnable next-token task (each sequence
continues an arithmetic pattern with noise tokens), so the loss falls from the first steps.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 4096
SEQ = 512
BATCH = 16
D_MODEL = 1024
N_HEAD = 16
N_LAYER = 6


class Block(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        k = k.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, d // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, D_MODEL)
        self.pos = nn.Parameter(torch.zeros(1, SEQ, D_MODEL))
        self.blocks = nn.ModuleList(Block(D_MODEL, N_HEAD) for _ in range(N_LAYER))
        self.ln_f = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos[:, : idx.size(1)]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def make_batch(gen):
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=gen)
    stride = torch.randint(1, 8, (BATCH, 1), generator=gen)
    seq = (start + stride * torch.arange(SEQ + 1)) % VOCAB
    noise = torch.rand(BATCH, SEQ + 1, generator=gen) < 0.1
    seq = torch.where(noise, torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=gen), seq)
    return seq[:, :-1], seq[:, 1:]


def main():
    torch.manual_seed(0)
    device = "cuda"
    model = GPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    gen = torch.Generator().manual_seed(0)
    batches = [make_batch(gen) for _ in range(8)]
    print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M")
    running = 0.0
    for step in range(200):
        x, y = batches[step % len(batches)]
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        running += loss.item()
        if step % 20 == 19:
            print(f"step {step + 1}: loss {running / 20:.4f} (ppl {math.exp(running / 20):.1f})")
            running = 0.0


if __name__ == "__main__":
    main()
