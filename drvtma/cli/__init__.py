"""The `drvtma` command line: `main` dispatches; each command family has its own module (`check`, `bench`,
`decode`, `fuzz`, `wgmma`)."""

from .main import COMMANDS, main

__all__ = ["COMMANDS", "main"]
