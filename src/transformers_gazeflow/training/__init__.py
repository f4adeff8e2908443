"""Training support used by ``examples/train.py``: dataset splits, the frozen-feature cache, checkpoints (the state
as safetensors, a checksum manifest, the run lineage behind ``latest``) and fault injection for the crash tests.
The training loop itself stays in the script, readable top to bottom."""
