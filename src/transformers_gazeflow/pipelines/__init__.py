"""The ``egocentric-gaze`` pipeline (``egocentric_gaze``)."""
