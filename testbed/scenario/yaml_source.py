"""Reading scenario YAML: bounded UTF-8 text, composed by a limited safe loader (plain data only, bounded
depth, aliases and values) into plain dicts, lists and scalars together with the line of every field path,
so that every later error names its file and line. Sweep files are read the same way
(:func:`read_yaml_document`)."""

import yaml

from testbed.errors import ScenarioError, brief_repr as _brief
from testbed.scenario.checker import Checker

#: Limits on the YAML itself, so that no file (however built) takes long or ends in a traceback:
#: the composer recurses once per nesting level and aliases let a small file describe an
#: exponentially large document ("billion laughs"). Real scenarios are a few kB, < 10 levels deep and
#: a few hundred values; 20,000 values take the pure-Python composer about a second.
MAX_SCENARIO_BYTES = 1 << 20
MAX_YAML_DEPTH = 64
MAX_YAML_ALIASES = 100
MAX_YAML_NODES = 20_000
#: Tags a scenario may carry (explicit or resolved): plain data only, never ``!!python/...``.
_PLAIN_TAGS = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp")}
_SEQ_TAG, _MAP_TAG = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"


class _YamlLimitError(yaml.YAMLError):
    """A YAML document beyond MAX_YAML_DEPTH / MAX_YAML_ALIASES / MAX_YAML_NODES (carries its line)."""

    def __init__(self, problem, mark):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class _LineLoader(yaml.SafeLoader):
    """SafeLoader whose composer counts depth, aliases and nodes (per instance) and stops at the limits."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = self._aliases = self._nodes = 0

    def compose_node(self, parent, index):
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise _YamlLimitError(f"more than {MAX_YAML_ALIASES} aliases (*name)", mark)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise _YamlLimitError(f"more than {MAX_YAML_NODES:,} values", mark)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise _YamlLimitError(f"nested deeper than {MAX_YAML_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _yaml_error(exc, text: str, source: str, field: str = "(file)"):
    """A PyYAML error as one ScenarioError line: its problem and line (a ReaderError has a position)."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark else 0
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        problem = f"character #x{exc.character:04x} is not allowed in YAML ({exc.reason})" \
            if isinstance(exc.character, int) else exc.reason
    else:
        problem = getattr(exc, "problem", None) or str(exc)
    return ScenarioError(field, f"not valid YAML: {problem}", source, line)


def decode_scenario_bytes(data: bytes, source: str) -> str:
    """The text of a scenario file: at most MAX_SCENARIO_BYTES of UTF-8 (a binary file is refused here)."""
    if len(data) > MAX_SCENARIO_BYTES:
        raise ScenarioError("(file)", f"larger than {MAX_SCENARIO_BYTES // 1024} KiB; a scenario is a few kB of "
                                      f"YAML", source)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ScenarioError("(file)", f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                                      f"a scenario is a YAML text file", source, line)


def compose_with_lines(text: str, source: str, field: str = "(file)"):
    """Load YAML keeping the line of every mapping key and sequence item, by field path.

    Returns ``(document, lines)``; the document is None when the text holds no
    value. Plain data only: other tags, non-scalar keys and anything past the
    MAX_YAML_* limits are a ScenarioError (never a traceback or a long wait).
    """
    loader = None
    try:
        loader = _LineLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {}
        return _NodeConverter(loader, source, field).convert(node, "", 0)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, text, source, field) from None
    finally:
        if loader is not None:
            loader.dispose()


class _NodeConverter:
    """Composed YAML nodes -> plain dicts/lists/scalars, recording the line of every field path.

    Aliases are expanded here, so the expanded size is counted (MAX_YAML_NODES)
    and the depth too (an anchor may contain its own alias: ``&a [*a]``).
    """

    def __init__(self, loader, source, field):
        self.loader, self.source, self.field = loader, source, field
        self.lines = {}
        self.count = 0

    def fail(self, node, message, path=None):
        """Raise at ``node``'s line; ``path`` is relative to the document (a --set value's field prefixes it)."""
        if path and self.field != "(file)":
            path = f"{self.field}.{path}"
        raise ScenarioError(path or self.field, message, self.source, node.start_mark.line + 1)

    def convert(self, node, path, depth):
        return self.value(node, path, depth), self.lines

    def value(self, n, path, depth):
        self.count += 1
        if self.count > MAX_YAML_NODES:
            self.fail(n, f"not valid YAML: more than {MAX_YAML_NODES:,} values once aliases are expanded")
        if depth > MAX_YAML_DEPTH:
            self.fail(n, f"not valid YAML: nested deeper than {MAX_YAML_DEPTH} levels (an alias inside itself?)")
        self.lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, yaml.MappingNode):
            return self.mapping(n, path, depth)
        if isinstance(n, yaml.SequenceNode):
            if n.tag != _SEQ_TAG:
                self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
            return [self.value(item, f"{path}.{i}" if path else str(i), depth + 1) for i, item in enumerate(n.value)]
        if n.tag not in _PLAIN_TAGS:
            self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
        return self.scalar(n, path)

    def scalar(self, n, path):
        try:
            return self.loader.construct_object(n)
        except (ValueError, OverflowError):   # an int past Python's 4300 digits, a date like 2020-13-45
            kind = n.tag.rsplit(":", 1)[-1]
            self.fail(n, f"not valid YAML: cannot read {_brief(n.value)} as {kind}", path or None)

    def mapping(self, n, path, depth):
        if n.tag != _MAP_TAG:
            self.fail(n, f"tag {n.tag} is not allowed; a scenario holds plain YAML values only", path or None)
        out = {}
        for key_node, value_node in n.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.fail(key_node, "a key must be a plain name, not a list or mapping", path or None)
            key = key_node.value
            sub = f"{path}.{key}" if path else str(key)
            self.lines[sub] = key_node.start_mark.line + 1
            if key in out:
                self.fail(key_node, "key given twice", sub)
            out[key] = self.value(value_node, sub, depth + 1)
        return out


def read_yaml_text(path) -> str:
    """The text of a YAML input file (a scenario, a sweep): at most MAX_SCENARIO_BYTES of UTF-8."""
    source = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SCENARIO_BYTES + 1)
    except OSError as exc:
        raise ScenarioError("(file)", f"cannot read: {exc.strerror or exc}", source)
    return decode_scenario_bytes(data, source)


def read_yaml_document(path):
    """``(document, lines, checker)`` of a YAML input file read as scenarios are (plain data, bounded),
    with a checker whose errors name the file, line and field."""
    source = str(path)
    doc, lines = compose_with_lines(read_yaml_text(path), source)
    return doc, lines, Checker(source, lines)
