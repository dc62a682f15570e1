"""Shell completion for `contextfold`, generated from its argparse tree (`contextfold completion bash|zsh|fish`).

The tree is walked once (`walk`): every command path (`""`, `hooks`, `hooks install`, …) with its
subcommands, options, the options that take a value, and the choices of options and positionals.
Each shell's script is written from that, so a new command or option completes without anyone
editing a script. zsh loads the bash function through `bashcompinit`, which zsh ships.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

SHELLS = ("bash", "zsh", "fish")


@dataclass
class Command:
    """One command path of the tree and what may follow it."""

    path: str
    help: str = ""
    subcommands: dict[str, str] = field(default_factory=dict)
    """Name → one-line help."""
    options: dict[str, str] = field(default_factory=dict)
    """Option string → help."""
    takes_value: set[str] = field(default_factory=set)
    """The options that take a value (the next word is theirs)."""
    option_choices: dict[str, list[str]] = field(default_factory=dict)
    positional_choices: list[str] = field(default_factory=list)


def walk(parser: argparse.ArgumentParser, path: str = "", help: str = "") -> list[Command]:
    """Every command path of `parser`, depth first, the root (`""`) first."""
    command = Command(path, help)
    below: list[Command] = []
    for action in parser._actions:  # argparse keeps no public list of its actions
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, child in action.choices.items():
                command.subcommands[name] = helps.get(name, "")
                below.extend(walk(child, f"{path} {name}".strip(), helps.get(name, "")))
        elif action.option_strings:
            if action.help == argparse.SUPPRESS:
                continue
            for option in action.option_strings:
                command.options[option] = action.help or ""
                if action.nargs != 0:
                    command.takes_value.add(option)
                    if action.choices:
                        command.option_choices[option] = [str(choice) for choice in action.choices]
        elif action.choices:
            command.positional_choices.extend(str(choice) for choice in action.choices)
    return [command, *below]


def _words(items: list[str]) -> str:
    return " ".join(items)


def bash(commands: list[Command]) -> str:
    """A bash completion function `_contextfold` and its `complete` line."""
    paths = "|".join(f'"{c.path}"' for c in commands if c.path)
    valued = sorted({option for c in commands for option in c.takes_value})
    words = "\n".join(
        f'        "{c.path}") words="{_words([*c.subcommands, *c.positional_choices, *c.options])}" ;;'
        for c in commands
    )
    choices = "\n".join(
        f'        "{c.path}|{option}") COMPREPLY=($(compgen -W "{_words(values)}" -- "$cur")); return 0 ;;'
        for c in commands
        for option, values in c.option_choices.items()
    )
    return f"""# contextfold completion for bash, generated from its command line: contextfold completion bash
_contextfold() {{
    local cur prev word path words i skip=0
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    path=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        if [ "$skip" = 1 ]; then skip=0; continue; fi
        case " {_words(valued)} " in *" $word "*) skip=1; continue ;; esac
        case "${{path:+$path }}$word" in
            {paths}) path="${{path:+$path }}$word" ;;
        esac
    done
    case "$path|$prev" in
{choices or '        "") ;;'}
    esac
    case " {_words(valued)} " in
        *" $prev "*) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
    esac
    case "$path" in
{words}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    if [ "${{#COMPREPLY[@]}}" -eq 0 ] && [ "${{cur#-}}" = "$cur" ]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
}}
complete -o filenames -F _contextfold contextfold
"""


def zsh(commands: list[Command]) -> str:
    """The bash function, loaded into zsh through its `bashcompinit`."""
    return (
        "# contextfold completion for zsh, generated from its command line: contextfold completion zsh\n"
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(commands).split("\n", 1)[1]
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(commands: list[Command]) -> str:
    """`complete -c contextfold …` lines: each subcommand under the path that offers it, each option
    under its own command path (fish's `__fish_seen_subcommand_from` names the last word of a path)."""
    lines = [
        "# contextfold completion for fish, generated from its command line: contextfold completion fish",
        "complete -c contextfold -f",
    ]
    for command in commands:
        names = command.path.split()
        if not names:
            condition = "__fish_use_subcommand"
        else:
            seen = " ".join(f"; and __fish_seen_subcommand_from {name}" for name in names)
            siblings = " ".join(command.subcommands)
            condition = seen.removeprefix("; and ")
            if siblings:
                condition += f"; and not __fish_seen_subcommand_from {siblings}"
        for name, help in command.subcommands.items():
            lines.append(f"complete -c contextfold -n {_fish_quote(condition)} -a {name} -d {_fish_quote(help[:80])}")
        if command.positional_choices:
            lines.append(
                f"complete -c contextfold -n {_fish_quote(condition)} -a {_fish_quote(_words(command.positional_choices))}"
            )
        for option, help in command.options.items():
            flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
            extra = ""
            if option in command.option_choices:
                extra = f" -x -a {_fish_quote(_words(command.option_choices[option]))}"
            elif option in command.takes_value:
                extra = " -r -F"
            lines.append(
                f"complete -c contextfold -n {_fish_quote(condition)} {flag}{extra} -d {_fish_quote(help[:80])}"
            )
    return "\n".join(lines) + "\n"


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for `shell` (one of `SHELLS`)."""
    commands = walk(parser)
    return {"bash": bash, "zsh": zsh, "fish": fish}[shell](commands)


__all__ = ["SHELLS", "Command", "bash", "fish", "script", "walk", "zsh"]
