"""The ``gazeflow`` command (``cli``, its arguments in ``arguments`` and ``readout_arguments``) and what its
subcommands run: ``predict`` (one video into an output folder), ``batch`` (many videos, output folders, index),
``calibrate``, ``demo``, ``stream`` (online gaze and ``export-streamer``), the web demo (``web_demo``,
``web_demo_jobs``)."""
