"""Training: one loop (loop.py), checkpoints, torchrun support, objectives and jobs."""
