"""Building blocks for rule fixes (pure functions over the tree; nothing is applied here)."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.rule import SAFE, Applicability, Fix, ImportSpec, Replacement

PASS_LINE = cst.SimpleStatementLine(body=[cst.Pass()])


def statement_of(ctx: FileContext, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The small statement (`Expr`, `Assign` ...) that contains `node`."""
    for a in [node, *ctx.torch.ancestors(node)]:
        if isinstance(a, cst.BaseSmallStatement):
            return a
        if isinstance(a, cst.BaseCompoundStatement):
            return None
    return None


def removal(ctx: FileContext, node: cst.CSTNode) -> Optional[Tuple[cst.CSTNode, Replacement]]:
    """Remove the statement holding expression `node`, leaving `pass` if the block would be empty.

    Only when `node` is the whole statement (`gc.collect()` on its own), never part of one.
    """
    stmt = statement_of(ctx, node)
    if not isinstance(stmt, cst.Expr) or stmt.value is not node:
        return None
    line = ctx.torch.parent(stmt)
    if isinstance(line, cst.SimpleStatementLine):
        if len(line.body) > 1:
            return stmt, cst.RemoveFromParent()
        block = ctx.torch.parent(line)
        siblings = getattr(block, "body", ())
        if isinstance(block, cst.IndentedBlock) and len(siblings) == 1:
            return line, PASS_LINE.with_changes(leading_lines=line.leading_lines)
        if isinstance(block, cst.Module) and len(siblings) == 1:
            return line, PASS_LINE
        return line, cst.RemoveFromParent()
    if isinstance(line, cst.SimpleStatementSuite):
        if len(line.body) > 1:
            return stmt, cst.RemoveFromParent()
        return stmt, cst.Pass()
    return None


def remove_fix(ctx: FileContext, node: cst.CSTNode, title: str, applicability: Applicability = SAFE) -> Optional[Fix]:
    pair = removal(ctx, node)
    return Fix.many([pair], title, applicability) if pair else None


def keyword_arg(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_splat(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added (or replaced), formatted like its neighbours.

    The caller must make sure the keyword cannot also arrive through `**kwargs`.
    """
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        comma = last.comma
        multiline = isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace)
        if multiline:
            # keep one argument per line: reuse the last comma's layout for the new one
            args[-1] = last.with_changes(comma=comma)
            new_arg = new_arg.with_changes(comma=comma)
        elif isinstance(comma, cst.Comma):
            # trailing comma on one line: `f(a, )`
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            if isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):
                # `f(\n    a, b\n)`: the line break before `)` follows the new last argument
                args[-1] = args[-1].with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
                new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args.append(new_arg)
    return call.with_changes(args=args)


def torch_import() -> ImportSpec:
    return ImportSpec("torch")
