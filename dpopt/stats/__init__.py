"""Inference on released statistics: confidence regions, tests, random-data designs."""
