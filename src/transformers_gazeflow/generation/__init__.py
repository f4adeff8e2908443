"""Inference around the model: the windowed engine fed from a stream of raw frames (``windowed``), the causal streamer
frame by frame (``online``, its step ``streaming_step`` and runners ``streaming_runners``), the stream's backends
behind one protocol and registry (``steppers``), the step exported as ONNX (``onnx_export``), the inference fast
path (``inference``) and the memory a run's sizes need, estimated before allocation (``resource_bounds``)."""
