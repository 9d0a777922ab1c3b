"""ament_python build of ovman_mapping for `colcon build` (the root pyproject.toml installs it with pip)."""

from setuptools import find_packages, setup

PACKAGE = "ovman_mapping"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["models/segmenter/segmenter.json", "models/segmenter/segmenter.safetensors"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="OVMAN developers",
    maintainer_email="ovman@example.org",
    description="OVMAN per-visit 3D instance maps from RGB-D, masks and pose; feature encoders; mapping_node.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "mapping_node = ovman_ros.node_main:console_script",
            "segmenter_node = ovman_ros.node_main:console_script",
        ]
    },
)
