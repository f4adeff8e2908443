"""Training support used by ``examples/``: dataset splits, the frozen-feature cache, the named recipes, checkpoints
(the state as safetensors, a checksum manifest, the run lineage behind ``latest``), fault injection for the crash
tests and leaving a multi-process run (``processes``); and the machinery of ``examples/train.py``, one job a module
(its command line, one run's objects, the EMA, validation, early stopping, the loop, the trial starts, resuming, the
checks after training, the model card's training section), so that the script reads top to bottom."""
