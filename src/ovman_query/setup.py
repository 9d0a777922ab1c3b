"""ament_python build of ovman_query for `colcon build` (the root pyproject.toml installs it with pip)."""

from setuptools import find_packages, setup

PACKAGE = "ovman_query"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["phrasings/*.json"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=False,
    maintainer="OVMAN developers",
    maintainer_email="ovman@example.org",
    description="OVMAN query: parser, grounding, cross-visit association, decision rules, arms; query_node serving /ovman/query.",
    license="Apache-2.0",
    entry_points={"console_scripts": ["query_node = ovman_ros.node_main:console_script"]},
)
