"""Building blocks for rule fixes (pure functions over the tree; nothing is applied here)."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import libcst as cst

from speedlint.analyzer.context import FileContext
from speedlint.analyzer.rule import SAFE, Applicability, Fix, Replacement

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


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `name=value` added (or its value replaced), laid out like its neighbours.

    The caller must make sure the keyword cannot also arrive through `**kwargs`.
    """
    args = list(call.args)
    for i, arg in enumerate(args):
        if arg.keyword is not None and arg.keyword.value == name:
            args[i] = arg.with_changes(value=value)
            return call.with_changes(args=args)
    return add_keywords(call, [(name, value)])  # type: ignore[return-value]


Element = Union[cst.Arg, cst.DictElement]


def _append(
    elements: Sequence[Element], new: Sequence[Element], opening: cst.BaseParenthesizableWhitespace
) -> List[Element]:
    """`elements + new`, laid out like the existing elements (one per line stays one per line)."""
    elements = list(elements)
    if not new:
        return elements
    if not elements:
        out: List[Element] = [n.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))) for n in new]
        out[-1] = out[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return out
    last = elements[-1]
    if len(elements) >= 2 and isinstance(elements[-2].comma, cst.Comma):
        sep = elements[-2].comma
    elif isinstance(opening, cst.ParenthesizedWhitespace):
        sep = cst.Comma(whitespace_after=opening)
    else:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    final_comma = last.comma
    tail_ws = {}
    if isinstance(last, cst.Arg):
        tail_ws = {"whitespace_after_arg": last.whitespace_after_arg}
        last = last.with_changes(whitespace_after_arg=cst.SimpleWhitespace(""))
    out = [*elements[:-1], last.with_changes(comma=sep)]
    for n in new[:-1]:
        out.append(n.with_changes(comma=sep))
    out.append(new[-1].with_changes(comma=final_comma, **tail_ws))
    return out


def add_keywords(node: cst.CSTNode, items: Sequence[Tuple[str, cst.BaseExpression]]) -> cst.CSTNode:
    """Add `name=value` keywords to a call, or `"name": value` entries to a dict literal."""
    if isinstance(node, cst.Call):
        have = {a.keyword.value for a in node.args if a.keyword is not None}
        new = [
            cst.Arg(
                value=v,
                keyword=cst.Name(k),
                equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
            )
            for k, v in items
            if k not in have
        ]
        # keywords go before a trailing `**kwargs` splat only if nothing follows; appending is valid
        return node.with_changes(args=_append(node.args, new, node.whitespace_before_args))
    if isinstance(node, cst.Dict):
        quote = '"'
        for el in node.elements:
            if isinstance(el, cst.DictElement) and isinstance(el.key, cst.SimpleString):
                quote = el.key.quote[-1]
                break
        new_els = [cst.DictElement(key=cst.SimpleString(f"{quote}{k}{quote}"), value=v) for k, v in items]
        return node.with_changes(elements=_append(node.elements, new_els, node.lbrace.whitespace_after))  # type: ignore[arg-type]
    return node


MAX_LINE = 99


def code_of(node: cst.CSTNode) -> str:
    return cst.Module(body=()).code_for_node(node)


def is_multiline(node: cst.CSTNode) -> bool:
    return "\n" in code_of(node)


def explode(node: cst.CSTNode) -> cst.CSTNode:
    """One argument (or dict entry) per line, with a trailing comma, like black."""
    inner = cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace("    "))
    close = cst.ParenthesizedWhitespace(indent=True, last_line=cst.SimpleWhitespace(""))
    if isinstance(node, cst.Call):
        args = [a.with_changes(comma=cst.Comma(whitespace_after=inner), whitespace_after_arg=cst.SimpleWhitespace("")) for a in node.args]
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=close))
        return node.with_changes(args=args, whitespace_before_args=inner)
    if isinstance(node, cst.Dict):
        els = [e.with_changes(comma=cst.Comma(whitespace_after=inner)) for e in node.elements]
        els[-1] = els[-1].with_changes(comma=cst.Comma())
        return node.with_changes(
            elements=els,
            lbrace=cst.LeftCurlyBrace(whitespace_after=inner),
            rbrace=cst.RightCurlyBrace(whitespace_before=close),
        )
    return node


def keywords_edit(ctx: FileContext, node: cst.CSTNode, items: Sequence[Tuple[str, cst.BaseExpression]]) -> cst.CSTNode:
    """`node` (a call or dict literal) with keywords added, wrapped one per line when too long."""
    new = add_keywords(node, items)
    if ctx.position(node).start.column + len(code_of(new)) > MAX_LINE and not is_multiline(new):
        new = explode(new)
    return new


