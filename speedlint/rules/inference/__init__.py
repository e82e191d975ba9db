"""Evaluation and inference

Evaluation loops that keep autograd bookkeeping: `no_grad` where `inference_mode` fits, loops that
build a graph.
"""
