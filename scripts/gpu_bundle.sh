#!/usr/bin/env bash
# Packages that `make gpu-check` needs beyond a stock CUDA PyTorch image, for a GPU machine that
# cannot reach PyPI: Python 3.12 wheels installed into .gpu/site here, trimmed to what the project
# imports (dm_control's locomotion and dog assets are 100 MB it never reads), small enough to copy.
#
#   bash scripts/gpu_bundle.sh                      # here, with PyPI
#   PYTHONPATH=$PWD/.gpu/site:$PWD MUJOCO_GL=egl make gpu-check PY=python3    # there
set -euo pipefail
cd "$(dirname "$0")/.."
PYVER=${PYVER:-3.12}
SITE=.gpu/site
PACKAGES="mujoco==3.8.1 dm-control==1.0.41 gym-aloha==0.1.5 hydra-core==1.3.2 omegaconf==2.3.0
  antlr4-python3-runtime==4.9.3 dm-env labmaze dm-tree pyopengl glfw"
rm -rf .gpu && mkdir -p "$SITE" .gpu/wheels
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
# omegaconf's parser runtime is published as a source archive only: build its (pure Python) wheel here.
python3 -m pip wheel --quiet --no-deps -w .gpu/wheels antlr4-python3-runtime==4.9.3
# shellcheck disable=SC2086
python3 -m pip install --quiet --no-deps --no-compile --target "$SITE" --only-binary=:all: \
  --python-version "$PYVER" --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform any --find-links .gpu/wheels $PACKAGES
# Unread here: dm_control's locomotion (and labmaze, which only it imports), the dog's meshes, PyOpenGL's
# Windows DLLs and GLES modules (rendering goes through EGL + desktop GL), MuJoCo's C headers.
rm -rf .gpu/wheels "$SITE"/bin "$SITE"/dm_control/locomotion "$SITE"/dm_control/suite/dog_assets "$SITE"/labmaze* \
  "$SITE"/OpenGL/DLLS "$SITE"/OpenGL/GLES1 "$SITE"/OpenGL/GLES2 "$SITE"/OpenGL/GLES3 "$SITE"/mujoco/include
du -sh "$SITE"
