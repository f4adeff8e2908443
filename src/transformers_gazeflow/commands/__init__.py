"""The ``gazeflow`` command (``cli``) and what its subcommands run: ``predict`` (one video into an output folder),
``batch`` (many videos, output folders, index), ``demo``, the web demo (``web_demo``, ``web_demo_jobs``)."""
