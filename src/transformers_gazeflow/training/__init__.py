"""Training support used by ``examples/train.py``: dataset splits, the frozen-feature cache, atomic checkpoints,
the model card. The training loop itself stays in the script, readable top to bottom."""
