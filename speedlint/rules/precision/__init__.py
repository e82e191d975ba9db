"""Precision

FP32 training steps where mixed precision fits, the deprecated `torch.cuda.amp` API, gradient
accumulation.
"""
