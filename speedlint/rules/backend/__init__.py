"""Backend and debugging leftovers

The cuDNN autotuner switched off, anomaly detection and profilers left on, `DataParallel`.
"""
