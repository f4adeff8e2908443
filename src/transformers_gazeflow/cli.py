"""``python -m transformers_gazeflow.cli``: the ``gazeflow`` command under a launcher (``accelerate launch -m``,
``torchrun -m``), as the README shows. The command lives in :mod:`transformers_gazeflow.commands.cli`."""

from .commands.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
