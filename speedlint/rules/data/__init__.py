"""Input pipeline

How batches are produced: DataLoader workers, pinned memory, loaders rebuilt or materialised per
epoch, per-sample work in `__getitem__`.
"""
