"""The one schema of each file a user hands gazeflow (data/interface_files.py): every field checked for type, finite
value and plausible range, JSON numbers past a float refused where they are read, files confined to their folder,
and every failure one line naming the file and the field."""

from __future__ import annotations

import copy
import json
import os

import pytest

from transformers_gazeflow.data import interface_files
from transformers_gazeflow.data.interface_files import (
    InterfaceFileError,
    camera_intrinsics,
    check_streamer_graph,
    index_part_row,
    number,
    parse_json_object,
    prediction_summary,
    read_json_object,
    region_calibration,
    streamer_interface,
    wearer_calibration,
)
from transformers_gazeflow.models.gazeflow.choices import CALIBRATION_MODELS


def one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert "\n" not in text
    return text


# ------------------------------------------------------------------------------------------- JSON
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"fx": 1e400}', "f.json: fx: expected a finite number, got 1e400"),
        ('{"a": [1, {"b": -Infinity}]}', "f.json: a[1].b: expected a finite number, got -Infinity"),
        ('{"width": NaN}', "f.json: width: expected a finite number, got NaN"),
        ('{"n": ' + "9" * 5000 + "}", "f.json: n: expected a finite number, got 99999999999999999999..."),
        ("[1, 2]", "f.json: expected a JSON object {...} at the top, got list"),
        ('{"a": 1', "f.json: not valid JSON (Expecting ',' delimiter: line 1 column 8 (char 7))"),
    ],
)
def test_json_that_is_not_a_plain_object_of_finite_numbers_is_one_line(text, message):
    with pytest.raises(InterfaceFileError) as caught:
        parse_json_object(text, "f.json")
    assert one_line(caught) == message


def test_files_are_read_as_utf8_with_or_without_a_byte_order_mark(tmp_path, monkeypatch):
    (tmp_path / "bom.json").write_bytes(b'\xef\xbb\xbf{"scale": 1.5}')
    assert read_json_object(tmp_path / "bom.json", "a region calibration") == {"scale": 1.5}
    (tmp_path / "latin.json").write_bytes(b'{"name": "\xe9"}')
    cases = {
        tmp_path / "latin.json": "a region calibration must be UTF-8 text; byte 10 is not",
        tmp_path / "missing.json": "no such file (a region calibration)",
        tmp_path: "is a folder, expected a region calibration",
    }
    for path, message in cases.items():
        with pytest.raises(InterfaceFileError) as caught:
            read_json_object(path, "a region calibration")
        assert one_line(caught) == f"{path}: {message}"
    monkeypatch.setattr(interface_files, "MAX_JSON_BYTES", 8)
    with pytest.raises(InterfaceFileError, match=r"bom.json: 17 bytes is too large for a region calibration$"):
        read_json_object(tmp_path / "bom.json", "a region calibration")


@pytest.mark.parametrize(
    ("value", "kwargs", "expected"),
    [
        ("12", {}, "expected a finite number, got '12'"),
        (True, {}, "expected a finite number, got True"),
        (10**400, {"high": 1e6}, "expected a finite number <= 1000000, got " + "1" + "0" * 76 + "..."),
        (0.0, {"low": 0, "low_open": True}, "expected a finite number > 0, got 0.0"),
        (2.5, {"low": 1, "high": 4, "integer": True}, "expected an integer in [1, 4], got 2.5"),
        (None, {}, "expected a finite number, got None"),
    ],
)
def test_numbers_are_json_numbers_finite_and_in_range(value, kwargs, expected):
    with pytest.raises(InterfaceFileError) as caught:
        number(value, "f.json", "x", **kwargs)
    assert one_line(caught) == f"f.json: x: {expected}"
    assert number(3.0, "f.json", "x", 1, 4, integer=True) == 3 and isinstance(number(3, "f", "x"), float)


# ------------------------------------------------------------------------------------------- intrinsics
INTRINSICS = {"fx": 500, "fy": 500.5, "cx": 320, "cy": 240}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"width": 640}, "width, height: a frame size needs both (only width is given)"),
        ({"width": 640, "height": 0}, "height: expected an integer in [1, 65536], got 0"),
        ({"width": 640.5, "height": 480}, "width: expected an integer in [1, 65536], got 640.5"),
        ({"fx": -1}, "fx: expected a finite number in [0.001, 1000000], got -1"),
        ({"cy": "240"}, "cy: expected a finite number in [-1000000, 1000000], got '240'"),
    ],
)
def test_intrinsics_name_the_field_that_is_wrong(change, message):
    with pytest.raises(InterfaceFileError) as caught:
        camera_intrinsics({**INTRINSICS, **change}, "cam.json")
    assert one_line(caught) == f"cam.json: {message}"


def test_intrinsics_as_read_and_missing_fields():
    assert camera_intrinsics({**INTRINSICS, "width": 640.0, "height": 480}, "cam.json") == {
        "fx": 500.0,
        "fy": 500.5,
        "cx": 320.0,
        "cy": 240.0,
        "width": 640,
        "height": 480,
    }
    with pytest.raises(
        InterfaceFileError, match=r"^cam.json: cx: expected a principal point .* \(the field is missing"
    ):
        camera_intrinsics({"fx": 1, "fy": 1}, "cam.json")
    with pytest.raises(InterfaceFileError, match=r"^cam.json: width: expected a finite number, got 1e400$"):
        camera_intrinsics(parse_json_object('{"fx": 50, "width": 1e400}', "cam.json"), "cam.json")


# ------------------------------------------------------------------------------------------- calib.json
CALIBRATION = {
    "format": "gazeflow-wearer-calibration",
    "version": 1,
    "correction": "offset_scale",
    "offset": [-0.05, 0.03],
    "scale": [1.1, 0.9],
    "model": {"name": "models/a", "fingerprint": "0123abcd"},
    "fit": {"frames": 30},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"offset": "12"}, "offset: expected a list of two numbers [x, y], each in [-1, 1], got '12'"),
        ({"offset": [1e308, 0]}, "offset[0]: expected a finite number in [-1, 1], got 1e+308"),
        ({"offset": [0, 0, 0]}, "offset: expected a list of two numbers [x, y], each in [-1, 1], got [0, 0, 0]"),
        ({"scale": [1e-300, 1]}, "scale[0]: expected a finite number in [0.01, 100], got 1e-300"),
        ({"scale": [1, "2"]}, "scale[1]: expected a finite number in [0.01, 100], got '2'"),
        ({"correction": "offset"}, "scale: expected [1, 1] for an offset correction (offset_scale corrects the "),
        ({"version": 2}, "version: expected 1 (the version this gazeflow reads), got 2"),
        ({"model": "models/a"}, "model: expected an object {name, fingerprint}, got 'models/a'"),
        ({"model": {"name": "a"}}, "model.fingerprint: expected the model's fingerprint (the field is missing)"),
        ({"fit": [1]}, "fit: expected an object, got [1]"),
        ({"format": "x"}, "format: expected 'gazeflow-wearer-calibration': this is not a gazeflow calibration"),
    ],
)
def test_a_calibration_file_names_the_field_that_is_wrong(change, message):
    with pytest.raises(InterfaceFileError) as caught:
        wearer_calibration({**CALIBRATION, **change}, "calib.json", CALIBRATION_MODELS)
    assert one_line(caught).startswith(f"calib.json: {message}")


def test_a_calibration_file_as_read():
    assert wearer_calibration(CALIBRATION, "calib.json", CALIBRATION_MODELS) == {
        "correction": "offset_scale",
        "offset": (-0.05, 0.03),
        "scale": (1.1, 0.9),
        "model_name": "models/a",
        "model_fingerprint": "0123abcd",
        "fit": {"frames": 30},
    }


# ------------------------------------------------------------------------------------------- small files
UNITS = ("frames", "clips")
REGIONS = {
    "format": "gazeflow-region-calibration",
    "version": 2,
    "exchangeable": "frames",
    "levels": [0.5, 0.9],
    "factors": [1.25, 2.5],
    "min_radius_px": 1.0,
    "split": "validation",
}


def test_region_calibration_version_1_and_2():
    version_1 = region_calibration({"scale": 1.12, "split": "validation"}, "r.json", UNITS)
    assert version_1 == {"levels": None, "factors": (1.12,), "min_radius_px": 0.0, "exchangeable": None}
    for value, shown in ((1e-300, "1e-300"), ("1.1", "'1.1'"), (0, "0")):
        with pytest.raises(InterfaceFileError) as caught:
            region_calibration({"scale": value}, "r.json", UNITS)
        assert one_line(caught) == f"r.json: scale: expected a finite number in [0.01, 100], got {shown}"
    version_2 = region_calibration(REGIONS, "r.json", UNITS)
    assert version_2 == {"levels": (0.5, 0.9), "factors": (1.25, 2.5), "min_radius_px": 1.0, "exchangeable": "frames"}
    for change, message in (
        ({"version": True}, "version: expected 2 (or no version: a single 'scale'), got True"),
        ({"version": 3}, "version: expected 2 (or no version: a single 'scale'), got 3"),
        ({"format": "x"}, "format: expected 'gazeflow-region-calibration', got 'x'"),
        ({"levels": []}, "levels: expected a non-empty list of numbers, got []"),
        ({"levels": [0.5, 1.5]}, "levels[1]: expected a finite number in (0, 1], got 1.5"),
        ({"levels": [0.5, 1]}, "levels: expected shares in (0, 1), increasing, got [0.5, 1.0]"),
        ({"levels": [0.9, 0.5]}, "levels: expected shares in (0, 1), increasing, got [0.9, 0.5]"),
        ({"factors": [1.25]}, "factors: expected one factor per level (2), got 1"),
        ({"factors": [1.25, 1e300]}, "factors[1]: expected a finite number in [0, 1000000], got 1e+300"),
        ({"factors": [1.25, -1]}, "factors[1]: expected a finite number in [0, 1000000], got -1"),
        ({"factors": [1.25, "2"]}, "factors[1]: expected a finite number in [0, 1000000], got '2'"),
        ({"min_radius_px": -1}, "min_radius_px: expected a finite number in [0, 1000000], got -1"),
        ({"exchangeable": "pixels"}, "exchangeable: expected one of frames, clips, got 'pixels'"),
    ):
        with pytest.raises(InterfaceFileError) as caught:
            region_calibration({**REGIONS, **change}, "r.json", UNITS)
        assert one_line(caught) == f"r.json: {message}"
    with pytest.raises(InterfaceFileError) as caught:
        region_calibration({key: value for key, value in REGIONS.items() if key != "min_radius_px"}, "r.json", UNITS)
    assert one_line(caught) == "r.json: min_radius_px: expected rho, native pixels (the field is missing)"
    with pytest.raises(InterfaceFileError) as caught:
        region_calibration([1.5], "r.json", UNITS)
    assert one_line(caught) == "r.json: (top): expected a JSON object, got 'list'"


def test_summary_and_index_rows():
    summary = {"video": "a.mp4", "frames": 30, "fps": 24.0, "timings": {"predict_s": 1.5}}
    assert prediction_summary(summary, "s.json") is summary
    for change, message in (
        ({"frames": "30"}, "frames: expected an integer >= 0, got '30'"),
        ({"timings": []}, "timings.predict_s: expected seconds (the field is missing)"),
        ({"fps": 0}, "fps: expected a finite number > 0, got 0"),
    ):
        with pytest.raises(InterfaceFileError) as caught:
            prediction_summary({**summary, **change}, "s.json")
        assert one_line(caught) == f"s.json: {message}"
    assert index_part_row({"order": "3", "status": "ok"}, "p.csv", 2)["order"] == "3"
    with pytest.raises(InterfaceFileError, match=r"^p.csv: line 4: order: expected a whole number >= 0, got '-1'$"):
        index_part_row({"order": "-1", "status": "ok"}, "p.csv", 4)
    with pytest.raises(InterfaceFileError, match=r"^p.csv: line 2: status: expected one of ok, failed, skipped"):
        index_part_row({"order": "1", "status": "done"}, "p.csv", 2)


# ------------------------------------------------------------------------------------------- streamer.json
def tensor(name, shape, dtype="float32"):
    return {"name": name, "shape": shape, "dtype": dtype}


STATE = [tensor("state.frame_index", [], "int64"), tensor("state.ring.key", [4, 2, 8, 16])]
STREAMER = {
    "format": "gazeflow-streamer-step/1",
    "file": "step.onnx",
    "num_samples": 4,
    "num_steps": 3,
    "inputs": [tensor("frame", [1, 3, 32, 32]), tensor("noise", [1, 4, 1, 2]), *STATE],
    "outputs": [
        tensor("gaze_samples", [1, 4, 2]),
        tensor("gaze_point", [1, 2]),
        *({**entry, "name": "next_" + entry["name"]} for entry in STATE),
    ],
}


@pytest.fixture
def export(tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "step.onnx").write_bytes(b"graph")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "step.onnx").write_bytes(b"foreign graph")
    return folder


def changed(path: str, value):
    record = copy.deepcopy(STREAMER)
    *keys, last = path.split(".")
    target = record
    for key in keys:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is KeyError:
        del target[int(last) if isinstance(target, list) else last]
    else:
        target[int(last) if isinstance(target, list) else last] = value
    return record


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "file",
            "../other/step.onnx",
            "file: expected one file name inside {folder} (no path), got '../other/step.onnx'",
        ),
        ("file", "{absolute}", "file: expected one file name inside {folder} (no path), got '/"),
        ("file", "..", "file: expected one file name inside {folder} (no path), got '..'"),
        ("file", "missing.onnx", "file: expected a file inside {folder} (not a link out of it), got 'missing.onnx'"),
        ("file", "link.onnx", "file: expected a file inside {folder} (not a link out of it), got 'link.onnx'"),
        ("inputs", KeyError, "inputs: expected a list of tensors (the field is missing)"),
        ("num_samples", KeyError, "num_samples: expected K (the field is missing)"),
        ("num_samples", "4", "num_samples: expected an integer in [1, 16777216], got '4'"),
        ("inputs.2.dtype", "quux", "inputs[2].dtype: expected one of float32, float16, float64, int64, int32, bool"),
        ("inputs.3.shape", [4, -2], "inputs[3].shape[1]: expected an integer in [0, 2147483648], got -2"),
        ("inputs.3.shape", [1 << 20, 1 << 20], "inputs[3].shape: expected at most 17179869184 elements"),
        ("inputs.1.shape", [1, 5, 1, 2], "inputs[1]: expected noise of shape [1, 4, 1, 2] float32"),
        ("inputs.0.name", "image", "inputs: expected frame, noise first, got ['image', 'noise']"),
        ("inputs.3.name", "ring.key", "inputs: expected the state tensors after frame and noise, named state.*"),
        (
            "outputs.3.shape",
            [4, 2, 8, 8],
            "outputs[3]: expected next_state.ring.key [4, 2, 8, 16] float32 (as inputs[3] state.ring.key), got "
            "['next_state.ring.key', [4, 2, 8, 8], 'float32']",
        ),
        ("outputs.3", KeyError, "outputs: expected 4 tensors (gaze, point, one next_ per state input), got 3"),
        ("format", "gazeflow-streamer-step/0", "format: expected 'gazeflow-streamer-step/1' (export again"),
        ("noise_correlation", 1.0, "noise_correlation: expected a number in [0, 1) (0: independent frames), got 1.0"),
        ("noise_correlation", -0.1, "noise_correlation: expected a finite number in [0, 1], got -0.1"),
        ("noise_correlation", "0.5", "noise_correlation: expected a finite number in [0, 1], got '0.5'"),
        ("noise_scale", 0, "noise_scale: expected a finite number > 0, got 0"),
        ("noise_scale", -0.5, "noise_scale: expected a finite number > 0, got -0.5"),
        ("noise_scale", "0.5", "noise_scale: expected a finite number > 0, got '0.5'"),
    ],
)
def test_a_streamer_json_names_the_field_that_is_wrong(export, path, value, message):
    os.symlink(export.parent / "other" / "step.onnx", export / "link.onnx")
    absolute = str(export / "step.onnx")
    value = value.replace("{absolute}", absolute) if isinstance(value, str) else value
    with pytest.raises(InterfaceFileError) as caught:
        streamer_interface(changed(path, value), export, "streamer.json")
    expected = message.replace("{folder}", str(export)).replace("{absolute}", absolute)
    assert one_line(caught).startswith(f"streamer.json: {expected}")


def test_a_streamer_json_as_read_and_matched_against_its_graph(export):
    interface = streamer_interface(json.loads(json.dumps(STREAMER)), export, "streamer.json")
    assert interface["path"] == export / "step.onnx"
    correlated = streamer_interface({**STREAMER, "noise_correlation": 0.5}, export, "streamer.json")
    assert correlated["noise_correlation"] == 0.5  # the AR(1) prior's rho reaches the stepper
    scaled = streamer_interface({**STREAMER, "noise_scale": 0.7}, export, "streamer.json")
    assert scaled["noise_scale"] == 0.7  # x_0's standard deviation reaches the stepper
    assert interface["state_bytes"] == 8 + 4 * 2 * 8 * 16 * 4
    graph_inputs = [
        (e["name"], e["shape"], {"float32": "tensor(float)", "int64": "tensor(int64)"}[e["dtype"]])
        for e in STREAMER["inputs"]
    ]
    graph_outputs = [
        (e["name"], e["shape"], {"float32": "tensor(float)", "int64": "tensor(int64)"}[e["dtype"]])
        for e in STREAMER["outputs"]
    ]
    check_streamer_graph(interface, graph_inputs, graph_outputs, "streamer.json")
    wrong_type = [*graph_inputs[:2], ("state.frame_index", [], "tensor(float16)"), graph_inputs[3]]
    wrong_shape = [*graph_inputs[:3], ("state.ring.key", [4, 2, 8, 8], "tensor(float)")]
    for inputs, message in (
        (wrong_type, "inputs state.frame_index: expected the graph's [] float16, got [[], 'int64']"),
        (wrong_shape, "inputs state.ring.key: expected the graph's [4, 2, 8, 8] float32, got [[4, 2, 8, 16], "),
        (graph_inputs[:3], "inputs: expected the graph's inputs (3 of them, starting ['frame', 'noise', 'state."),
        (graph_inputs[::-1], "inputs: expected the graph's inputs (4 of them, starting ['state.ring.key', "),
    ):
        with pytest.raises(InterfaceFileError) as caught:
            check_streamer_graph(interface, inputs, graph_outputs, "streamer.json")
        assert one_line(caught).startswith(f"streamer.json: {message}")
    with pytest.raises(InterfaceFileError, match=r"^streamer.json: outputs next_state.ring.key: expected the graph's"):
        check_streamer_graph(
            interface, graph_inputs, [*graph_outputs[:3], (graph_outputs[3][0], [1], "tensor(float)")], "streamer.json"
        )


def test_the_readers_of_calibrations_check_them_here(tmp_path):
    from transformers_gazeflow.gaze.wearer import WearerCalibration
    from transformers_gazeflow.hub.model_folders import ModelFolderError, load_region_calibration

    (tmp_path / "region_calibration.json").write_text('{"scale": 1e-300}')
    with pytest.raises(ModelFolderError) as caught:
        load_region_calibration(tmp_path)
    region = tmp_path / "region_calibration.json"
    assert one_line(caught) == f"{region}: scale: expected a finite number in [0.01, 100], got 1e-300"
    (tmp_path / "calib.json").write_text(json.dumps({**CALIBRATION, "offset": "12"}))
    with pytest.raises(ValueError) as caught:
        WearerCalibration.read(tmp_path / "calib.json")
    assert one_line(caught) == (
        f"{tmp_path / 'calib.json'}: offset: expected a list of two numbers [x, y], each in [-1, 1], got '12'"
    )
    calibration = WearerCalibration.from_json(json.dumps(CALIBRATION))
    assert (calibration.offset, calibration.scale) == ((-0.05, 0.03), (1.1, 0.9))
    far = WearerCalibration("offset", (1.5, 0.0), (1.0, 1.0), "models/a", "0123abcd")
    with pytest.raises(ValueError, match=r"c.json \(not written\)|c.json: offset\[0\]: expected a finite number"):
        far.write(tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()
