"""The GazeFlow web demo as a Hugging Face Space runs it (``python app.py``); locally, ``gazeflow app`` does the same.

Everything lives in :mod:`transformers_gazeflow.commands.web_demo`. A Space sets its model and limits with variables:
``GAZEFLOW_MODEL`` (a Hub id; default: the model bundled with the package), ``GAZEFLOW_APP_MAX_UPLOAD_MB``,
``GAZEFLOW_APP_MAX_DURATION_S`` and ``GAZEFLOW_APP_MAX_JOBS`` (see ``spaces/README.md``).
"""

from transformers_gazeflow.commands.web_demo import GazeFlowDemo

gazeflow_demo = GazeFlowDemo()
demo = gazeflow_demo.blocks  # the name Gradio's reload mode (`gradio app.py`) looks for

if __name__ == "__main__":
    gazeflow_demo.launch()
