"""The package's public face: ``import transformers_gazeflow`` re-exports the data API, stays light (no ``datasets``,
``evaluate`` or ``av`` imported), and works where those packages are missing (the GPU image)."""

import sys
from pathlib import Path

import pytest

import transformers_gazeflow

from .conftest import run_python

HERE = Path(__file__).parent
DATA_API = {
    "load_gaze_dataset": "transformers_gazeflow.data.loading",
    "gaze_builder": "transformers_gazeflow.data.loading",
    "available_builders": "transformers_gazeflow.data.loading",
    "gaze_example_features": "transformers_gazeflow.data.loading",
    "ClipDroppedError": "transformers_gazeflow.data.loading",
    "GazeFlowVideoProcessor": "transformers_gazeflow.data.processing",
    "GazeFlowDataCollator": "transformers_gazeflow.data.collator",
    "write_egtea_layout": "transformers_gazeflow.data.synthetic.egtea_layout",
    "SyntheticGazeSettings": "transformers_gazeflow.data.synthetic.settings",
    "probe_video": "transformers_gazeflow.data.video",
    "decode_frames": "transformers_gazeflow.data.video",
    "write_video": "transformers_gazeflow.data.video",
    "VideoDecodeError": "transformers_gazeflow.data.video",
}
CODES = {"UNTRACKED": 0, "FIXATION": 1, "SACCADE": 2, "BLINK_OR_OTHER": 3, "OFF_FRAME": 4}
HEAVY = ("datasets", "evaluate", "av")


def test_the_data_api_is_re_exported_from_its_one_home():
    for name, module in DATA_API.items():
        assert name in transformers_gazeflow.__all__
        assert getattr(transformers_gazeflow, name) is getattr(sys.modules[module], name), name
    from transformers_gazeflow.data import gaze_types as schema

    for name, code in CODES.items():
        assert name in transformers_gazeflow.__all__
        assert getattr(transformers_gazeflow, name) == getattr(schema, name) == code
    assert {"egtea_gaze", "ego4d_gaze", "synthetic_gaze"} <= set(transformers_gazeflow.available_builders())


def test_importing_the_package_imports_neither_datasets_nor_evaluate_nor_av():
    stdout = run_python(
        f"import sys, transformers_gazeflow\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))",
        cwd=HERE,
        timeout=300,
    )
    assert stdout.strip().splitlines()[-1] == "[]"


def test_importing_the_package_is_light_and_names_load_on_first_use():
    """No torch, transformers or numpy on import (the command starts fast); a name imports its module when used."""
    code = (
        "import sys, transformers_gazeflow as tg\n"
        "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))\n"
        "print(tg.FIXATION, tg.GazeFlowConfig.model_type, 'transformers' in sys.modules)\n"
        "print(set(tg.__all__) <= set(dir(tg)))\n"
        "try:\n    tg.no_such_name\nexcept AttributeError as err:\n    print(err)\n"
    )
    lines = run_python(code, cwd=HERE, timeout=300).strip().splitlines()[-4:]
    assert lines == ["[]", "1 gazeflow True", "True", "module 'transformers_gazeflow' has no attribute 'no_such_name'"]


def test_each_public_name_is_looked_up_in_the_module_that_defines_it():
    """``_EXPORTS`` names each class's and function's one home (a package's ``__init__`` re-exports, as it may)."""
    import importlib
    import types

    elsewhere = []
    for name, module in transformers_gazeflow._EXPORTS.items():
        target = importlib.import_module(f"transformers_gazeflow.{module}")
        value = getattr(target, name)
        is_package = Path(target.__file__).name == "__init__.py"
        if isinstance(value, (type, types.FunctionType)) and not is_package and value.__module__ != target.__name__:
            elsewhere.append(f"{name}: {module} (defined in {value.__module__})")
    assert not elsewhere, elsewhere


def test_every_public_name_resolves():
    for name in transformers_gazeflow.__all__:
        assert getattr(transformers_gazeflow, name) is not None, name


def test_the_package_imports_where_datasets_evaluate_and_av_are_missing():
    """As on the GPU image: the model side works; the data side says what to install."""
    code = (
        f"import sys\nfor name in {HEAVY!r}:\n    sys.modules[name] = None  # `import name` now fails\n"
        "import transformers_gazeflow as tg\n"
        "assert tg.GazeFlowConfig.model_type == 'gazeflow' and tg.UNTRACKED == 0\n"
        "for call in (lambda: tg.load_gaze_dataset('egtea', data_dir='.'), tg.gaze_example_features,\n"
        "             lambda: tg.probe_video('x.mp4')):\n"
        "    try:\n"
        "        call()\n"
        "    except ImportError as err:\n"
        "        print(err)\n"
    )
    lines = run_python(code, cwd=HERE, timeout=300).strip().splitlines()[-3:]
    needs_datasets = "building or loading a gaze dataset needs the `datasets` package: `pip install datasets`"
    assert lines[0] == lines[1] == needs_datasets
    assert lines[2] == "video decoding needs PyAV: `pip install av`"


@pytest.mark.parametrize("name", sorted(DATA_API))
def test_each_re_export_has_a_docstring(name):
    assert (getattr(transformers_gazeflow, name).__doc__ or "").strip(), name
