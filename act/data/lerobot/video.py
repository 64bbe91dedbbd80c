"""Camera frames as mp4 through PyAV: encode an episode, append episodes into one file, decode by time.

LeRobot 0.6.1 encodes with libsvtav1, yuv420p, a keyframe every 2 frames (g=2), crf 30, preset 12
(``lerobot/configs/video.py``), one mp4 per episode, then appends episodes by copying packets
(no re-encoding). ``from_timestamp`` of an episode is computed here from integer frame counts,
never by adding float durations: after many appended episodes the float sum drifts from the
packets' timestamps until frames miss LeRobot's 1e-4 s tolerance (lerobot#3177).
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from fractions import Fraction
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from act.common.errors import InputError, RunError
from act.common.interrupt import stop_point
from act.common.io import atomic_path

os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 prints a banner per encoder otherwise: errors only

import av  # noqa: E402 - after SVT_LOG, read when the first encoder starts
import av.logging  # noqa: E402

PIX_FMT = "yuv420p"
GOP = 2  # a keyframe every 2 frames: any frame decodes after at most one other
CRF = 30
# Encoders in order of preference, with their options. AV1 as LeRobot; h264 if this PyAV lacks both.
ENCODERS = (
    ("libsvtav1", {"g": str(GOP), "crf": str(CRF), "preset": "12"}),
    ("libaom-av1", {"g": str(GOP), "crf": str(CRF), "cpu-used": "8", "row-mt": "1"}),
    ("libx264", {"g": str(GOP), "crf": "23", "preset": "veryfast"}),
)

log = logging.getLogger(__name__)


class VideoError(InputError):
    """An mp4 that cannot be read as expected; the message starts with the file's path."""


def choose_encoder() -> tuple[str, dict[str, str]]:
    """The first encoder of ``ENCODERS`` this PyAV build has; a warning when it is not libsvtav1."""
    available = av.codecs_available
    for name, options in ENCODERS:
        if name in available:
            if name != ENCODERS[0][0]:
                log.warning(
                    "this PyAV build has no libsvtav1 encoder: videos are encoded with %s instead "
                    "(LeRobot decodes it too)",
                    name,
                )
            return name, dict(options)
    raise RunError(
        f"this PyAV build has none of the encoders {[n for n, _ in ENCODERS]}; use images=image (lossless PNG) instead"
    )


def video_info(codec: str, height: int, width: int, fps: int) -> dict:
    """The ``info`` block of a video feature in ``meta/info.json``, as LeRobot's ``get_video_info`` fills it."""
    canonical = {"libsvtav1": "av1", "libaom-av1": "av1", "libx264": "h264"}.get(codec, codec)
    preset = dict(ENCODERS).get(codec, {}).get("preset")
    return {
        "video.height": height,
        "video.width": width,
        "video.codec": canonical,
        "video.pix_fmt": PIX_FMT,
        "video.fps": fps,
        "video.channels": 3,
        "has_audio": False,
        "is_depth_map": False,
        "video.g": GOP,
        "video.crf": CRF,
        "video.preset": int(preset) if preset and preset.isdigit() else preset,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {},
    }


def encode_frames(path: Path | str, frames: Iterable[np.ndarray], fps: int, encoder: tuple[str, dict]) -> int:
    """Encode (H, W, 3) uint8 RGB frames, frame ``i`` at time ``i / fps``, into ``path`` (atomically);
    return the number of frames.

    A muxer refusing the encoder's packets (FFmpeg's EINVAL, e.g. "non monotonically increasing dts") is
    retried once when ``frames`` can be read twice (an array or a sequence): it was seen once, under load,
    on a CI machine and not reproduced in 400 encodes of the same frames elsewhere. A second refusal is a
    one-line error with FFmpeg's own reason.
    """
    rereadable = isinstance(frames, (Sequence, np.ndarray))
    level = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)  # FFmpeg's reason then travels in the exception (err.log)
    try:
        if rereadable:
            try:
                return _encode_once(path, frames, fps, encoder)
            except av.error.FFmpegError as err:
                log.warning("%s; encoding again", _refusal(path, encoder, err))
        try:
            return _encode_once(path, frames, fps, encoder)
        except av.error.FFmpegError as err:
            raise RunError(
                f"{_refusal(path, encoder, err)}; convert again (finished episodes are kept) or use images=image"
            ) from err
    finally:
        av.logging.set_level(level)


def _refusal(path: Path | str, encoder: tuple[str, dict], err: av.error.FFmpegError) -> str:
    reason = (err.log[2] if err.log else err.strerror or str(err)).strip()
    return f"{path}: the mp4 muxer refused the {encoder[0]} encoder's packets ({reason})"


def _encode_once(path: Path | str, frames: Iterable[np.ndarray], fps: int, encoder: tuple[str, dict]) -> int:
    name, options = encoder
    count = 0
    with atomic_path(path) as tmp:
        with av.open(str(tmp), "w", format="mp4") as container:
            stream = container.add_stream(name, rate=fps, options=options)
            stream.pix_fmt = PIX_FMT
            try:
                for frame in frames:
                    stop_point()  # Ctrl-C during a conversion: between two frames
                    if count == 0:
                        stream.height, stream.width = frame.shape[:2]
                    video_frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")
                    video_frame.pts = count  # in 1/fps: the encoder's time base
                    video_frame.time_base = Fraction(1, fps)
                    container.mux(stream.encode(video_frame))
                    count += 1
            except BaseException:
                if count:  # end the stream, or SVT-AV1 prints "Svt[error]: deinit called without sending EOS!"
                    stream.encode()  # flushed and dropped: the file is discarded
                raise
            if count == 0:
                raise InputError(f"no frames to encode into {path}")
            container.mux(stream.encode())
    return count


def concatenate(parts: Sequence[Path], lengths: Sequence[int], out: Path | str, fps: int) -> None:
    """Append the episode videos ``parts`` (``lengths[i]`` frames each) into ``out`` by copying packets.

    Episode ``i`` starts at ``sum(lengths[:i]) / fps`` seconds: its packets are shifted by that many
    frame periods, an exact integer count of the stream's time base.
    """
    with atomic_path(out) as tmp:
        with (
            av.open(str(parts[0])) as first,
            av.open(str(tmp), "w", format="mp4", options={"movflags": "faststart"}) as container,
        ):
            template = first.streams.video[0]
            stream = container.add_stream_from_template(template, opaque=True)  # copy packets, no codec
            stream.time_base = template.time_base
            frames_before = 0
            for part, length in zip(parts, lengths):
                with av.open(str(part)) as source:
                    src = source.streams.video[0]
                    shift = Fraction(frames_before, fps) / src.time_base
                    if shift.denominator != 1:
                        raise VideoError(
                            f"{part}: time base {src.time_base} cannot place frame {frames_before} "
                            f"at {frames_before}/{fps} s exactly"
                        )
                    for packet in source.demux(src):
                        if packet.dts is None:  # the demuxer's final flush packet
                            continue
                        packet.pts += int(shift)
                        packet.dts += int(shift)
                        packet.stream = stream
                        container.mux(packet)
                frames_before += length


def check_video(path: Path, until_s: float, fps: int) -> tuple[int, ...]:
    """The (H, W, 3) of ``path``'s frames; ``VideoError`` unless it opens and decodes a frame at ``until_s`` - 1/fps
    (its last needed frame)."""
    reader = FrameDecoder(fps, max_open=1)
    try:
        return reader.frame(path, max(0.0, until_s - 1.0 / fps)).shape
    finally:
        reader.close()


class FrameDecoder:
    """Frames of mp4 files by time, for one process: keeps up to ``max_open`` files open.

    With a keyframe every ``g`` frames, one frame costs a seek and at most ``g`` decodes; a whole
    episode is decoded front to back once (``frames``). Each file gets a one-thread decoder: loader
    workers already use the cores, and a frame-threaded decoder spends more CPU per random frame
    (measured: 1.1 against 1.6 ms per 120x160 AV1 frame).
    """

    def __init__(self, fps: int, max_open: int = 8):
        self.fps = fps
        self.max_open = max_open
        self._open: OrderedDict[str, tuple] = OrderedDict()

    def _container(self, path: Path):
        """(container, its video stream, a decoder of that stream), opened on first use."""
        key = str(path)
        entry = self._open.pop(key, None)
        if entry is None:
            try:
                container = av.open(key)
                if not container.streams.video:
                    raise VideoError(f"{path}: no video stream")
            except (av.error.FFmpegError, OSError) as err:
                raise VideoError(f"{path}: not a readable mp4 (truncated or corrupt?): {err}") from err
            stream = container.streams.video[0]
            decoder = av.CodecContext.create(stream.codec_context.name, "r")
            decoder.extradata = stream.codec_context.extradata
            decoder.thread_count = 1
            entry = (container, stream, decoder)
            while len(self._open) >= self.max_open:
                self._open.popitem(last=False)[1][0].close()
        self._open[key] = entry
        return entry

    def _decode_from(self, path: Path, start_s: float):
        """Decoded frames from the keyframe at or before ``start_s`` on, as (time in s, frame)."""
        container, stream, decoder = self._container(path)
        try:
            container.seek(
                int(Fraction(start_s).limit_denominator(10**6) / stream.time_base),
                stream=stream,
                backward=True,
                any_frame=False,
            )
            decoder.flush_buffers()
            for packet in container.demux(stream):  # the last, empty packet flushes the decoder
                for frame in decoder.decode(packet):
                    if frame.pts is not None:
                        yield float(frame.pts * stream.time_base), frame
        except av.error.FFmpegError as err:
            self._open.pop(str(path), None)
            container.close()
            raise VideoError(f"{path}: decoding failed near {start_s:.3f} s (truncated or corrupt?): {err}") from err

    def frame(self, path: Path, time_s: float) -> np.ndarray:
        """The (H, W, 3) uint8 RGB frame shown at ``time_s`` (within half a frame period)."""
        half = 0.5 / self.fps
        for when, frame in self._decode_from(path, time_s):
            if abs(when - time_s) < half:
                return frame.to_ndarray(format="rgb24")
            if when > time_s:
                break
        raise VideoError(f"{path}: no frame at {time_s:.4f} s (the file ends earlier: truncated?)")

    def frames(self, path: Path, start_s: float, count: int) -> np.ndarray:
        """(count, H, W, 3) uint8: the frames shown at ``start_s + i / fps``, decoded in one pass."""
        out: list[np.ndarray | None] = [None] * count
        for when, frame in self._decode_from(path, start_s):
            i = round((when - start_s) * self.fps)
            if i >= count:
                break
            if i >= 0 and abs(when - start_s - i / self.fps) < 0.5 / self.fps:
                out[i] = frame.to_ndarray(format="rgb24")
        missing = [i for i, f in enumerate(out) if f is None]
        if missing:
            raise VideoError(
                f"{path}: {len(missing)} of {count} frames from {start_s:.4f} s not found (first: "
                f"frame {missing[0]}); the file is truncated or its timestamps are off"
            )
        return np.stack(out)

    def close(self) -> None:
        while self._open:
            self._open.popitem()[1][0].close()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio (dB) of uint8 images ``b`` against ``a``; inf when identical."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))
