"""Option groups: a command's options declared as fields of frozen dataclasses, one dataclass
per group, instead of one long parameter list.

Each field is ``Annotated[type, typer.Option(...)]`` with a default. ``grouped(A, B)`` turns a
command ``f(mode, *, a: A, b: B)`` into the function Typer sees, whose keyword parameters are
the fields of ``A`` and ``B`` (each shown under its group's help panel); when it runs, the
fields are packed into one ``A`` and one ``B`` and passed on.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, get_type_hints

KW = inspect.Parameter.KEYWORD_ONLY


def _group_params(group: type) -> list[inspect.Parameter]:
    hints = get_type_hints(group, include_extras=True)
    return [
        inspect.Parameter(f.name, KW, default=f.default, annotation=hints[f.name])
        for f in dataclasses.fields(group)
    ]


def grouped(*groups: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Expose the fields of the option-group dataclasses ``groups`` as the command's options."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = get_type_hints(fn, include_extras=True)
        own = inspect.signature(fn).parameters.values()
        slot_of = {hints[p.name]: p.name for p in own if hints[p.name] in groups}
        plain = [p.replace(annotation=hints[p.name]) for p in own if p.name not in slot_of.values()]
        fields = {g: [f.name for f in dataclasses.fields(g)] for g in groups}

        def command(**kwargs: Any) -> Any:
            for group, names in fields.items():
                values = {n: kwargs.pop(n) for n in names}
                kwargs[slot_of[group]] = group(**values)
            return fn(**kwargs)

        params = [*plain, *(p for g in groups for p in _group_params(g))]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        command.__name__, command.__doc__ = fn.__name__, fn.__doc__
        return command

    return wrap
