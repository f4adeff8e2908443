"""The model folders: ``gazeflow/``, self-contained as a transformers model folder is."""
