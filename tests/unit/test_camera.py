"""Where things land in a camera's image (act/envs/camera.py): the projection against MuJoCo's own rendering,
and the box and crop arithmetic that turn projected points into a ``policy.image_crop``."""

from __future__ import annotations

import numpy as np
import pytest

from act.common.errors import InputError
from act.envs import make_env
from act.envs.camera import bounding_box, crop_around, draw_extent, in_window, project, tracked_points

SIZE = (120, 160)


@pytest.fixture(scope="module")
def insertion_env():
    env = make_env("insertion", cameras=["top"], image_size=SIZE)
    yield env
    env.close()


@pytest.mark.parametrize("seed", [0, 7])
def test_the_projection_lands_on_the_rendered_peg_and_socket(insertion_env, seed):
    ts = insertion_env.reset(seed=seed)
    frame = ts.observation["images"]["top"].astype(int)  # (H, W, 3)
    peg, socket = tracked_points(insertion_env)[:2]  # the task's objects first: red peg, blue socket
    for point, channel in ((peg, 0), (socket, 2)):
        row, col = np.floor(project(insertion_env.physics, "top", point[None], SIZE)[0]).astype(int)
        patch = frame[row - 1 : row + 2, col - 1 : col + 2].reshape(-1, 3)  # (9, 3) around the pixel
        others = [c for c in range(3) if c != channel]
        # Some pixel at the projected centre is clearly the part's colour (the table is grey).
        assert (patch[:, channel] - patch[:, others].max(axis=1)).max() > 60


def test_a_point_behind_the_camera_has_no_pixel(insertion_env):
    insertion_env.reset(seed=0)
    camera = np.asarray(insertion_env.physics.named.data.cam_xpos["top"])
    axis = np.asarray(insertion_env.physics.named.data.cam_xmat["top"]).reshape(3, 3)[:, 2]  # the camera's +z: behind
    pixels = project(insertion_env.physics, "top", np.stack([camera + axis, camera - axis]), SIZE)
    assert np.isnan(pixels[0]).all() and np.isfinite(pixels[1]).all()
    assert pixels[1] == pytest.approx([SIZE[0] / 2, SIZE[1] / 2])  # straight ahead: the image's centre


def test_the_box_holds_exactly_the_points_in_the_image():
    pixels = np.array([[10.2, 20.7], [30.9, 5.0], [np.nan, np.nan], [-3.0, 50.0], [119.5, 159.9]])
    assert bounding_box(pixels, SIZE) == (10, 5, 110, 155)  # rows 10-119, cols 5-159; the NaN and row -3 left out
    assert in_window(pixels, bounding_box(pixels, SIZE)).tolist() == [True, True, False, False, True]
    assert bounding_box(pixels[2:4], SIZE) is None


def test_the_suggested_crop_grows_the_box_and_stays_in_the_image():
    assert crop_around((50, 40, 20, 30), SIZE, 6) == (44, 34, 32, 42)
    assert crop_around((2, 150, 10, 10), SIZE, 6) == (0, 144, 18, 16)  # clipped at the top and the right
    with pytest.raises(InputError, match="margin"):
        crop_around((50, 40, 20, 30), SIZE, -1)


def test_the_picture_marks_the_points_and_outlines_each_window():
    frame = np.zeros((8, 10, 3), np.uint8)
    picture = draw_extent(frame, np.array([[2.5, 3.5]]), [((1, 1, 4, 5), (0, 255, 0))], scale=3)
    assert picture.shape == (24, 30, 3)
    assert picture[7, 10].tolist() == [255, 230, 0]  # the point's pixel (2, 3), at its centre
    assert picture[3, 3].tolist() == [0, 255, 0] and picture[14, 14].tolist() == [0, 255, 0]  # the window's corners
    assert picture[10, 10 + 3].tolist() == [0, 0, 0]  # inside, away from the point: untouched
