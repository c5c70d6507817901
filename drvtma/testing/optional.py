"""hypothesis is an extra (`pip install 'drvtma[test]'`): what needs it imports it here, and its absence is one
sentence that says what to install, raised only when a strategy or a profile is actually used."""

from __future__ import annotations

import importlib

from ..errors import DrvtmaError

INSTALL = "pip install hypothesis (or pip install 'drvtma[test]')"


def hypothesis(what: str, module: str = "hypothesis"):
    """`module` (hypothesis or one of its submodules), or a DrvtmaError naming `what` needs it and how to get it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if not (exc.name or "").startswith("hypothesis"):
            raise  # hypothesis is there but broken: its own error says more than ours would
        raise DrvtmaError(f"{what} needs hypothesis, which is not installed here: {INSTALL}") from None
