"""Type stubs of the native extension ``toolgate._native`` (re-exported by ``toolgate``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Union

Request = Union[Dict[str, Any], str, bytes]
"""A request: a dict, or JSON text as str or bytes."""

class Diagnostic:
    """One diagnostic of a policy: an error or a warning, where it is, and what to do."""

    severity: Literal["error", "warning"]
    message: str
    file: str
    line: int
    column: int
    help: Optional[str]
    rendered: str
    """This diagnostic alone, rendered as ``file:line:col`` with the source line and caret."""

class CompileError(ValueError):
    """A policy that does not compile; ``str()`` is the rendered ``file:line:col`` text."""

    diagnostics: List[Diagnostic]

class RequestError(ValueError):
    """A request that cannot be read; ``field`` names the field at fault when there is one."""

    field: Optional[str]
    line: Optional[int]
    column: Optional[int]

class Policy:
    """A compiled policy: immutable, safe to share across threads."""

    @property
    def name(self) -> str:
        """The policy's module name."""
    @property
    def revision(self) -> str:
        """The content hash of the policy source; every response names it."""
    @property
    def warnings(self) -> List[Diagnostic]:
        """The warnings the policy compiled with."""
    def decide(self, request: Request) -> Dict[str, Any]:
        """Judges a batch of calls; returns the JSON response's shape. A denial is a result."""
    def offer(self, request: Request) -> Dict[str, Any]:
        """The tool definitions to show the model for a turn (``{"facts", "tools"}`` in)."""
    def explain(self, request: Request) -> List[Dict[str, Any]]:
        """Each call's decision and the checks the judge ran to make it, in order."""

class PolicyStore:
    """Holds the policy in force; ``swap`` replaces it while other threads decide."""

    def __init__(self, policy: Policy) -> None: ...
    def current(self) -> Policy:
        """The policy in force; never blocks."""
    def swap(self, policy: Policy) -> None:
        """Puts ``policy`` in force; decisions holding the previous one finish with it."""

def compile(source: str, filename: str = "policy.gate") -> Policy:
    """Compiles policy text; imports: ``stdlib::`` only. Raises ``CompileError``."""

def load(path: Union[str, "os.PathLike[str]"]) -> Policy:
    """Reads and compiles a policy file, ``use "FILE"`` imports relative to it."""
