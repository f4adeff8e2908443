"""Model folders: the one reader and writer of model folders (``model_folders``) and the remote code that makes a
saved folder loadable with ``trust_remote_code=True`` (``remote_code``)."""
