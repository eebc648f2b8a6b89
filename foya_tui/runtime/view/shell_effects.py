"""Provides what a shell command does to files, read from its words (SPEC K-12): the paths it writes
(`sed -i`, `>`/`>>`, `tee`, heredocs to files, `mv`, `cp`, `rm`, `touch`, `git apply`, `patch`,
`python - <<EOF` that opens a file for writing) and the paths it only reads (`cat`, `head`, `tail`,
`grep`, `sed -n`, …).

The command is tokenised with `shlex` (quotes, `&&`, `||`, `;`, `|`, redirections), heredoc bodies
are cut out first and given to the command that reads them, and inline Python is parsed with `ast`:
no substring guesses. What cannot be known from the words (a variable's value, a glob's matches)
is not recorded; a path is recorded as the command spells it.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][\w.-]*)\2")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "|&", "&", "(", ")", ";;", "{", "}"})
_WRITE_REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>"})
_PREFIX_WORDS = frozenset({"sudo", "env", "time", "nohup", "command", "exec", "nice", "stdbuf"})
_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "wc", "bat", "tac", "file", "stat"})
_REMOVERS = frozenset({"rm", "unlink", "touch", "shred", "truncate"})
_PYTHONS = re.compile(r"python(?:\d+(?:\.\d+)?)?$")
_DIFF_TARGET = re.compile(
    r"^(?:\+\+\+|---) (?:[ab]/)?(?P<diff>[^\t\n]+)|^\*\*\* (?:Update|Add|Delete) File: (?P<patch>.+)$"
    r"|^\*\*\* Move to: (?P<moved>.+)$",
    re.MULTILINE,
)
_OPTIONS_WITH_VALUE = {
    "sed": frozenset({"-e", "-f", "-l", "--expression", "--file"}),
    "grep": frozenset({"-e", "-f", "-m", "-A", "-B", "-C", "--regexp", "--file", "--max-count"}),
    "rg": frozenset({"-e", "-g", "-t", "-T", "-A", "-B", "-C", "-m", "--glob", "--type"}),
    "head": frozenset({"-n", "-c"}),
    "tail": frozenset({"-n", "-c"}),
    "truncate": frozenset({"-s", "--size"}),
    "tee": frozenset(),
    "cp": frozenset({"-t", "--target-directory"}),
    "mv": frozenset({"-t", "--target-directory"}),
}


@dataclass(frozen=True)
class ShellEffects:
    """The files a shell command writes (created, changed, moved or removed) and only reads."""

    written: tuple[str, ...] = ()
    read: tuple[str, ...] = ()
    contents: tuple[tuple[str, str], ...] = ()
    """Heredoc bodies the command writes to files, (path, body): a patch written, then applied."""
    applied: tuple[str, ...] = ()
    """Patch files it applies whose contents it does not hold itself (`git apply fix.patch`)."""


@dataclass
class _Found:
    written: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    contents: dict[str, str] = field(default_factory=dict)
    """Heredoc bodies written to a file by this command (a patch written, then applied)."""
    applied: list[str] = field(default_factory=list)

    def write(self, path: str) -> None:
        if _is_file_word(path) and path not in self.written:
            self.written.append(path)

    def see(self, path: str) -> None:
        if _is_file_word(path) and path not in self.read:
            self.read.append(path)


def _is_file_word(word: str) -> bool:
    """A word that names a file: not empty, not an option, not a device, not a glob or variable."""
    return (
        bool(word)
        and not word.startswith(("-", "/dev/", "&"))
        and not any(char in word for char in "*?$`{}")
        and word not in (".", "..", "/")
    )


def _split_heredocs(script: str) -> tuple[str, list[str]]:
    """The script without heredoc bodies, and the bodies in the order their markers appear."""
    lines = script.split("\n")
    kept: list[str] = []
    bodies: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        for match in _HEREDOC.finditer(line):
            strip_tabs, delimiter = match.group(1) == "-", match.group(3)
            body: list[str] = []
            while index < len(lines):
                candidate = lines[index].lstrip("\t") if strip_tabs else lines[index]
                index += 1
                if candidate.strip() == delimiter:
                    break
                body.append(lines[index - 1])
            bodies.append("\n".join(body))
    return "\n".join(kept), bodies


_PLAIN = re.compile(r"[^'\"\\`$#]*")
_PLAIN_TOKEN = re.compile(r"\|\||&&|&>>|>>|&>|>&|<&|<<<|<<-|<<|;;|\|&|[|;&<>(){}]|[^\s|;&<>(){}]+")


def _tokens(script: str) -> list[str] | None:
    """The words and operators of `script`, or None while a quote is still open."""
    if _PLAIN.fullmatch(script):  # no quotes, escapes, expansions or comments: as shlex splits it
        return _PLAIN_TOKEN.findall(script)
    lexer = shlex.shlex(script.replace("\\\n", " "), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


def _simple_commands(tokens: Sequence[str]) -> Iterator[list[str]]:
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS or token == "\n":
            if current:
                yield current
            current = []
        else:
            current.append(token)
    if current:
        yield current


def shell_effects(script: str, known: Callable[[str], str | None] = lambda _: None) -> ShellEffects:
    """What `script` writes and reads. `known(path)` gives the content an earlier command wrote to
    a path, so `git apply fix.patch` can name the files the patch changes."""
    effects = _effects_of(script)
    if not effects.applied:
        return effects
    found = _Found(written=list(effects.written))
    for patch in effects.applied:
        content = known(patch)
        if content is not None:
            _diff_targets(content, found)
    read = tuple(path for path in effects.read if path not in found.written)
    return replace(effects, written=tuple(found.written), read=read)


def shell_contents(script: str) -> dict[str, str]:
    """Heredoc bodies the script writes to files (`cat > f <<EOF`), by path."""
    return dict(_effects_of(script).contents)


@functools.lru_cache(maxsize=4_096)
def _effects_of(script: str) -> ShellEffects:
    """The effects of one script on its own (agents run the same commands again and again)."""
    found = _Found()
    _analyse(script, found)
    return ShellEffects(
        tuple(found.written),
        tuple(path for path in found.read if path not in found.written),
        tuple(found.contents.items()),
        tuple(found.applied),
    )


def _analyse(script: str, found: _Found) -> None:
    text, bodies = _split_heredocs(script)
    queue = iter(bodies)
    pending = ""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        # A newline ends a command unless a quote is open (a multi-line `python -c "…"`).
        pending = f"{pending}\n{line}" if pending else line
        tokens = _tokens(pending)
        if tokens is None:
            if number < len(lines) - 1:
                continue
            tokens = pending.split()  # an unclosed quote: the words before it still say something
        pending = ""
        for words in _simple_commands(tokens):
            _command(words, found, queue)


def _command(words: list[str], found: _Found, bodies: Iterator[str]) -> None:
    argv: list[str] = []
    stdin: str | None = None
    stdin_path: str | None = None
    outputs: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        following = words[index + 1] if index + 1 < len(words) else ""
        if word in _WRITE_REDIRECTS:
            if following:
                found.write(following)
                outputs.append(following)
            index += 2
        elif word in ("<<", "<<-"):
            stdin = next(bodies, "")
            index += 2
        elif word == "<<<":
            stdin = following
            index += 2
        elif word == "<":
            stdin_path = following
            found.see(following)
            index += 2
        elif word in (">&", "<&", "2>&1"):
            index += 2
        elif word.isdigit() and following in _WRITE_REDIRECTS | {">&"}:
            index += 1  # the file descriptor of the redirection that follows
        else:
            argv.append(word)
            index += 1
    if stdin is not None:
        for path in outputs:
            found.contents[path] = stdin
    # `patch < fix.diff`: the patch's content is that file's, known only to an earlier command.
    stdin_file = stdin_path if stdin is None else None
    while argv and (("=" in argv[0] and not argv[0].startswith("=")) or argv[0] in _PREFIX_WORDS):
        argv.pop(0)
    if not argv:
        return
    program = posixpath.basename(argv[0])
    arguments = argv[1:]
    script_flag = next(
        (i for i, word in enumerate(arguments[:-1]) if re.fullmatch(r"-[a-z]*c[a-z]*", word)), None
    )
    if program in ("bash", "sh", "zsh", "dash") and script_flag is not None:
        _analyse(arguments[script_flag + 1], found)  # `bash -c`, `bash -lc`
    elif program == "sed":
        _sed(arguments, found)
    elif program == "perl":
        _perl(arguments, found)
    elif program == "tee":
        for path in _positionals(arguments, "tee"):
            found.write(path)
    elif program in ("mv", "cp"):
        _move_or_copy(program, arguments, found)
    elif program in _REMOVERS:
        for path in _positionals(arguments, program):
            found.write(path)
    elif program == "git" and arguments:
        _git(arguments, found, stdin, stdin_file)
    elif program == "patch":
        _patch(arguments, found, stdin, stdin_file)
    elif program == "apply_patch":
        _diff_targets(stdin if stdin is not None else " ".join(arguments), found)
    elif _PYTHONS.match(program):
        _python(arguments, found, stdin)
    elif program in _READERS:
        for path in _positionals(arguments, program):
            found.see(path)
    elif program in ("grep", "egrep", "fgrep", "rg"):
        positionals = _positionals(arguments, "grep" if program != "rg" else "rg")
        explicit = any(
            a in ("-e", "-f", "--regexp", "--file") or a.startswith("--regexp=") for a in arguments
        )
        for path in positionals if explicit else positionals[1:]:
            found.see(path)


def _positionals(arguments: Sequence[str], program: str) -> list[str]:
    """The operands of a command: words that are not options or option values."""
    with_value = _OPTIONS_WITH_VALUE.get(program, frozenset())
    positionals: list[str] = []
    skip = False
    only_operands = False
    for word in arguments:
        if skip:
            skip = False
        elif only_operands or not word.startswith("-") or word == "-":
            positionals.append(word)
        elif word == "--":
            only_operands = True
        elif word in with_value:
            skip = True
    return positionals


def _sed(arguments: Sequence[str], found: _Found) -> None:
    in_place = any(
        word == "--in-place"
        or word.startswith("--in-place=")
        or (re.fullmatch(r"-[a-zA-Z]*i.*", word) is not None)
        for word in arguments
        if word.startswith("-") and not word.startswith("--expression")
    )
    positionals = _positionals(arguments, "sed")
    has_script_option = any(word in ("-e", "-f", "--expression", "--file") for word in arguments)
    files = positionals if has_script_option else positionals[1:]
    for path in files:
        (found.write if in_place else found.see)(path)


def _perl(arguments: Sequence[str], found: _Found) -> None:
    in_place = False
    files: list[str] = []
    skip = False
    for word in arguments:
        if skip:
            skip = False
        elif word.startswith("-") and len(word) > 1:
            flags = word[1:]
            in_place = in_place or "i" in flags.split("e")[0]
            skip = flags.endswith("e") or flags.endswith("E")
        else:
            files.append(word)
    for path in files:
        (found.write if in_place else found.see)(path)


def _move_or_copy(program: str, arguments: Sequence[str], found: _Found) -> None:
    positionals = _positionals(arguments, program)
    target_dir = next(
        (arguments[i + 1] for i, word in enumerate(arguments[:-1]) if word in ("-t", "--target-directory")),
        None,
    )
    if target_dir is not None:
        sources, destination, into_dir = positionals, target_dir, True
    elif len(positionals) >= 2:
        sources, destination = positionals[:-1], positionals[-1]
        into_dir = len(sources) > 1 or destination.endswith("/")
    else:
        return
    for source in sources:
        if program == "mv":
            found.write(source)
        else:
            found.see(source)
        found.write(
            posixpath.join(destination, posixpath.basename(source.rstrip("/"))) if into_dir else destination
        )


def _git(arguments: Sequence[str], found: _Found, stdin: str | None, stdin_file: str | None) -> None:
    while arguments and arguments[0] in ("-C", "-c"):
        arguments = arguments[2:]
    if not arguments:
        return
    sub, rest = arguments[0], arguments[1:]
    if sub in ("apply", "am"):
        patches = [p for p in _positionals(rest, "git") if p != "-"]
        found.applied.extend(patches)
        if not patches and stdin is not None:
            _diff_targets(stdin, found)
        elif not patches and stdin_file is not None:
            found.applied.append(stdin_file)
    elif sub == "mv":
        _move_or_copy("mv", rest, found)
    elif sub in ("rm", "checkout", "restore"):
        operands = _positionals(rest, "git")
        if sub != "rm" and "--" in rest:
            operands = [p for p in rest[rest.index("--") + 1 :]]
        elif sub != "rm":
            return  # `git checkout branch` changes no named file
        for path in operands:
            found.write(path)


def _patch(arguments: Sequence[str], found: _Found, stdin: str | None, stdin_file: str | None) -> None:
    source = next(
        (arguments[i + 1] for i, word in enumerate(arguments[:-1]) if word in ("-i", "--input")), None
    )
    operands = [
        word
        for i, word in enumerate(arguments)
        if not word.startswith("-") and (i == 0 or arguments[i - 1] not in ("-i", "--input", "-d", "-o"))
    ]
    if operands:
        found.write(operands[0])
        return
    if source is not None or stdin is None:
        found.applied.extend(path for path in (source or stdin_file,) if path is not None)
    else:
        _diff_targets(stdin, found)


def _diff_targets(patch: str, found: _Found) -> None:
    for match in _DIFF_TARGET.finditer(patch):
        path = (match.group("diff") or match.group("patch") or match.group("moved") or "").strip()
        if path and path != "/dev/null":
            found.write(path)


def _python(arguments: Sequence[str], found: _Found, stdin: str | None) -> None:
    if "-c" in arguments[:-1]:
        code: str | None = arguments[arguments.index("-c") + 1]
    elif (not arguments or arguments[0] == "-") and stdin is not None:
        code = stdin
    else:
        code = None
    if code is not None:
        python_effects(code, found)


_WRITE_METHODS = frozenset({"write_text", "write_bytes", "unlink", "touch", "rename", "replace"})
_PATH_FUNCTIONS = frozenset(
    {"os.remove", "os.unlink", "os.rename", "os.replace", "shutil.copy", "shutil.copyfile", "shutil.move"}
)


def python_effects(code: str, found: _Found) -> None:
    """Files a Python snippet opens for writing, writes with pathlib, removes, moves or copies
    (string literals and names bound to them only)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            literal = _literal_path(node.value, names)
            if literal is not None:
                names[node.targets[0].id] = literal
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = ast.unparse(node.func)
        if function in ("open", "io.open", "codecs.open") and node.args:
            path = _literal_path(node.args[0], names)
            mode = (
                node.args[1]
                if len(node.args) > 1
                else next((k.value for k in node.keywords if k.arg == "mode"), None)
            )
            writes = (
                isinstance(mode, ast.Constant)
                and isinstance(mode.value, str)
                and any(flag in mode.value for flag in "wax+")
            )
            if path is not None:
                (found.write if writes else found.see)(path)
        elif isinstance(node.func, ast.Attribute) and node.func.attr in _WRITE_METHODS | {
            "open",
            "read_text",
        }:
            path = _literal_path(node.func.value, names)
            if path is None:
                continue
            if node.func.attr in _WRITE_METHODS:
                found.write(path)
            elif node.func.attr == "open":
                mode = node.args[0] if node.args else None
                writes = (
                    isinstance(mode, ast.Constant)
                    and isinstance(mode.value, str)
                    and any(flag in mode.value for flag in "wax+")
                )
                (found.write if writes else found.see)(path)
            else:
                found.see(path)
        elif function in _PATH_FUNCTIONS:
            for argument in node.args[:2]:
                path = _literal_path(argument, names)
                if path is not None:
                    (
                        found.see
                        if function.startswith("shutil.copy") and argument is node.args[0]
                        else found.write
                    )(path)


def _literal_path(node: ast.expr, names: dict[str, str]) -> str | None:
    """A path spelt as a literal: `"a.py"`, `Path("a.py")`, or a name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if (
        isinstance(node, ast.Call)
        and ast.unparse(node.func) in ("Path", "pathlib.Path", "PurePath")
        and len(node.args) == 1
    ):
        return _literal_path(node.args[0], names)
    return None
