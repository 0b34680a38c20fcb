"""Command-line entry points. Each command is one module registered in harness.cli.main."""
