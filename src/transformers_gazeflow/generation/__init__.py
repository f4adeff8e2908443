"""Inference around the model: the windowed engine fed from a stream of raw frames (``windowed``), the causal
streamer frame by frame (``online``) and the inference fast path (``inference``)."""
