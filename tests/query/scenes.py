"""The box scenes of tests/mapping/scenes.py, shared with the query tests.

tests/ is not a package, so the module is loaded by path once and re-exported.
"""

import importlib.util
import sys
from pathlib import Path

_NAME = "ovman_test_box_scenes"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_NAME, Path(__file__).resolve().parents[1] / "mapping" / "scenes.py")
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
_scenes = sys.modules[_NAME]

OneHotEncoder = _scenes.OneHotEncoder
SceneBox = _scenes.SceneBox
look_around = _scenes.look_around
on_floor = _scenes.on_floor
render = _scenes.render
tour = _scenes.tour
world_state = _scenes.world_state
