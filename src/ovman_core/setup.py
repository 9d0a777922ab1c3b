"""ament_python build of ovman_core for `colcon build` (the root pyproject.toml installs it with pip)."""

from setuptools import find_packages, setup

PACKAGE = "ovman_core"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/config", ["../../config/ovman.yaml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="OVMAN developers",
    maintainer_email="ovman@example.org",
    description="Shared vocabulary of the OVMAN stack: typed values, frame conversions (AI2-THOR to REP 103), typed config. No ROS imports.",
    license="Apache-2.0",
    entry_points={"console_scripts": []},
)
