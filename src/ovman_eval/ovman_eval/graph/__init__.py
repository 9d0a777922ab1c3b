"""The ROS 2 benchmark graph: its description as data, benchmark_node and the ROS-free work it drives."""
