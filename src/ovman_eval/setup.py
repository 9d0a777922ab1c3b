"""ament_python build of ovman_eval for `colcon build` (the root pyproject.toml installs it with pip)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "ovman_eval"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        ("share/" + PACKAGE + "/launch", glob("../../launch/*.launch.py")),
        ("share/" + PACKAGE + "/config", glob("../../config/*")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="OVMAN developers",
    maintainer_email="ovman@example.org",
    description="OVMAN evaluation: task semantics, episode generation and certification, benchmark, statistics, reports, the ovman CLI and launch files.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": ["ovman = ovman_eval.cli.main:main", "benchmark_node = ovman_ros.node_main:console_script"]
    },
)
