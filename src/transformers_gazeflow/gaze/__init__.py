"""What K sampled gaze trajectories tell beyond their mean: per-frame uncertainty (:mod:`.uncertainty`), fixations
and saccades (:mod:`.events`), a per-wearer correction (:mod:`.wearer`), scanpaths for other tools
(:mod:`.scanpaths`) and their streaming form for long videos (:mod:`.readout`).

The maths of this folder imports only the conventions (``models.gazeflow.geometry``, ``data.gaze_types``): the
metrics, the pipeline, the writers and the commands build on it, never the other way round.
"""
