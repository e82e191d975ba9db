"""Memory

`gc.collect()` and `empty_cache()` in hot paths, gradients zero-filled instead of dropped, tensors
grown with `torch.cat` in a loop.
"""
