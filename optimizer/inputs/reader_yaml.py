"""YAML text to plain Python data with a strict SafeLoader (``load_yaml``): duplicate keys refused, YAML 1.2
core scalars, aliases and nesting bounded while composing (``inputs.reader`` describes the rules)."""

from __future__ import annotations

import math
import re
from collections.abc import Hashable
from typing import Any, NoReturn

import yaml
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import GpuplanError
from .reader_bounds import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    MAX_NODES,
    MAX_TEXT_CHARS,
    PathPart,
    _dotted,
    _int_too_long,
    _line_col,
    _refuse_surrogates,
    _short,
    _size,
    _under,
)

_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_MERGE = "tag:yaml.org,2002:merge"
_VALUE_TAGS = frozenset({_NULL, _BOOL, _INT, _FLOAT})
# Replaced by the YAML 1.2 core rules below; ``value`` (a bare ``=``) has no safe constructor and
# ``yaml`` is documentation-only, so both simply become strings.
_DROPPED_TAGS = _VALUE_TAGS | {"tag:yaml.org,2002:value", "tag:yaml.org,2002:yaml"}

_CORE_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_CORE_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_CORE_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_CORE_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN))$"
)


class _Size:
    """How big a node is once every alias in it is expanded: values, characters, nesting levels."""

    __slots__ = ("chars", "height", "nodes")

    def __init__(self, nodes: int, chars: int, height: int) -> None:
        self.nodes = nodes
        self.chars = chars
        self.height = height


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core scalars, no duplicate keys, and bounded expansion and depth.

    Composition is overridden to keep, for every finished mapping/list, its expanded size (values
    and characters counting each alias use in full) and height, memoised per node. Because aliased
    nodes are finished before they can be referenced, each size is a sum over already-known
    children, so a tiny file of nested anchors is refused after a few dozen additions.
    """

    def __init__(self, stream: str, source: str) -> None:
        super().__init__(stream)
        self.source = source
        self._path: list[PathPart] = []
        self._open: set[Node] = set()  # collections being composed, i.e. ancestors of the cursor
        self._sizes: dict[Node, _Size] = {}

    # -- errors ------------------------------------------------------------------------------------

    def _fail(self, message: str, field: list[PathPart] | None = None) -> NoReturn:
        path = self._path if field is None else field
        raise GpuplanError(message, source=self.source, field=_dotted(path) or None)

    # -- composition ---------------------------------------------------------------------------------

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and target in self._open:
                self._fail(
                    f"alias '*{event.anchor}' at line {event.start_mark.line + 1} refers to a mapping or list "
                    f"that contains it, which makes an endless structure; replace the alias with the values it needs"
                )
        elif self.check_event(SequenceStartEvent, MappingStartEvent) and len(self._open) >= MAX_DEPTH:
            self._fail(self._too_deep_message(self.peek_event().start_mark.line + 1), field=[])
        return super().compose_node(parent, index)

    def _too_deep_message(self, line: int) -> str:
        return (
            f"the YAML nests more than {MAX_DEPTH} levels of mappings and lists (at line {line}); "
            f"gpuplan files need only a few levels, so check for a runaway of '[', '{{' or indentation"
        )

    def _size_of(self, node: Node) -> _Size:
        if isinstance(node, ScalarNode):
            return _Size(1, len(node.value), 0)
        return self._sizes[node]  # finished: open nodes are refused as recursive aliases above

    def _add_child(self, total: _Size, child: Node, line: int) -> None:
        size = self._size_of(child)
        total.nodes += size.nodes
        total.chars += size.chars
        total.height = max(total.height, size.height + 1)
        if total.nodes > MAX_NODES:
            self._fail(
                f"the YAML expands to more than {MAX_NODES:,} values (reached at line {line}); anchors and "
                f"aliases (&name, *name) repeat their whole content at every use, so use fewer aliases "
                f"or split the file"
            )
        if total.chars > MAX_TEXT_CHARS:
            self._fail(
                f"the YAML expands to more than {_size(MAX_TEXT_CHARS)} of text (reached at line {line}); "
                f"aliases (*name) repeat their whole content at every use, so use fewer aliases"
            )
        # Ancestors still open, plus this collection, plus the child's own levels (an alias brings
        # its whole height along).
        if len(self._open) - 1 + total.height > MAX_DEPTH:
            self._fail(self._too_deep_message(line), field=[])

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        # Built as PyYAML's Composer does, with path and size bookkeeping around each item.
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(SequenceNode, None, start.implicit)
        node = SequenceNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self._open.add(node)
        total = _Size(1, 0, 1)
        index = 0
        while not self.check_event(SequenceEndEvent):
            line = self.peek_event().start_mark.line + 1
            self._path.append(index)
            item = self.compose_node(node, index)
            assert item is not None
            node.value.append(item)
            self._add_child(total, item, line)
            self._path.pop()
            index += 1
        node.end_mark = self.get_event().end_mark
        self._open.discard(node)
        self._sizes[node] = total
        return node

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        start = self.get_event()
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(MappingNode, None, start.implicit)
        node = MappingNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        if anchor is not None:
            self.anchors[anchor] = node
        self._open.add(node)
        total = _Size(1, 0, 1)
        seen: dict[Hashable, Node] = {}
        while not self.check_event(MappingEndEvent):
            line = self.peek_event().start_mark.line + 1
            key = self.compose_node(node, None)
            assert key is not None
            self._add_child(total, key, line)
            part: PathPart = key.value if isinstance(key, ScalarNode) else "?"
            identity = self._key_identity(key)
            if identity is not None:
                first = seen.get(identity)
                if first is not None:
                    merge_hint = " (merge several with one key: <<: [*a, *b])" if key.tag == _MERGE else ""
                    self._fail(
                        f"duplicate key '{_short(str(part))}'{_under(self._path)} at line {line} "
                        f"(first at line {first.start_mark.line + 1}); keep one{merge_hint}",
                        field=[*self._path, part],
                    )
                seen[identity] = key
            line = self.peek_event().start_mark.line + 1
            self._path.append(part)
            value = self.compose_node(node, key)
            assert value is not None
            node.value.append((key, value))
            self._add_child(total, value, line)
            self._path.pop()
        node.end_mark = self.get_event().end_mark
        self._open.discard(node)
        self._sizes[node] = total
        return node

    def _key_identity(self, key: Node) -> Hashable | None:
        """What a key becomes in the dict, so that ``1``/``01`` or ``null``/``~`` count as the same."""
        if not isinstance(key, ScalarNode):
            return None  # a mapping or list as a key is refused at construction (unhashable)
        if key.tag in _VALUE_TAGS:
            return ("value", self.yaml_constructors[key.tag](self, key))
        return ("text", key.tag, key.value)

    # -- construction: YAML 1.2 core numbers ---------------------------------------------------------

    def construct_core_int(self, node: ScalarNode) -> int:
        text = self.construct_scalar(node).replace("_", "")
        try:
            if text.startswith("0o"):
                digits, base = text[2:], 8
            elif text.startswith("0x"):
                digits, base = text[2:], 16
            else:
                digits, base = text, 10
            if _int_too_long(digits):
                self._fail(
                    f"the integer at line {node.start_mark.line + 1} has more than {MAX_INT_DIGITS} digits, "
                    f"more than any real quantity needs; check for a typo"
                )
            return int(digits, base)
        except ValueError:
            raise ConstructorError(None, None, f"{text!r} is not an integer", node.start_mark) from None

    def construct_core_bool(self, node: ScalarNode) -> bool:
        text = self.construct_scalar(node)
        if text.lower() not in ("true", "false"):  # reachable only through an explicit !!bool tag
            raise ConstructorError(None, None, f"{text!r} is not true or false", node.start_mark)
        return text.lower() == "true"

    def construct_checked_timestamp(self, node: ScalarNode) -> Any:
        """A date or time, or a one-line refusal for text shaped like one that is not (2027-02-30)."""
        try:
            return self.construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None,
                None,
                f"{self.construct_scalar(node)!r} is written like a date but is not one ({exc}); write a real "
                "date such as 2027-01-04, or put the text in quotes if it is not meant as a date",
                node.start_mark,
            ) from None

    def construct_core_float(self, node: ScalarNode) -> float:
        text = self.construct_scalar(node).replace("_", "")
        lowered = text.lower()
        sign = -1.0 if lowered.startswith("-") else 1.0
        if lowered.lstrip("+-") == ".inf":
            return sign * math.inf
        if lowered == ".nan":
            return math.nan
        try:
            return float(text)
        except ValueError:
            raise ConstructorError(None, None, f"{text!r} is not a number", node.start_mark) from None


# YAML 1.2 core schema: start from SafeLoader's resolvers (keeping merge ``<<`` and timestamps, which
# job files use for ``start: 2027-01-04``) and replace the YAML 1.1 null/bool/int/float rules, whose
# sexagesimal ``1:30`` = 90, ``yes``/``on`` = True and ``0755`` = 493 surprise people.
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in _DROPPED_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictLoader.add_implicit_resolver(_BOOL, _CORE_BOOL, list("tTfF"))
_StrictLoader.add_implicit_resolver(_INT, _CORE_INT, list("-+0123456789"))  # before float: "1" is both
_StrictLoader.add_implicit_resolver(_FLOAT, _CORE_FLOAT, list("-+.0123456789"))
_StrictLoader.add_implicit_resolver(_NULL, _CORE_NULL, ["~", "n", "N", ""])
_StrictLoader.add_constructor(_BOOL, _StrictLoader.construct_core_bool)
_StrictLoader.add_constructor(_INT, _StrictLoader.construct_core_int)
_StrictLoader.add_constructor(_FLOAT, _StrictLoader.construct_core_float)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_checked_timestamp)


def _yaml_error(exc: yaml.YAMLError, text: str, source: str) -> GpuplanError:
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _line_col(text, exc.position)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return GpuplanError(
            f"the YAML contains a control character (#x{char:04x}) at line {line}, column {column}, which "
            f"YAML does not allow; remove it, or write it as an escape inside a double-quoted string",
            source=source,
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            # PyYAML's pairs read either "expected X" + "but found Y" or "while parsing X" + a problem.
            if exc.problem.startswith("but "):
                problem = f"{exc.context}, {exc.problem}"
            else:
                problem = f"{exc.problem} ({exc.context})"
        if problem.startswith("could not determine a constructor for the tag"):
            tag = problem.split("tag", 1)[1].strip().replace("tag:yaml.org,2002:", "!!")
            problem = f"the tag {tag} is not allowed in gpuplan files"
            fix = "remove the tag and write a plain value"
        elif "single document" in problem:
            fix = "keep one document (remove the extra '---' and what follows, or split the file)"
        elif isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError)):
            fix = "fix the indentation or quoting there"
        else:
            fix = "check the YAML there"
        return GpuplanError(f"malformed YAML{where}: {problem}; {fix}", source=source)
    return GpuplanError(f"malformed YAML: {exc}; check the file", source=source)


def load_yaml(text: str, source: str) -> Any:
    """The data of one YAML document, read strictly (see the module docstring); ``None`` if empty.

    ``source`` is the file path (or a label) used in error messages.
    """
    try:
        loader = _StrictLoader(text, source)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source) from None
    except RecursionError:  # a backstop: MAX_DEPTH should stop any nesting long before this
        raise GpuplanError(
            f"the YAML nests too deeply to read; gpuplan files need only a few levels (limit {MAX_DEPTH})",
            source=source,
        ) from None
    finally:
        loader.dispose()
    _refuse_surrogates(data, text, source)
    return data
