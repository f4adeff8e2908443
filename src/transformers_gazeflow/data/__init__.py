"""The data layer: raw gaze files -> per-frame arrays, windows, PyAV decoding, the sources a video streams from
(``video_sources``, ``stream_sources``), processing and collation."""
