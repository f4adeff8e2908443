"""The data layer: raw gaze files -> per-frame arrays, windows, PyAV decoding, processing and collation."""
