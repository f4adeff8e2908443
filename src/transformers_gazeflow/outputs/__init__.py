"""What a prediction is written as: the overlay video (``overlay``) and the ``gaze.csv`` / ``summary.json`` files
(``writers``)."""
