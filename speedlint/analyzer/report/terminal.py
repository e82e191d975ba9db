"""Where human output goes, and how it looks there: a terminal, or a log.

* On a terminal (the stream is a TTY): rich output, wrapped at the terminal's width, in colour.
* Anywhere else (a pipe, a file, a CI log such as GitHub Actions'): no line is ever wrapped (a
  source line or a message stays one line, whatever its length; tables take the width they
  need), and no colour.
* Colour follows the conventions of no-color.org and force-color.org: `NO_COLOR` (set and not
  empty) turns it off everywhere, terminals included; `FORCE_COLOR` (set and not empty) turns it
  on through a pipe too (CI logs that render ANSI colours). `NO_COLOR` wins when both are set.
  Wrapping depends only on the stream being a terminal.

Lines are built as styled segments (`Line`): written as plain text when there is neither colour
nor wrapping to do (rich is not even imported), else printed through a rich console.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Literal, Optional, Sequence, TextIO, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

#: One output line: (text, rich style) segments; the style may be "".
Line = Sequence[Tuple[str, str]]

#: How wide a line may get where nothing wraps (rich needs a width to lay tables out).
UNWRAPPED_WIDTH = 100_000


def is_terminal(out: Any) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def colour_wanted(tty: bool) -> bool:
    """Colour or not, from the environment's conventions (see the module docstring)."""
    if os.environ.get("NO_COLOR", ""):
        return False
    if os.environ.get("FORCE_COLOR", ""):
        return True
    return tty


class Terminal:
    """A stream for human output, with colour and wrapping decided once (see the module docstring).
    `plain`: never colour nor wrap (a report written to `--output-file`)."""

    def __init__(self, out: TextIO, plain: bool = False) -> None:
        self.out = out
        tty = not plain and is_terminal(out)
        self.colour = not plain and colour_wanted(tty)
        self.wrap = tty
        self._console: Optional["Console"] = None

    @property
    def console(self) -> "Console":
        """A rich console set up for this stream: colour and width as decided, no highlighting."""
        if self._console is None:
            from rich.console import Console

            colours: Optional[Literal["auto", "standard"]]
            if self.wrap:  # a terminal: rich finds its width
                colours = "auto" if self.colour else None
                self._console = Console(file=self.out, highlight=False, force_terminal=True, color_system=colours, no_color=not self.colour)
            else:
                colours = "standard" if self.colour else None
                self._console = Console(
                    file=self.out, highlight=False, force_terminal=self.colour, color_system=colours, no_color=not self.colour,
                    width=UNWRAPPED_WIDTH, soft_wrap=True,
                )
        return self._console

    def line(self, segments: Line = ()) -> None:
        if not (self.colour or self.wrap):
            self.out.write("".join(text for text, _ in segments) + "\n")
            return
        from rich.text import Text

        self.console.print(Text.assemble(*segments), soft_wrap=not self.wrap)

    def lines(self, lines: List[Line]) -> None:
        """Many lines at once (one rich print: rich's per-print overhead is most of its cost)."""
        if not lines:
            return
        if not (self.colour or self.wrap):
            self.out.write("".join("".join(text for text, _ in line) + "\n" for line in lines))
            return
        from rich.text import Text

        segments: List[Tuple[str, str]] = []
        for i, line in enumerate(lines):
            if i:
                segments.append(("\n", ""))
            segments.extend(line)
        self.console.print(Text.assemble(*segments), soft_wrap=not self.wrap)

    def render(self, renderable: Any) -> None:
        """A rich renderable (a table, markup): unwrapped where lines must not wrap."""
        self.console.print(renderable)

    def markup(self, text: str) -> None:
        """A line in rich markup (`[dim]...[/dim]`)."""
        self.render(text)
