"""How each operation of the contract is offered, declared once beside its signature.

Each method of `ContextOperations` (contract.py) carries an `Operation` through the
`operation` decorator: whether it writes, its HTTP route, its CLI command, the scope a
token needs, whether the async store runs it on its event loop and whether the sharded
store routes it by its context. The faces are generated from it (tools/gen_faces.py) or
checked against it (tests/e2e/test_surfaces.py); the service's scopes and conditional
requests read it. A face missing an operation, or offering one the spec does not hold,
fails those checks rather than going unseen.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypeVar

Kind = Literal["command", "read", "lifetime"]
Scope = Literal["write", "read", "audit", "admin"]
F = TypeVar("F", bound=Callable[..., Any])

C = "/v1/contexts/{context_id}"  # a context's routes start here
SCOPE_OF_KIND: dict[Kind, Scope | None] = {"command": "write", "read": "read", "lifetime": None}


@dataclass(frozen=True)
class Operation:
    """One operation as the faces offer it.

    - `route`: "METHOD /path" of its HTTP route (None: none, `reason` says why).
    - `cli`: the CLI command that runs it (several operations may share one).
    - `scope`: the least a token needs (by default: write for a command, read for a read).
    - `on_loop`: the async store writes it by hand on its event loop (commands, head
      reads, the tail); every other operation runs on its worker threads, generated.
    - `routed`: the sharded store routes it to the server holding its context,
      generated; False where it spans servers or places a context (written by hand).
    """

    name: str
    kind: Kind
    route: str | None
    cli: str | None
    scope: Scope | None
    on_loop: bool
    routed: bool
    reason: str = ""

    @property
    def method(self) -> str:
        return (self.route or " ").split(" ", 1)[0]

    @property
    def path(self) -> str:
        return (self.route or " ").split(" ", 1)[1]


def operation(
    kind: Kind, route: str | None, cli: str | None, *, scope: Scope | None = None,
    on_loop: bool = False, routed: bool | None = None, reason: str = "",
) -> Callable[[F], F]:  # fmt: skip
    """Declares the method it decorates an operation of the contract. `routed` defaults to
    whether the method's first parameter is a context id."""

    def declare(fn: F) -> F:
        first = list(inspect.signature(fn).parameters)[1:2]
        fn.__operation__ = Operation(  # type: ignore[attr-defined]
            name=fn.__name__, kind=kind, route=route, cli=cli,
            scope=scope or SCOPE_OF_KIND[kind], on_loop=on_loop,
            routed=first == ["context_id"] if routed is None else routed, reason=reason,
        )  # fmt: skip
        return fn

    return declare


def operations_of(protocol: type) -> Mapping[str, Operation]:
    """The operations a Protocol declares, in the order it declares them; a public method
    without a declaration is an error (it would otherwise be on no face)."""
    found: dict[str, Operation] = {}
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        declared = getattr(member, "__operation__", None)
        if not isinstance(declared, Operation):
            raise TypeError(f"{protocol.__name__}.{name} has no @operation declaration")
        found[name] = declared
    return MappingProxyType(found)


__all__ = ["C", "Kind", "Operation", "Scope", "operation", "operations_of"]
