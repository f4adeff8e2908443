"""``python -m transformers_gazeflow``: the ``gazeflow`` command (:mod:`transformers_gazeflow.commands.cli`)."""

from .commands.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
