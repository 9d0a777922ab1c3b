"""The ``ovman`` command line: one module per subcommand group."""
