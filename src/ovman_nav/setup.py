"""ament_python build of ovman_nav for `colcon build` (the root pyproject.toml installs it with pip)."""

from setuptools import find_packages, setup

PACKAGE = "ovman_nav"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="OVMAN developers",
    maintainer_email="ovman@example.org",
    description="OVMAN navigation: occupancy grid, A*, collision-sweep blocking, executor; nav_node action server and OvmanCommander client.",
    license="Apache-2.0",
    entry_points={"console_scripts": ["nav_node = ovman_ros.node_main:console_script"]},
)
