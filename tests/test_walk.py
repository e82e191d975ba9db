"""`walk.visit`: LibCST's read-only visit without rebuilding the tree."""

from __future__ import annotations

import libcst as cst

from speedlint.analyzer.providers import walk

SOURCE = """
def f(x):
    if x:
        return g(x) + 1
    return [h(y) for y in x]

class C:
    def m(self):
        return self.k(2)
"""


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list = []

    def visit_Call(self, node: cst.Call) -> None:
        self.seen.append(("call", cst.Module([]).code_for_node(node.func)))

    def visit_If(self, node: cst.If) -> bool:
        self.seen.append(("if", None))
        return False  # the children of an `if` are skipped

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.seen.append(("def", node.name.value))


def test_same_calls_in_the_same_order_as_libcst():
    module = cst.parse_module(SOURCE)
    ours, theirs = _Recorder(), _Recorder()
    walk.visit(module, ours)
    module.visit(theirs)
    assert ours.seen == theirs.seen
    assert ("call", "g") not in ours.seen and ("call", "h") in ours.seen


def _calls_of(node: cst.CSTNode, prefix: str) -> list:
    found = []

    class Local(cst.CSTVisitor):  # a new class object on every call
        def visit_Call(self, node: cst.Call) -> None:
            name = cst.Module([]).code_for_node(node.func)
            if name.startswith(prefix):
                found.append(name)

    walk.visit(node, Local())
    return found


def test_a_class_defined_in_a_function_is_looked_up_once():
    module = cst.parse_module(SOURCE)
    before = len(walk._METHOD_NAMES)
    assert _calls_of(module, "") == ["g", "h", "self.k"]
    assert _calls_of(module, "self.") == ["self.k"]
    assert len(walk._METHOD_NAMES) - before <= 1  # one entry for both calls' classes


def test_two_local_classes_of_one_name_keep_their_own_methods():
    def visitor(kind: str) -> cst.CSTVisitor:
        seen = []
        if kind == "calls":
            class V(cst.CSTVisitor):
                def visit_Call(self, node: cst.Call) -> None:
                    seen.append("call")
        else:
            class V(cst.CSTVisitor):  # type: ignore[no-redef]
                def visit_Return(self, node: cst.Return) -> None:
                    seen.append("return")
        v = V()
        v.seen = seen  # type: ignore[attr-defined]
        return v

    module = cst.parse_module(SOURCE)
    calls, returns = visitor("calls"), visitor("returns")
    walk.visit(module, calls)
    walk.visit(module, returns)
    assert calls.seen == ["call"] * 3  # type: ignore[attr-defined]
    assert returns.seen == ["return"] * 3  # type: ignore[attr-defined]
