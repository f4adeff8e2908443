import numpy as np
import pytest

from transformers_gazeflow.data.video import VideoDecodeError, decode_frames, iter_frames, probe_video, write_video

from ..conftest import gradient_frames
from .raw_fixtures import write_clip, write_cut_clip


def test_probe_real_mp4(bikes_mp4):
    info = probe_video(bikes_mp4)
    assert (info.num_frames, info.width, info.height) == (250, 640, 272)
    assert info.fps == pytest.approx(25.0)
    assert info.duration_s == pytest.approx(10.0)


def test_window_from_the_middle_equals_decoding_from_the_start(bikes_mp4):
    window = decode_frames(bikes_mp4, start=137, num_frames=16)
    assert window.shape == (16, 272, 640, 3) and window.dtype == np.uint8
    from_start = [f for i, f in enumerate(iter_frames(bikes_mp4)) if 137 <= i < 153]
    assert len(from_start) == 16
    assert np.array_equal(window, np.stack(from_start))


def test_asking_past_the_end_names_the_file(bikes_mp4):
    with pytest.raises(VideoDecodeError, match="bikes.mp4"):
        decode_frames(bikes_mp4, start=245, num_frames=10)
    assert decode_frames(bikes_mp4, start=245, num_frames=10, allow_short=True).shape[0] == 5


@pytest.mark.parametrize("height,width", [(17, 33), (32, 48)])
def test_write_and_read_back_any_size(tmp_path, height, width):
    frames = gradient_frames(12, height, width)
    path = write_video(tmp_path / "clip.mp4", frames, fps=24)
    info = probe_video(path)
    assert (info.num_frames, info.width, info.height, info.fps) == (12, width, height, 24.0)
    decoded = decode_frames(path, 5, 4)
    assert decoded.shape == (4, height, width, 3)
    # lossy codec: close, and each frame closest to its own source frame
    errors = np.abs(decoded.astype(int)[:, None] - frames.astype(int)[None]).mean(axis=(2, 3, 4))
    assert list(errors.argmin(axis=1)) == [5, 6, 7, 8]


def test_grayscale_frames_come_back_as_rgb(tmp_path):
    gray = np.tile(np.linspace(0, 255, 32, dtype=np.uint8), (16, 1))
    path = write_video(tmp_path / "gray.mp4", [gray] * 3, fps=30)
    frame = decode_frames(path, 0, 1)[0]
    assert frame.shape == (16, 32, 3)
    assert np.abs(frame[..., 0].astype(int) - frame[..., 2].astype(int)).max() <= 2


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.mp4"):
        probe_video(tmp_path / "nope.mp4")


def test_zero_byte_text_and_truncated_files(tmp_path, bikes_mp4):
    empty = tmp_path / "empty.mp4"
    empty.write_bytes(b"")
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 20)
    truncated = tmp_path / "truncated.mp4"
    truncated.write_bytes(bikes_mp4.read_bytes()[:4000])
    for bad in (empty, text, truncated):
        with pytest.raises(VideoDecodeError, match=bad.name):
            decode_frames(bad, 0, 4)


def test_write_video_rejects_bad_frames(tmp_path):
    with pytest.raises(ValueError, match="uint8"):
        write_video(tmp_path / "x.mp4", [np.zeros((8, 8, 3), np.float32)], fps=24)
    with pytest.raises(ValueError, match="no frames"):
        write_video(tmp_path / "y.mp4", [], fps=24)


@pytest.mark.parametrize("index_first", [True, False])
def test_a_clip_cut_short_is_found_by_probe_check_end(tmp_path, index_first):
    """An mp4 cut after its index still opens and lists every frame; ``check_end`` finds the cut
    by demuxing from the last key frame (no decoding) and names the file. One whose index was cut off does not open."""
    cut = write_cut_clip(tmp_path / "cut.mp4", 48, keep=0.5, index_first=index_first)
    if index_first:
        assert probe_video(cut).num_frames == 48  # the container still lists all 48 frames
    with pytest.raises(
        VideoDecodeError, match=r"cut\.mp4(.*)truncated \(its container lists 48 frames" if index_first else r"cut\.mp4"
    ):
        probe_video(cut, check_end=True)
    whole = write_clip(tmp_path / "whole.mp4", 48)
    assert probe_video(whole, check_end=True).num_frames == 48
    whole_first = write_cut_clip(tmp_path / "whole_first.mp4", 48, keep=1.0, index_first=True)
    assert probe_video(whole_first, check_end=True).num_frames == 48


def test_check_end_accepts_real_mp4s_with_key_frames_inside(bikes_mp4):
    assert probe_video(bikes_mp4, check_end=True).num_frames == 250


def test_an_unknown_codec_is_a_decode_error_naming_the_file(tmp_path, bikes_mp4):
    # the sample-description fourcc replaced: FFmpeg opens the container but has no decoder for the stream
    strange = tmp_path / "strange_codec.mp4"
    strange.write_bytes(bikes_mp4.read_bytes().replace(b"avc1", b"zzzz"))
    with pytest.raises(VideoDecodeError, match=r"strange_codec\.mp4.*codec is unknown"):
        probe_video(strange)
    with pytest.raises(VideoDecodeError, match=r"strange_codec\.mp4.*codec is unknown"):
        next(iter_frames(strange))
