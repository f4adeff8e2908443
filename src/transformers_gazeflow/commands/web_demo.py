"""The web demo: a Gradio page over the ``egocentric-gaze`` pipeline, as a Hugging Face Space runs it.

```python
from transformers_gazeflow.commands.web_demo import GazeFlowDemo

GazeFlowDemo(model=None).launch(host="127.0.0.1", port=7860)   # or: gazeflow app; or: python app.py (a Space)
```

The page takes a video upload (or the bundled demo clip, a synthetic clip with known gaze, in one click), a model
folder or Hub id (default: the bundled model), K, S, the solver, the window mode (coherent, the default, or blend,
as the pipeline's ``window_mode``), the seed, a frame range and the heatmap switch. It shows a progress bar over
frames while the video streams through the model (a Stop button ends the session's running job at the next chunk),
then the overlay video, a plot of x(t) and y(t) (the point estimate, with the K samples as a faint band and, for the
demo clip, the true gaze), and links to ``gaze.csv`` and ``summary.json``. The work itself is
:mod:`transformers_gazeflow.commands.web_demo_jobs`, over the same loop as ``gazeflow predict``.

- Limits and concurrency come from the arguments or, for a Space, from the environment: ``GAZEFLOW_APP_MAX_UPLOAD_MB``
  (default 100), ``GAZEFLOW_APP_MAX_DURATION_S`` (seconds of video per run, default 120), ``GAZEFLOW_APP_MAX_JOBS``
  (jobs at the same time, default 2); ``GAZEFLOW_MODEL`` names the model the page starts with and
  ``GAZEFLOW_DEVICE`` the torch device (default: the CPU).
- Bad uploads (empty, not a video, one frame, an unknown codec, too large or too long) and bad settings show their
  one-line message in the page (the status line and an error notice); the app keeps serving.
- Gradio's queue runs at most ``max_concurrent_jobs`` jobs at a time (the rest wait, up to ``max_queue``). Each job
  writes into its own temporary folder, removed when the job ends, after Gradio has copied the outputs it serves
  into its own cache (which it empties of files older than an hour, ``delete_cache``).

Gradio is an optional dependency (``pip install "transformers-gazeflow[app]"``); it is imported only when a demo is
built, so the package and the ``gazeflow`` command import without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models.gazeflow.choices import SOLVERS, WINDOW_MODES
from ..models.gazeflow.generation_gazeflow import SamplingSettings
from .arguments import SAMPLING_FLAGS
from .web_demo_jobs import (
    MAX_NOISE_SCALE,
    MAX_SAMPLES,
    DemoInputError,
    DemoLimits,
    JobSettings,
    JobStopped,
    PipelineCache,
    prepare_demo_clip,
    run_job,
    trajectory_figure,
)

if TYPE_CHECKING:
    import gradio

logger = logging.getLogger(__name__)

GRADIO_HELP = 'the web demo needs gradio and matplotlib: pip install "transformers-gazeflow[app]"'
MAX_STEPS_IN_PAGE = 50
CACHE_MAX_AGE_S = 3600
"""Gradio's cache (uploads, served outputs) is emptied of files older than this, checked as often."""

INTRO = """# GazeFlow: egocentric gaze prediction
Upload a head-mounted (egocentric) video, or click the demo clip below it, and press **Predict gaze**. GazeFlow
samples K whole gaze trajectories by conditional flow matching (S ODE steps each); the point estimate is their
per-frame mean. The bundled model is small and was trained on synthetic clips only: it shows how the tools work,
not real gaze; point the model box at a model trained on EGTEA Gaze+ or Ego4D for that."""

READY = "Upload a video (or click the demo clip), then press **Predict gaze**."
LEGEND = (
    "Overlay: heatmap of the K samples, cyan dots = the K samples, white ring = point estimate with its trail; "
    "white cross = the true gaze (demo clip only)."
)


ENV_MODEL = "GAZEFLOW_MODEL"
ENV_DEVICE = "GAZEFLOW_DEVICE"
ENV_MAX_UPLOAD_MB = "GAZEFLOW_APP_MAX_UPLOAD_MB"
ENV_MAX_DURATION_S = "GAZEFLOW_APP_MAX_DURATION_S"
ENV_MAX_JOBS = "GAZEFLOW_APP_MAX_JOBS"


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"the environment variable {name} must be a number, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"the environment variable {name} must be positive, got {raw!r}")
    return value


def limits_from_env() -> DemoLimits:
    """:class:`~.web_demo_jobs.DemoLimits` with ``GAZEFLOW_APP_MAX_UPLOAD_MB`` / ``GAZEFLOW_APP_MAX_DURATION_S`` where
    set (a Space's variables), else the defaults."""
    defaults = DemoLimits()
    return DemoLimits(
        max_upload_mb=_env_number(ENV_MAX_UPLOAD_MB, defaults.max_upload_mb),
        max_duration_s=_env_number(ENV_MAX_DURATION_S, defaults.max_duration_s),
    )


def default_cache_dir() -> Path:
    """Where the demo clip is rendered once: ``$XDG_CACHE_HOME/gazeflow`` (``~/.cache/gazeflow``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gazeflow"


def import_gradio():
    """Gradio, or an ImportError saying how to install the demo's extra."""
    try:
        import gradio
        import matplotlib  # noqa: F401  (the x(t)/y(t) figure)
    except ImportError as err:
        raise ImportError(GRADIO_HELP) from err
    return gradio


class GazeFlowDemo:
    """The demo page (``self.blocks``, a ``gradio.Blocks``) and how to serve it (:meth:`launch`).

    Args:
        model: model folder or Hub id the page starts with (``None``: ``GAZEFLOW_MODEL``, else the bundled model);
            loaded now, so a bad one fails before the page is served.
        device: torch device for inference (default: ``GAZEFLOW_DEVICE``, else the CPU).
        limits: upload size, duration and fewest frames (:class:`~.web_demo_jobs.DemoLimits`; default
            :func:`limits_from_env`).
        max_concurrent_jobs: jobs that run at the same time (default ``GAZEFLOW_APP_MAX_JOBS`` or 2); the others
            wait in the queue (at most ``max_queue``).
        cache_dir: where the demo clip is rendered once (default :func:`default_cache_dir`).
        work_dir: parent of the jobs' temporary folders (default: the system's temporary folder).
    """

    def __init__(
        self,
        model: str | None = None,
        device: str | None = None,
        limits: DemoLimits | None = None,
        max_concurrent_jobs: int | None = None,
        max_queue: int = 16,
        cache_dir: str | os.PathLike | None = None,
        work_dir: str | os.PathLike | None = None,
    ) -> None:
        limits = limits if limits is not None else limits_from_env()
        if max_concurrent_jobs is None:
            jobs = _env_number(ENV_MAX_JOBS, 2)
            if jobs != int(jobs):
                raise ValueError(f"the environment variable {ENV_MAX_JOBS} must be a whole number, got {jobs:g}")
            max_concurrent_jobs = int(jobs)
        if max_concurrent_jobs < 1 or max_queue < 1:
            raise ValueError(f"max_concurrent_jobs and max_queue must be >= 1, got {max_concurrent_jobs}, {max_queue}")
        gr = import_gradio()
        self.limits, self.max_concurrent_jobs, self.max_queue = limits, max_concurrent_jobs, max_queue
        self.work_dir = Path(work_dir) if work_dir is not None else None
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        self.pipelines = PipelineCache(device=device or os.environ.get(ENV_DEVICE) or None)
        model = model if model is not None else os.environ.get(ENV_MODEL)
        self.model = model.strip() if isinstance(model, str) and model.strip() else None
        _, pipe = self.pipelines.get(self.model)  # fails now (ModelFolderError) for a bad model
        self.demo_clip = prepare_demo_clip(Path(cache_dir) if cache_dir is not None else default_cache_dir())
        self._running: dict[str, threading.Event] = {}  # session -> its running job's stop event
        self._running_lock = threading.Lock()
        self.blocks = self._build(gr, pipe.model.config)

    # ------------------------------------------------------------------ the job behind the button
    def predict(
        self,
        video: str | None,
        model: str,
        sampling: Mapping[str, Any],
        seed: Any,
        start_frame: Any,
        end_frame: Any,
        heatmap: bool,
        progress: Any = None,
        session: str | None = None,
    ):
        """Run one job; yields ``(status, overlay, figure, [gaze.csv, summary.json])`` once, then removes the job's
        folder (Gradio has copied the files it serves by the time the generator is resumed or closed); a job that
        serves nothing (stopped, or a bad input) has its folder removed before its status is yielded. ``sampling``:
        the page's sampling controls by ``SamplingSettings`` field (K, S, the solver, the window mode; empty: the
        model's default). A bad input yields its message as the status (and shows it as a notice) with the outputs
        cleared. ``session`` (the page's session) lets :meth:`stop` end the job at its next chunk."""
        import gradio as gr

        job_dir = Path(tempfile.mkdtemp(prefix="gazeflow-job-", dir=self.work_dir))
        cancel = threading.Event()
        if session is not None:
            with self._running_lock:
                self._running[session] = cancel
        try:
            if progress is not None:
                progress(0.0, desc="checking the video, loading the model")
            settings = JobSettings(
                model=model or self.model,
                sampling=dict(sampling),
                seed=seed,
                start_frame=start_frame,
                end_frame=end_frame or None,
                heatmap=bool(heatmap),
            )

            def report(done: int, total: int) -> None:
                if progress is not None:
                    progress((done, total), desc="predicting gaze", unit="frames")

            try:
                result = run_job(
                    video, settings, job_dir, self.pipelines, self.limits, self.demo_clip, report, cancel=cancel
                )
                figure = trajectory_figure(result.times_s, result.trajectories, result.truth)
            except JobStopped as err:
                shutil.rmtree(job_dir, ignore_errors=True)  # gone before the page says "nothing was kept"
                yield f"**Stopped.** {err}", None, None, None
                return
            except DemoInputError as err:
                message = str(err)
            except Exception as err:  # a bug, not the user's input: keep serving, log the traceback
                logger.exception("web demo: job failed")
                message = f"internal error ({type(err).__name__}: {err}); the demo keeps running, try other settings"
            else:
                yield (
                    f"**Done.** {result.message}",
                    str(result.overlay),
                    figure,
                    [str(result.csv), str(result.summary_path)],
                )
                return
            # the message in the status line and as a notice; the event itself succeeds, so no output is marked
            # "Error" over the message and the page stays ready for the next upload
            shutil.rmtree(job_dir, ignore_errors=True)  # nothing is served: gone before the page says so
            gr.Warning(message, duration=None, title="Could not run")
            yield f"**Could not run:** {message}", None, None, None
        finally:
            if session is not None:
                with self._running_lock:
                    if self._running.get(session) is cancel:
                        del self._running[session]
            shutil.rmtree(job_dir, ignore_errors=True)

    def stop(self, session: str | None) -> bool:
        """Ask the session's running job to stop at its next chunk; False when it runs none."""
        with self._running_lock:
            cancel = self._running.get(session) if session is not None else None
        if cancel is None:
            return False
        cancel.set()
        return True

    # ------------------------------------------------------------------ the page
    def _build(self, gr, config) -> gradio.Blocks:
        demo = self

        def predict(
            video,
            model,
            num_samples,
            num_steps,
            solver,
            window_mode,
            noise_scale,
            seed,
            start_frame,
            end_frame,
            heatmap,
            request=None,
            progress=gr.Progress(),  # noqa: B008 (Gradio's own idiom)
        ):
            sampling = dict(
                num_samples=num_samples,
                num_steps=num_steps,
                solver=solver,
                window_mode=window_mode,
                noise_scale=noise_scale,
            )
            session = getattr(request, "session_hash", None)
            yield from demo.predict(video, model, sampling, seed, start_frame, end_frame, heatmap, progress, session)

        def stop(request=None) -> None:
            demo.stop(getattr(request, "session_hash", None))

        # Gradio passes the request to a parameter annotated gr.Request (set here: gradio is imported lazily)
        predict.__annotations__["request"] = stop.__annotations__["request"] = gr.Request

        with gr.Blocks(
            title="GazeFlow: egocentric gaze prediction",
            analytics_enabled=False,
            delete_cache=(CACHE_MAX_AGE_S, CACHE_MAX_AGE_S),
        ) as blocks:
            gr.Markdown(INTRO)
            with gr.Row():
                with gr.Column(scale=1):
                    inputs, run, stop_button = self._input_column(gr, config)
                with gr.Column(scale=1):
                    outputs = self._output_column(gr)
            run.click(
                predict,
                inputs=inputs,
                outputs=outputs,
                concurrency_limit=self.max_concurrent_jobs,
                api_name="predict",
            )
            stop_button.click(stop, inputs=None, outputs=None, queue=False, api_name="stop")
        blocks.queue(max_size=self.max_queue, default_concurrency_limit=self.max_concurrent_jobs)
        return blocks

    def _input_column(self, gr, config) -> tuple[list, Any, Any]:
        """The upload, the demo clip and the settings (the sampling controls start at the model's defaults); returns
        the inputs of the predict callback in its order, and the run and stop buttons."""
        limits = self.limits
        video = gr.Video(
            label=f"Video (up to {limits.max_upload_mb:g} MB and {limits.max_duration_s:g} s per run)",
            sources=["upload"],
            elem_id="gazeflow-video",
        )
        gr.Examples(
            examples=[[str(self.demo_clip.path)]],
            inputs=[video],
            label="Demo clip: synthetic, with its true gaze",
            elem_id="gazeflow-examples",
        )
        with gr.Accordion("Settings", open=True):
            model = gr.Textbox(
                label="Model folder or Hub id (empty: the bundled model)",
                value=self.model or "",
                elem_id="gazeflow-model",
            )
            sampling = self._sampling_controls(gr, SamplingSettings.resolve(config))
            with gr.Row():
                start_frame = gr.Number(value=0, precision=0, minimum=0, label="Start frame", elem_id="gazeflow-start")
                end_frame = gr.Number(
                    value=0,
                    precision=0,
                    minimum=0,
                    label="End frame (excluded; 0: to the end)",
                    elem_id="gazeflow-end",
                )
            heatmap = gr.Checkbox(value=True, label="Heatmap on the overlay")
        with gr.Row():
            run = gr.Button("Predict gaze", variant="primary", elem_id="gazeflow-run")
            stop_button = gr.Button("Stop", variant="stop", elem_id="gazeflow-stop")
        return [video, model, *sampling, start_frame, end_frame, heatmap], run, stop_button

    @staticmethod
    def _sampling_controls(gr, defaults: SamplingSettings) -> list:
        """K, S, the solver, the window mode, tau and the seed, in the predict callback's order."""
        with gr.Row():
            num_samples = gr.Slider(
                1,
                MAX_SAMPLES,
                value=defaults.num_samples,
                step=1,
                label="K (sampled trajectories)",
                elem_id="gazeflow-k",
            )
            num_steps = gr.Slider(
                1, MAX_STEPS_IN_PAGE, value=defaults.num_steps, step=1, label="S (ODE steps)", elem_id="gazeflow-s"
            )
        with gr.Row():
            solver = gr.Dropdown(list(SOLVERS), value=defaults.solver, label="Solver")
            window_mode = gr.Dropdown(
                list(WINDOW_MODES),
                value=defaults.window_mode,
                label="Window mode",
                elem_id="gazeflow-window-mode",
                info=SAMPLING_FLAGS["window_mode"].help,  # the command line's words for the same option
            )
        with gr.Row():
            noise_scale = gr.Number(  # 0: the chosen model's own tau, whichever model that is (an emptied field is 0)
                value=0,
                minimum=0,
                maximum=MAX_NOISE_SCALE,
                step=0.05,
                label=f"tau (noise scale, at most {MAX_NOISE_SCALE:g}; 0: the model's own, "
                f"{defaults.noise_scale:g} for the bundled model)",
                elem_id="gazeflow-noise-scale",
                info=SAMPLING_FLAGS["noise_scale"].help,
            )
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
        return [num_samples, num_steps, solver, window_mode, noise_scale, seed]

    @staticmethod
    def _output_column(gr) -> list:
        """The status line, the overlay, the figure and the downloads (the predict callback's outputs)."""
        status = gr.Markdown(READY, elem_id="gazeflow-status")
        overlay = gr.Video(
            label="Overlay", show_label=False, interactive=False, autoplay=True, loop=True, elem_id="gazeflow-overlay"
        )  # no label box: it would cover the legend burned into the top-left corner
        gr.Markdown(LEGEND)
        plot = gr.Plot(label="Gaze over time", format="png", elem_id="gazeflow-plot")
        downloads = gr.File(
            label="Downloads: gaze.csv, summary.json",
            file_count="multiple",
            interactive=False,
            elem_id="gazeflow-downloads",
        )
        return [status, overlay, plot, downloads]

    def launch(self, host: str | None = None, port: int | None = None, share: bool = False, **kwargs: Any):
        """Serve the page (blocks until stopped unless ``prevent_thread_lock=True``). ``host``/``port`` default to
        Gradio's (``GRADIO_SERVER_NAME``/``GRADIO_SERVER_PORT``, else 127.0.0.1:7860); ``share`` makes a public
        gradio.live link (off by default). Uploads past the size limit are refused by the server itself."""
        options = dict(
            server_name=host,
            server_port=port,
            share=share,
            max_file_size=self.limits.max_upload_bytes,
            allowed_paths=[str(self.demo_clip.path.parent)],
            show_error=True,
        )
        return self.blocks.launch(**{**options, **kwargs})


def serve(model: str | None = None, host: str = "127.0.0.1", port: int | None = None, share: bool = False) -> int:
    """``gazeflow app``: serve the demo until interrupted; a missing extra or a bad model prints
    ``gazeflow: error: ...`` and returns 1."""
    from transformers.utils import logging as hf_logging

    from ..hub.model_folders import ModelFolderError

    hf_logging.disable_progress_bar()  # no "Loading weights" bar in the server's log
    try:
        demo = GazeFlowDemo(model=model)
    except (ImportError, ModelFolderError, OSError, ValueError) as err:
        if os.environ.get("GAZEFLOW_DEBUG"):
            raise
        print(f"gazeflow: error: {err}", file=sys.stderr)
        return 1
    # gradio's own lines speak to a Python caller ("set `share=True` in `launch()`"): say it the command's way
    _, local_url, share_url = demo.launch(host=host, port=port, share=share, quiet=True, prevent_thread_lock=True)
    public = f" and {share_url}" if share_url else " (add --share for a public gradio.live link)"
    print(f"gazeflow app: the web demo is at {local_url}{public}; Ctrl-C stops it", flush=True)
    demo.blocks.block_thread()
    return 0


__all__ = [
    "GazeFlowDemo",
    "serve",
    "default_cache_dir",
    "import_gradio",
    "limits_from_env",
    "GRADIO_HELP",
    "ENV_MODEL",
    "ENV_DEVICE",
    "ENV_MAX_UPLOAD_MB",
    "ENV_MAX_DURATION_S",
    "ENV_MAX_JOBS",
]
