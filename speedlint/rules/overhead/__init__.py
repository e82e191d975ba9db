"""Python overhead

Per-sample Python loops over the batch dimension.
"""
