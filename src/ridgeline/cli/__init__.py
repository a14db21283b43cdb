"""cli: the ``ridgeline`` command. A face: each command parses, calls one library function and
renders its result (Rich tables, ``--json``, ``--plot``). No logic lives here.

Commands load lazily: ``ridgeline --help`` lists them from ``COMMANDS`` without importing a
command's module, so the help (and every command) starts without numpy, matplotlib or the
library layers a command does not use.

Layer rule: may import every layer; nothing imports ``cli``.
"""

from __future__ import annotations

from ridgeline.cli.root import COMMANDS, app, main

__all__ = ["COMMANDS", "app", "main"]
