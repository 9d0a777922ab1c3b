"""ament_python build of ovman_ros for `colcon build` (the root pyproject.toml installs it with pip)."""

from setuptools import find_packages, setup

PACKAGE = "ovman_ros"

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
    description="ROS 2 plumbing shared by the OVMAN nodes: node base and main, config as parameters, camera bundle wire format, message conversions.",
    license="Apache-2.0",
    entry_points={"console_scripts": []},
)
