"""``load_gaze_dataset``: finding, importing and running builders, from the checkout and from an installed wheel."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import datasets
import numpy as np
import pytest

from transformers_gazeflow.data import loading
from transformers_gazeflow.data.loading import clip_window_examples, gaze_example_features, load_gaze_dataset

from ..conftest import build_wheel, run_python
from .raw_fixtures import EgteaFixtureClip, egtea_clip_name, make_egtea_root

REPO = Path(__file__).resolve().parents[2]
OP = "OP01-R01-PastaSalad"
SCHEMA = [
    "clip_id",
    "video_path",
    "window_start",
    "num_frames",
    "fps",
    "width",
    "height",
    "gaze",
    "gaze_type",
    "valid",
    "action",
    "verb",
    "noun",
    "camera_model",
    "camera_params",
]


@pytest.fixture(scope="module")
def egtea_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("egtea")
    clip = EgteaFixtureClip(egtea_clip_name(OP, 3, 18), 16, action=4, verb=3, noun=2)
    samples = [(10.0 * f, 5.0 * f, f, "Fixation") for f in range(40)]
    return make_egtea_root(root, train=[clip], test=[clip], gaze={OP: (samples, 1, f"{OP}.txt")})


def test_names_resolve_to_the_builder_folders():
    assert {"egtea_gaze", "ego4d_gaze"} <= set(loading.available_builders())
    assert loading.builder_file("egtea") == loading.builder_file("egtea_gaze")
    assert loading.builder_file("ego4d").name == "ego4d_gaze.py"
    assert loading.builder_file(REPO / "datasets_scripts" / "egtea_gaze") == loading.builder_file("egtea")
    assert loading.load_builder_class("egtea").__name__ == "EgteaGaze"
    with pytest.raises(ValueError, match="unknown gaze dataset 'gtea'.*egtea"):
        loading.builder_file("gtea")


def test_split_or_all_splits(egtea_root, tmp_path):
    ds = load_gaze_dataset("egtea_gaze", data_dir=egtea_root, cache_dir=tmp_path)
    assert isinstance(ds, datasets.DatasetDict) and set(ds) == {"train", "test"}
    train = load_gaze_dataset("egtea", data_dir=egtea_root, split="train", cache_dir=tmp_path)
    assert isinstance(train, datasets.Dataset) and train.column_names == SCHEMA
    assert list(train.features) == SCHEMA == list(gaze_example_features())
    assert (train[0]["action"], train[0]["verb"], train[0]["noun"]) == (3, 2, 1)
    assert (train[0]["camera_model"], train[0]["camera_params"]) == ("none", [])  # EGTEA ships no intrinsics


def test_clip_window_examples_short_clip_and_modes():
    gaze = np.random.default_rng(0).uniform(size=(20, 2)).astype(np.float32)
    types = np.array([1, 2, 3, 0, 4] * 4, np.int8)
    kwargs = dict(
        clip_id="c",
        video_path="v.mp4",
        clip_first_frame=100,
        fps=30,
        width=4,
        height=3,
        gaze=gaze,
        gaze_type=types,
        window_frames=8,
        window_stride=4,
    )
    keys = [key for key, _ in clip_window_examples(windows="all", **kwargs)]
    assert keys == ["c@100", "c@104", "c@108", "c@112"]
    ((key, ex),) = clip_window_examples(windows="first", **kwargs)
    assert ex["window_start"] == 100 and ex["num_frames"] == 8 and Path(ex["video_path"]).is_absolute()
    assert list(ex["valid"]) == [True, True, False, False, True, True, True, False]
    np.testing.assert_array_equal(ex["gaze"], gaze[:8])
    ((key, ex),) = clip_window_examples(windows="all", **{**kwargs, "window_frames": 64, "window_stride": 32})
    assert ex["num_frames"] == 20  # a clip shorter than a window is one example, not padded
    with pytest.raises(ValueError, match="windows must be one of"):
        list(clip_window_examples(windows="middle", **kwargs))
    # one name, one meaning: the data's "which windows of a clip" is not the sampler's window_mode
    from transformers_gazeflow.data import loading
    from transformers_gazeflow.models.gazeflow.configuration_gazeflow import WINDOW_MODES

    assert loading.CLIP_WINDOWS == ("all", "first") and not hasattr(loading, "WINDOW_MODES")
    assert not set(loading.CLIP_WINDOWS) & set(WINDOW_MODES)


def test_clip_window_examples_carry_the_camera_of_their_frame():
    from transformers_gazeflow.models.gazeflow.geometry import FisheyeCamera, PinholeCamera, camera_from_fields

    kwargs = dict(
        clip_id="c",
        video_path="v.mp4",
        clip_first_frame=0,
        fps=30,
        width=4,
        height=3,
        gaze=np.full((5, 2), 0.5, np.float32),
        gaze_type=np.ones(5, np.int8),
        windows="first",
        window_frames=8,
        window_stride=4,
    )
    ((_, ex),) = clip_window_examples(**kwargs)
    assert ex["camera_model"] == "none" and ex["camera_params"].size == 0
    ((_, ex),) = clip_window_examples(**kwargs, camera=PinholeCamera(5.0, 6.0, 2.0, 1.5, 4, 3))
    assert ex["camera_model"] == "PINHOLE" and ex["camera_params"].tolist() == [5.0, 6.0, 2.0, 1.5]
    fisheye = FisheyeCamera([3.0, 1.5, 1.0] + [0.01 * i for i in range(12)], 4, 3)
    ((_, ex),) = clip_window_examples(**kwargs, camera=fisheye)
    assert ex["camera_model"] == "FISHEYE624" and ex["camera_params"].tolist() == list(fisheye.params)
    assert camera_from_fields(ex["camera_model"], ex["camera_params"], 4, 3) == fisheye
    with pytest.raises(ValueError, match="the camera is of a 8x6 frame, the video 4x3"):
        list(clip_window_examples(**kwargs, camera=PinholeCamera(5.0, 6.0, 2.0, 1.5, 8, 6)))


PACKAGE = REPO / "src" / "transformers_gazeflow"


def _relative(paths, root=PACKAGE):
    return [path.relative_to(root).as_posix() for path in paths[1:]]


def test_the_cache_key_covers_the_package_modules_each_builder_imports():
    egtea = loading.builder_code_files(loading.builder_file("egtea"))
    assert egtea[0] == loading.builder_file("egtea")
    assert _relative(egtea) == [
        "data/egtea_format.py",
        "data/gaze_common.py",
        "data/gaze_types.py",
        "data/loading.py",
        "data/video.py",
        "models/gazeflow/geometry.py",
        "models/gazeflow/windows.py",
    ]
    synthetic = _relative(loading.builder_code_files(loading.builder_file("synthetic")))
    assert {
        "data/synthetic/dataset.py",
        "data/synthetic/gaze.py",
        "data/synthetic/scene.py",
        "data/synthetic/settings.py",
        "data/gaze_common.py",
        "data/loading.py",
        "data/video.py",
    } <= set(synthetic)
    for paths in (egtea, synthetic):  # __init__ files only re-export; the collator is not builder output
        assert not any(str(path).endswith(("__init__.py", "collator.py", "modeling_gazeflow.py")) for path in paths)


def test_the_cache_key_follows_a_subpackage_s_re_exports_to_their_modules(tmp_path):
    """A builder importing from a subpackage (``from pkg.sub import name``) depends on the modules its ``__init__``
    re-exports from, never on the ``__init__`` itself nor on the top package's."""
    package = tmp_path / "transformers_gazeflow"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .heavy import model\n")
    (package / "heavy.py").write_text("model = 1\n")
    (package / "sub" / "__init__.py").write_text("from .impl import name\n")
    (package / "sub" / "impl.py").write_text("from ..helper import x\nname = x\n")
    (package / "helper.py").write_text("x = 1\n")
    builder = tmp_path / "builder.py"
    builder.write_text("import transformers_gazeflow\nfrom transformers_gazeflow.sub import name\n")
    files = loading.builder_code_files(builder, package)
    assert files[0] == builder.resolve()
    assert _relative(files, package) == ["helper.py", "sub/impl.py"]


@pytest.mark.parametrize(
    "edited, builders_changed",
    [
        ("data/synthetic/scene.py", {"synthetic"}),
        ("data/gaze_common.py", {"egtea", "ego4d", "synthetic"}),
        ("data/egtea_format.py", {"egtea"}),
        ("data/ego4d_format.py", {"ego4d"}),
        ("data/gaze_types.py", {"egtea", "ego4d", "synthetic"}),
        ("data/loading.py", {"egtea", "ego4d", "synthetic"}),
        ("models/gazeflow/windows.py", {"egtea", "ego4d", "synthetic"}),
        ("models/gazeflow/modeling_gazeflow.py", set()),
        ("data/collator.py", set()),
    ],
)
def test_editing_a_module_changes_the_cache_key_of_exactly_the_builders_that_import_it(
    tmp_path, edited, builders_changed
):
    package = tmp_path / "transformers_gazeflow"
    shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    builders = {name: loading.builder_file(name) for name in ("egtea", "ego4d", "synthetic")}
    before = {name: loading._code_hash(path, package) for name, path in builders.items()}
    assert before == {name: loading._code_hash(path) for name, path in builders.items()}  # same code, same key
    with open(package / edited, "a", encoding="utf-8") as handle:
        handle.write("\n# a change\n")
    after = {name: loading._code_hash(path, package) for name, path in builders.items()}
    assert {name for name in builders if after[name] != before[name]} == builders_changed


def test_a_builder_code_change_gives_a_fresh_cache_folder(tmp_path, monkeypatch):
    """``gaze_builder`` passes the code hash to ``datasets``, whose cache folder ends in it."""
    builder = loading.gaze_builder("synthetic", tmp_path / "clips", cache_dir=tmp_path / "cache", config_name="tiny")
    assert Path(builder.cache_dir).name == loading._code_hash(loading.builder_file("synthetic"))
    monkeypatch.setattr(loading, "_code_hash", lambda path: "0123456789abcdef")
    again = loading.gaze_builder("synthetic", tmp_path / "clips", cache_dir=tmp_path / "cache", config_name="tiny")
    assert Path(again.cache_dir).name == "0123456789abcdef" and again.cache_dir != builder.cache_dir


LOAD = """
import transformers_gazeflow.data.loading as l
ds = l.load_gaze_dataset("egtea", data_dir={root!r}, split="train", cache_dir={cache!r})
print(l.builder_file("egtea"))
print(l.__file__)
print(l._code_hash(l.builder_file("egtea")))
print(ds[0]["clip_id"], ds.num_rows)
"""


def test_loads_from_another_cwd_with_relative_paths(egtea_root, tmp_path, monkeypatch):
    monkeypatch.chdir(egtea_root.parent)
    ds = load_gaze_dataset("egtea", data_dir=egtea_root.name, split="test", cache_dir=tmp_path)
    assert ds[0]["video_path"].startswith(str(egtea_root)) and Path(ds[0]["video_path"]).is_file()


def _can_build_wheels() -> bool:
    """pip and a setuptools that builds wheels without build isolation (bdist_wheel in setuptools >= 70.1, or wheel)."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        return False
    try:  # read the version without importing setuptools into the test process
        major, minor = (int(part) for part in importlib.metadata.version("setuptools").split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.mark.skipif(
    not _can_build_wheels(), reason="needs pip and setuptools>=70.1 (or wheel) to build a wheel offline"
)
def test_wheel_ships_the_builders_and_loads_them_outside_the_repository(egtea_root, tmp_path):
    wheel = build_wheel(tmp_path, timeout=180)
    names = set(zipfile.ZipFile(wheel).namelist())
    for builder in ("egtea_gaze", "ego4d_gaze"):
        assert f"transformers_gazeflow/_builders/{builder}/{builder}.py" in names
        assert f"transformers_gazeflow/_builders/{builder}/README.md" in names
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = run_python(
        LOAD.format(root=str(egtea_root), cache=str(tmp_path / "cache")), cwd=elsewhere, env=env, timeout=120
    ).splitlines()
    assert out[-4] == str(site / "transformers_gazeflow" / "_builders" / "egtea_gaze" / "egtea_gaze.py")
    assert out[-3].startswith(str(site)) and out[-1] == f"{egtea_clip_name(OP, 3, 18)} 1"
    assert out[-2] == loading._code_hash(loading.builder_file("egtea"))  # the same code keys the same cache
