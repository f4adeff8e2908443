"""Training support used by ``examples/train.py``: dataset splits, the frozen-feature cache, checkpoints (the state
as safetensors, a checksum manifest, the run lineage behind ``latest``), fault injection for the crash tests and
leaving a multi-process run (``processes``).
The training loop itself stays in the script, readable top to bottom."""
