"""Host-device syncs and transfers

The host waiting for the GPU: `.item()` per step, blocking copies, tensors created on the CPU and
then moved.
"""
