"""The working set: the files, identifiers and tests the agent was working with.

After a compaction the agent goes on using names it met before: the module it was reading, the
function it grepped for, the test that failed, the header the file it read includes. Those names
are cheap to keep and costly to find again, so the summary lists the ones that mattered most,
within a fixed share of its budget (`SHARE`, growing to `MAX_SHARE` when the other sections leave
that room unused). Edited files are not part of it: the summary names every one of them anyway.
Paths under the project's root are written relative to it, and files of one directory in one
bullet share it (`src/app/{a.py, b.py}`).

Where names are found, and what one use of a name is worth:
- the user's words and the assistant's own text: a name in backticks (3), any other code-like
  word (1.5) — the agent named it (in plain words, `a/b/c` is a choice, not a path, and a
  CamelCase word alone a product's name, unless it names an error or a test); code the assistant
  wrote in a fenced block of its reply (`CODE_BLOCK_WEIGHT`), unless the block is the message's
  own call (mini-swe-agent runs the command its reply shows);
- a tool call's arguments: paths, patterns, code (1);
- a tool's output: a name it shows, once per output (0.4; a file name 1) — seen, not yet used;
  a web page or search results (an adapter's `web_tools`) are others' prose, read as plain words;
  exception names, and test names on a line that reports a failure, count as in the agent's text
  (a failing test is worth keeping, a passing one listed among hundreds is not); a name an output
  puts in backticks (a README naming its API) `BACKTICKED_OUTPUT_WEIGHT` more, and a name it shows
  being defined (`const resetForm =`, `def load(`: what a file offers the work) `DEFINITION_WEIGHT` more;
- a file a tool read or searched: 2 more.
**Seen, then referred to**: a name an output showed that a later message typed, read, opened or
ran — or, for a file, whose name without its extension the agent later typed (`AppAvatar` for
`AppAvatar.vue`), or whose name of several words someone later said in words (`prompt_injection.py`
after "the prompt injection scanner") — gets `SEEN_THEN_USED` more: the agent met it and went on
with it. A file only shown, in a directory holding one the agent worked on, gets
`NEIGHBOUR_BONUS`; files count `FILE_FACTOR` times a name (they are opened again more often than a
name is written again).
A use late in the history counts up to five times one at its start (`RECENCY`). An output showing
many names spreads its weight over them (`SPREAD_NAMES`); a name shown in most outputs is the
harness's (`exit_code`), and counts only for what the agent did with it; a name below `MIN_SCORE`
is not listed. Code-like means a path (absolute ones too, however deep; Windows ones too), a
`snake_case`, `CamelCase`, `kebab-case` (in code), `Verb-Noun`, `dotted.name`, `name/2`,
`UPPER_CASE`, `$VARIABLE`, `@scope/package` or `__dunder__` word, or anything in backticks without
spaces; ordinary words never qualify. Letters of any script count as letters (`设计文档.md`,
`数据_加载`), and a file name or path may start with a digit (`01-intro.md`, `2024_report.md`); an
identifier never does, so numbers, versions, dates, times, sizes and durations (`1.2.3`,
`2024-01-05`, `28px`, `1.5h`) are not names. Names the rest of the summary already holds are not
listed again.

**Noise**, by syntax and by where a name stood, never by a list of strings seen somewhere: a test
runner's progress marks glued to a path (`EE.E/usr/…`) are dropped from it; bytes `cat -v` escaped
(`M-eM-/M-9…`), sed expressions, placeholders (`your_command_here`, `path/to/x`, `<file>`,
`{name}`), globs, bare words (`def`, `None`, `POST`) and words of no language's identifier grammar
(`28px`, `Cmd+Shift+R`) are not names (`noise`); a kebab-case word only ever followed by `:` or `="`
is a format's property, key or attribute (`margin-top:`, `stroke-width="2"`), and one only ever a
style declaration's value (`justify-content: space-between;`) a keyword of the style language, not a
name; words a hyphen joins that only ever stood in sentences (`high-level`, `production-ready` in a
document, or in a sentence in quotes) are English; nor are a search path's list (`/a/bin:/b/bin`), a
long listing's file mode (`drwxr-xr-x`) or a one-letter variable's member (`d.deviceId`,
`e.target`); a diff's `a/` and `b/` sides are the file itself; system and installed-package paths
(`/usr/lib/python3.10/…`, `site-packages`, `node_modules`) are listed only when the agent opened
them; words a slash joins (`Low/Medium/High`) are a path only when the session's files lie under
them, sizes (`24pt/18pt/14pt`) never; a file tools only showed, `FAR_DEPTH` directories or more
below everything the agent opened (a vendored `include/boost/…` every grep hit), counts `FAR_FACTOR`
of its score; a path cut by a clip or an ellipsis (`adapters.p` beside `adapters.py`) or where a
harness cut the output short (mini-swe-agent's `</output_head>`, `<response clipped>`), a search's
context-line number (`a.js-48`) and escapes shown in string literals (`\nFormat`) are not part of a
name; names only directory listings showed keep `LISTING_NAMES` a listing (`WORKED_LISTING_NAMES` in
a directory the agent worked in); and more than `RUN_NAMES` names the same but for their numbers are
one entry, `func_6_0 … func_6_150` (those someone named in words stay apart). Ties rank by first
use, so the same history always gives the same list.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from contextfold.compaction.agents import ToolCall, pick
from contextfold.compaction.agents import adapters as registered_adapters
from contextfold.compaction.prose import fenced_blocks, user_words, written, written_prose
from contextfold.compaction.secrets import REDACTED
from contextfold.compaction.template import from_root, is_absolute
from contextfold.domain import Message
from contextfold.tokens.counting import TokenCounter

SHARE = 0.4
"""Of the summary's budget, what the working set always may take (1,800 tokens of 4,500): on the
corpus, 0.2 kept 86 % of the names needed later, 0.35 kept 92 %, 0.4 kept 94 %."""
MAX_SHARE = 0.7
"""What it may grow to when the other sections leave that much of the budget unused."""
MAX_TOKENS = 3_150
"""However large a budget the caller gives."""
OUTPUT_WEIGHT = 0.4
"""One tool output showing a name (counted once per output), against 1 for a use in a call."""
OUTPUT_FILE_WEIGHT = 1.0
"""A file name in an output (a listing, a search hit, a traceback) is more often opened next."""
READ_BONUS = 2.0
"""A file a tool read is one the agent opened on purpose, whatever words it used."""
DEFINITION_WEIGHT = 0.8
"""A name an output shows being defined (`def load(`, `const resetForm =`, `func (s *Server) Start(`):
what a file read offers the work, worth this more than a name it only shows in use."""
RECENCY = 4.0
"""A use at the end of the history counts 1 + RECENCY times one at its start (growing with the
square of the position: what was used just before the cut matters most)."""
SPREAD_NAMES = 100
"""An output showing more names than this (a long listing, a test run's 400 `PASSED` lines) gives
each of them a share of what this many would get."""
MIN_SCORE = 0.3
"""What a name must score to be listed at all: once in a call, or in an output or two; not once
in a long listing long ago."""
MAX_OUTPUT_CHARS = 40_000
"""Of each tool output, what is read for names."""

_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_CODE_SPAN = re.compile(r"^[\w.:/@$#<>()\[\]{}*+!?=,'\"-]+$")
_SPACED = re.compile(r"\s")
_EXPRESSION = re.compile(r"[=,]|\((?!\)$)")
"""In a backticked span: an assignment, a list or a call with arguments, not one name."""
_JOINED_SENTENCE = re.compile(
    r"(?<=[a-z][a-z]\.)(?=(?:I|A|An|The|This|That|These|Those|It|We|Let|Now|Next|Then|To|Upon|Before|After|"
    r"First|Finally|However|But|And|So|If|In|On|Since|As|Also|Here|There|Once|With|For|Our|You|Please|Note|"
    r"Looking|Based|Great|Perfect|Okay|Instead|Given|While|When|Which|What|Why|How|Lastly|Additionally|"
    r"Therefore|Thus|Although|Unfortunately|Alternatively|Otherwise)[\s,'’])"
)
"""Where two sentences of someone's words were joined without a space (`this page.Upon
revisiting`, `message.Next, I'll`, as some harnesses store an agent's thoughts): `page.Upon` is no
dotted name. Only a word that opens English sentences, then a space, a comma or an apostrophe
(`points.I'll`); `time.Now()` stays, and so does any name in code or in backticks."""
_WORD = re.compile(
    r"(?<![\w./:~<$-])(?<!\w@)(?:\$?[^\W\d:.]|[:.]|\d(?=[\w.:/-]*[^\W\d_])|~?/(?=[\w.]))[\w.:/-]*[\w)]"
    r"|(?<![\w./:$-])[A-Za-z_]\w"
)
"""A word that may be a name: it starts with a letter of any script or `_` (`设计文档.md`), a digit
when a letter follows (`2024_report.md`, `01-intro.md`; a bare number is none), a `$`, a `.`/`:` or
a root; whether it is one is `_code_like`'s to say. Never the rest of an address after its `@`
(`vue@3/dist/vue.global.js` is part of a URL, `user@host.com` a mail address)."""
_BRACKET_PATH = re.compile(r"(?<![\w./:~<$\[-])[\w.~/-]*/\[\w+\]/[\w.\[\]/-]*[\w\]]")
"""A path through a directory named `[param]` (`app/players/[id]/page.tsx`, `pga/[year]/[category]`),
read whole; a `]` closing no bracket of its own (`[see app/[id]/x.tsx]`) is not the path's."""
_SNAKE = re.compile(r"^_*[^\W\d_][^\W_]*(?:_+[^\W_]+)+_*$")
"""`snake_case`, in any script (`数据_加载`): a letter first, never a digit (`2024_01` is a number)."""
_CAMEL = re.compile(
    r"^[A-Z]?[a-z0-9]+(?:[A-Z]+[a-z0-9]*)+$"
    r"|^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$"
    r"|^[A-Z]{2,}[a-z0-9]{2,}(?:[A-Z]+[a-z0-9]*)*$"
)
"""`camelCase`, `PascalCase`, and with capitals in a row: `getTargetX`, `innerHTML`, `userID`,
`HTMLElement`, `IOError` (not `APIs` or `URLs`: an acronym's plural)."""
_DOTTED = re.compile(r"^[^\W\d][\w]*(?:\.[^\W\d][\w]*)+(?:\(\))?$")
_LINE_SUFFIX = re.compile(r"(?<=\w):\d+(?::\S*)?$")
"""`path.py:12` or `path.py:12:3:`: a place in a file; the name is the file's."""
_JUNK = re.compile(r"\w\.\.|//|^\.[A-Za-z0-9]+$|^:\d|^\.\.\.")
"""Glued paths (`a.js../../x`), doubled slashes, a bare extension (`.json`), a search hit's line
number without its file (`:91:x`), an ellipsis."""
_NOT_NAMES = frozenset({"e.g", "i.e", "etc", "vs."})
_SEARCH_PATH = re.compile(r"(?<=..):[/\\](?![/\\])")
"""`/usr/bin:/c/Tools/bin`: a search path (`$PATH`, `PYTHONPATH`) or a host's path, a list of
directories and not one name (a drive's `C:/` is at the start)."""
_LOCAL_MEMBER = re.compile(r"[a-z](?:\.|\?\.)[A-Za-z_$]")
"""`a.role.name`, `d.deviceId`, `e.target`: a member of a one-letter local variable (a callback's
argument), an expression of one line and not a name of the work."""
_PERMISSIONS = re.compile(r"[-dlcbps][-rwxsStT]{9}[@+.]?")
"""`drwxr-xr-x`: a file's mode in a long listing."""
MIN_OUTPUTS_FOR_COMMON = 10
COMMON_SHARE = 0.3
"""A name in more than this share of the tool outputs is the harness's or the format's."""
_CUT_HERE = re.compile(r"\s*(?:</output_head>|<response clipped>)")
"""Where a harness cut an output short (mini-swe-agent's head before the elided middle, SWE-agent's
and OpenHands' clipped file view): the word just before it may be cut mid-name."""
_MARKUP = re.compile(r"</?[A-Za-z][\w-]*>")
"""A harness's tags around an output (`<returncode>`, `<tool_use_error>`): not the output's names."""
_JSON_KEY = re.compile(r'"[\w.$-]{1,100}"[ \t]*:')
"""A key of the JSON an MCP server answers with (`"relative_path":`, `"return_code":`), or a
harness's own tool (the records of a background subagent's transcript Claude Code's `TaskOutput`
shows: `"sessionId":`, `"gitBranch":`): its protocol's words, not the work's. Only for a tool no
adapter knows by name or one of the harness's own (`other`): the JSON a command printed or a file
holds is the work's (and inside an MCP tool's string values it is escaped, so it stays); the
values stay."""
_KEBAB = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)+$|^[A-Z][a-z]+(?:-[A-Z][A-Za-z]+)+$")
"""`kebab-case`, and a command's or header's `Verb-Noun` (`Copy-Item`, `Content-Type`)."""
_VARIABLE = re.compile(r"^\$[A-Z][A-Z0-9_]{2,}$")
"""`$PROFILE`, `$HOME`: an environment variable, named with its `$`."""
_SCOPED = re.compile(r"^[a-z0-9][\w.-]*/[a-z0-9][\w.-]*$")
"""After an `@`: a scoped package (`@convex-dev/auth`)."""
_ARITY = re.compile(r"^[A-Za-z_][\w.?!]*/\d+(?:-\d+)?$")
"""`name/2`: a function and its arity (Erlang, Elixir), not a path."""
_UPPER = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+$")
_DUNDER = re.compile(r"^__[A-Za-z][A-Za-z0-9_]*__$")
"""`__init__`, `__MODULE__`: a language's special names."""
_TEST = re.compile(r"\btest_\w{3,}|\b\w{3,}_test\b|\bTest[A-Z]\w+|\b[A-Z]\w+Tests?\b")
_TEST_FILE_STEM = re.compile(r"\.([A-Za-z][A-Za-z0-9]{0,9})\b")
"""What follows a test name that is a file's stem (`parse_test` in `parse_test.go`): its type."""
_FAILING = re.compile(r"FAIL|ERROR|Error|error:")
"""A line of output that reports a failure: the tests it names are worth keeping."""
_EXCEPTION = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Failure)\b")
_FILE_EXTENSIONS = frozenset(
    """py pyi ex exs eex heex leex erl hrl js mjs cjs ts tsx jsx vue svelte rs go rb java kt kts scala c h
    cc cpp hpp cs swift m mm php pl sh bash zsh fish ps1 sql md rst txt json jsonl yaml yml toml ini cfg
    conf lock xml html htm css scss sass less gradle cmake mk dockerfile proto graphql tf lua r jl dart
    zig nim ml mli hs elm clj cljs edn ipynb csv tsv env mdx svg cxx hxx hh erb astro gql hcl bat cmd patch
    diff tex bib nix png jpg jpeg gif webp ico pdf docx xlsx pptx""".split()
)
"""Source, markup, configuration, data, image and document types: a word ending with one names a
file (`.log` is left out: `console.log` is a call far more often than a log is named)."""
_QUANTITY = re.compile(r"[\d.,]*\d\.[A-Za-z]")
"""A number with a one-letter unit (`1.5h`, `2.5m`, `0.5r`), which a file extension's shape would
otherwise make a file; `404.html`, `01-intro.md` and `2024_report.md` stay files."""
_BARE_FILES = frozenset({"Makefile", "Dockerfile", "Gemfile", "Rakefile", "Procfile", "Justfile", "Vagrantfile"})
"""Files known by a bare name: a file, not a word."""
BACKTICKED_OUTPUT_WEIGHT = 1.0
"""A name in backticks in a tool output (a document the agent read names it as code), once per
output, on top of what any name an output shows gets."""
SEEN_THEN_USED = 2.0
"""A name a tool output showed and the agent then typed, read or ran: it met it and went on
with it, as surely part of the work as a file it read (`READ_BONUS`)."""
CODE_BLOCK_WEIGHT = 0.5
"""A use of a name in code the agent wrote in its reply (a snippet, a proposal), against one in a
call's arguments (1): often the file's code shown again, not the agent's next move."""
PHRASE_WORDS = 4
"""A file's name of up to this many words (`prompt_injection`, `UserManagementTable`) counts as
referred to when someone says those words in a row; longer names are not said in passing."""
FILE_FACTOR = 2.0
"""What a file's score counts, against a name's: a file is opened again after a compaction more
often than an identifier is written again."""
NEIGHBOUR_BONUS = 1.0
"""A file only shown, in a directory holding a file the agent edited, read or typed."""
FAR_DEPTH = 3
"""How many directories below everything the agent opened a file may lie before it counts as far
from the work (`far_from_work`): `include/boost/asio/` under the checkout the agent works in."""
FAR_FACTOR = 0.25
"""What the score of a file far from the work, that tools only showed, counts."""
LISTING_NAMES = 20
"""Names one directory listing may put in the working set on its own strength alone (more when
something else names them: the agent's words, another output)."""
WORKED_LISTING_NAMES = 40
"""Names one listing may put in the working set from a directory holding a file the agent worked
on (`worked_folders`), where `LISTING_NAMES` holds for the rest."""
RUN_NAMES = 6
"""Names of one shape (the same but for their numbers: `func_6_0`, `func_6_1` …) beyond which
the ones the agent never typed are listed as one run, `func_6_0 … func_6_150`."""
RUN_MARK = " … "
_CODE_IDENTIFIER = re.compile(
    r"(?:--|[@$.:])?(?:[^\W\d]|\$)[\w$]*(?:\(\))?"
    r"(?:(?:\.|::|:|->|\?\.)(?:[^\W\d]|\$)[\w$]*(?:\(\))?|-\w+)*(?:/\d+)?[!?]?(?:\(\))?"
)
"""What an identifier looks like in any language: word segments joined by `.`, `::`, `:`, `->`,
`?.` (or `-`, in kebab-case), an arity (`name/2`), a call's `()`; no spaces, quotes, operators or
markup; a letter of any script (`数据.加载`), never a digit, first."""
_CAMEL_STEP = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_SED = re.compile(r"[sy]([/|#,:])(?:(?!\1).)*\1(?:(?!\1).)*\1[gimpIe\d]*")
_META_ESCAPED = re.compile(r"(?:M-\^?\S){2}")
"""`M-eM-/M-9…`: bytes past ASCII as `cat -v` shows them (a non-English file name), not a name."""
"""A sed or tr substitution (`s/a/b/g`, `y/ab/cd/`): a script, not a path."""
_PLACEHOLDER = re.compile(
    r"(?i)(?:^|[\\/_.-])your(?:$|[\\/_.A-Z-])|_here$|(?:^|/)path/to(?:/|$)|^x{3,}$|[<>{}]|YYYY|\*"
    r"|^\[[^\W\d_]+(?:/[^\W\d_]+)+\]$"
)
"""Words a prompt or document puts where a real name goes (`your_command_here`, `path/to/file`,
`<file>`, `{name}/x`, `YYYY-MM-DD`, `XXX`, a choice to fill in: `[Vue/React/Angular]`), and glob
patterns (`src/*.py`): not one name."""
_PROGRESS = re.compile(r"^(?=[^/]*[EF])(?=[^/]*\.)[.EFsx]{2,}(?=/)")
"""A test runner's progress marks (`EEEE.E`, `.F`) printed right before a path, glued to it."""
_SYSTEM_ROOTS = (
    "/usr/",
    "/bin/",
    "/sbin/",
    "/etc/",
    "/lib/",
    "/lib64/",
    "/opt/",
    "/System/",
    "/Library/",
    "/Applications/",
    "/proc/",
    "/sys/",
    "/dev/",
    "node:",
)
_OS_FOLDERS = re.compile(
    r"(?:~|\$HOME|/Users/[^/]+)/Library/(?!Mobile Documents/)"
    r"|(?i:(?:[a-z]:|/(?:mnt/)?[a-z])[\\/](?:Program Files|Program Files \(x86\)|ProgramData|Windows"
    r"|Users[\\/][^\\/]+[\\/]AppData)(?:[\\/]|$))"
)
"""A macOS user's own Library (applications' support files, caches, preferences), the system's like
`/Library/` (not iCloud Drive, `Library/Mobile Documents/`, where projects live); and Windows' own
folders and a user's `AppData`, however a shell writes them (`C:\\Program Files\\…`, Git Bash's
`/c/Windows/…`, WSL's `/mnt/c/…`)."""
_PACKAGE_DIR = re.compile(
    r"(?:^|[\\/])(?:site-packages|dist-packages|node_modules|\.venv|\.nvm|\.npm|\.cache|\.cargo|\.rustup|"
    r"\.pyenv|\.m2|\.gradle|__pycache__|\.rbenv|\.rvm|\.gem|\.nuget|\.pub-cache|Pods|DerivedData)(?:[\\/]|$)"
    r"|(?:^|/)lib/(?:python\d|ruby/)|(?:^|[\\/])vendor[\\/]|(?:^|/)go/pkg/mod/"
)
"""Installed packages, tool caches and compiled bytecode (`__pycache__/x.cpython-39.pyc`): not the
project's own files, shown in tracebacks and listings. Python's, Node's, Rust's, the JVM's, Ruby's
(`~/.rbenv`, `lib/ruby/gems`), any `vendor/` (Composer's, Bundler's, Go's), Go's module cache, .NET's
NuGet, Dart's and CocoaPods' (`Pods/`), Xcode's `DerivedData`."""
_FRAME = re.compile(
    r"^[ \t]*at (?:async )?[^\n()]*\((?:file://)?(?P<js>[^()\s]+?):\d+:\d+\)[ \t]*$"
    r"|^[ \t]*File \"(?P<py>[^\"\n]+)\", line \d+, in [^\n]*(?:\n[ \t]+[^\n]*)?$"
    r"|^[ \t]*at (?P<vm>[\w$./<>`\[\],-]+)\([^()\n]*\)(?: in [^\n]*)?[ \t]*$",
    re.MULTILINE,
)
"""A stack frame (JavaScript's `at fn (path:line:col)`, Python's `File "path", line N, in fn` and its
source line, the JVM's and .NET's `at pkg.Class.method(File.java:42)`): when its code is someone
else's (`_system`, `_RUNTIME_PACKAGES`), so are the names in it."""
_RUNTIME_PACKAGES = (
    "java.",
    "javax.",
    "jdk.",
    "sun.",
    "com.sun.",
    "kotlin.",
    "kotlinx.",
    "scala.",
    "System.",
    "Microsoft.",
)
"""The packages of the JVM's and .NET's own libraries: a frame in them is the runtime's, as one in
`/usr/lib/python3.10/` is Python's (a module's prefix aside: `java.base/java.util.ArrayList`)."""
_GREP_CONTEXT = re.compile(r"(\.[A-Za-z0-9]{1,10})-\d+(?:-[\w.:/-]*)?$")
"""`a.js-48`, `a.js-48-export`: a line of a search's context (`grep -n -C` prints `path-N-line`, the
line's first word glued on), the name being the file's."""
_ARBITRARY_VALUE = re.compile(r"(?<![\w-])[\w:-]*[a-z]-\[[^\]\s]{1,60}\]")
"""`max-h-[80vh]`, `md:min-w-[12rem]`: a utility class with an arbitrary value (Tailwind), which would
otherwise read as the name `max-h`."""
_UTILITY_PROPERTY = (
    r"(?:p[xytblrse]?|m[xytblrse]?|gap(?:-[xy])?|space-[xy]|[wh]|min-[wh]|max-[wh]|size|text|bg|border(?:-[xytblrse])?"
    r"|rounded(?:-[tblrse]{1,2})?|shadow|font|leading|tracking|opacity|z|inset(?:-[xy])?|top|left|right|bottom|flex"
    r"|grid-(?:cols|rows)|col-span|row-span|items|justify|overflow(?:-[xy])?|ring(?:-offset)?|divide(?:-[xy])?|stroke"
    r"|fill|duration|delay|ease|transition|translate-[xy]|scale(?:-[xy])?|rotate|cursor|whitespace|line-clamp|aspect"
    r"|outline|decoration|from|via|to|backdrop-blur|blur|order|basis|grow|shrink)"
)
_UTILITY_VALUE = (
    r"(?:-?\d+(?:\.\d+)?(?:/\d+)?|px|x{0,2}s|sm|base|md|lg|x{1,2}l|[2-9]xl|auto|full|screen|min|max|fit|none|center"
    r"|start|end|between|around|evenly|stretch|baseline|hidden|visible|scroll|clip|wrap|nowrap|col|row|reverse|inherit"
    r"|current|transparent|white|black|bold|semibold|medium|normal|light|thin|extrabold|italic|tight|snug|relaxed|loose"
    r"|wide|wider|widest|all|colors|opacity|transform|inner|pointer|default|not-allowed|cover|contain|square|video"
    r"|dashed|dotted|solid|double|ellipsis|in|out|in-out|linear|gradient-to-(?:[tblr]|[tb][lr])"
    r"|[a-z]+-(?:50|[1-9]00|950))(?:/\d+)?"
)
_UTILITY_CLASS = re.compile(r"-?(?:[a-z0-9]+:)*" + _UTILITY_PROPERTY + "-" + _UTILITY_VALUE)
"""`mb-4`, `text-gray-500`, `md:grid-cols-2`, `bg-gradient-to-br`: a utility class (Tailwind's
grammar: a CSS property's short name, then a value of its scale — a number, a size, a keyword, a
colour and its shade). Styling, not a name the work goes on with: on the corpus they were 7 % of the
identifiers listed and never one the agent used after a cut. A project's own classes
(`glass-card`, `is-active`, `text-muted`) do not fit the grammar and stay."""
_NUMBERED = re.compile(r"\d+:(?=[\w.~/])")
"""A line number a search printed before a path (`grep -n` over one file: `17:priv/static/assets`)."""
_EATEN_SEPARATORS = re.compile(r"[A-Z]:(?![\\/])[^\s:]{8,}\.[A-Za-z]")
"""`C:Usersmeprojectsa.txt`: a Windows path whose backslashes a shell ate (an unquoted `cat C:\\Users\\…`
in bash), which names no file."""
_REGEX_CLASS = re.compile(r"\[[^\]\s]*\][+*?{]")
"""`/agent-[a-zA-Z0-9]+/`: a regular expression (a character class and its quantifier), not a path."""
_ABBREVIATION = re.compile(r"[^\W\d_](?:\.[^\W\d_])+\.?")
"""`т.к`, `z.B`, `e.g`: an abbreviation in someone's words, every part one letter."""
_KEBAB_KEY = re.compile(r"(?<![\w./:~<$-])([a-z][a-z0-9]*(?:-[a-z0-9]+)+)(?:['\"]?\s*:(?!:)|=[\"'])")
"""A kebab-case word used as a property or key of a format (`margin-top: 0`, `runs-on:`) or as a
markup attribute (`stroke-width="2"`): the format's vocabulary, not a name of the work."""
_CSS_VALUE = re.compile(r"(?<![\w$.-])[a-z]+(?:-[a-z]+)*\s*:(?!:)\s*([^;:{}\"'`<>\n]{1,200})(?=[;}])")
"""A style declaration's value (`justify-content: space-between;`, `font-family: system-ui, sans-serif }`):
the keywords of the style language, not names of the work (a custom property, `var(--gap)`, is one)."""
_VALUE_WORD = re.compile(r"(?<![\w./:~<$@#-])[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?![\w./-])")
_DEFINED = re.compile(
    r"\b(?:def|defp|class|function|func|fn|fun|const|let|var|type|interface|struct|enum|trait|protocol|record"
    r"|module|defmodule)\s+(?:\([^()\n]{0,80}\)\s*)?\*?([A-Za-z_$][\w$.]*)"
    r"|\b(?:public|private|protected|internal|static|override|virtual|abstract|final|async|synchronized)\s+"
    r"(?:[\w$<>\[\]?,.]+\s+){0,4}?([A-Za-z_$][\w$]*)\s*\("
)
"""A definition's name, in the usual languages' words for one (a Go method's receiver skipped), or a
method's that a modifier opens (`public static void main(`, `private async loadRoster(`)."""
_PROSE_WORD = re.compile(r"[^\W\d_]+")
_STEM_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
"""The words of a file's name: `prompt_injection`, `UserManagementTable`, `get-location`."""
_WORD_COMPOUND = re.compile(r"(?<![\w./:~<$@#-])[A-Za-z][a-z]+(?:-[A-Za-z][a-z]+)+(?![\w/-])")
"""Words a hyphen joins, letters only (`high-level`, `production-ready`, `glass-card`)."""
_READ_LINE = r"^\s*(?:\d+(?:→|\t))?"
"""A line's start as a read shows it: its number, then `→` or a tab (`12→`, `12<tab>`), if any."""
_SENTENCE_MARKS = re.compile(_READ_LINE + r"[\W_]*(?:\d{1,3}[.)]\s)?")
"""Before a line's first word: a file's line number as a read shows it (`12→`, `12<tab>`), list and
check marks (`- [ ]`, `✅`, `**`), a comment's `//`, a step's number."""
_SENTENCE_WORD = re.compile(r"^[(\[*_]*[A-Za-z][A-Za-z'’-]*[)\],.;:!?*_]*$")
_MARKS_ONLY = re.compile(r"^[\W_]+$")
_QUOTED_SPAN = re.compile(r'"([^"\n]{20,2000})"')
"""Text in double quotes, long enough to be a sentence."""
_NOT_SENTENCE = re.compile(r"[=<>{};\"\\]")
_FENCE = re.compile(_READ_LINE + r"\s*(?:```|~~~)")
"""A Markdown code block's fence (after the line number a read shows)."""
_COMMENT = re.compile(
    _READ_LINE + r"\s*(?:\{?/\*+|//+|#(?![!\w])|<!--|--(?!-)|\*(?!\*))\s*(.*?)\s*(?:\*+/\}?|-->)?\s*$"
)
"""A line that is only a comment (`// …`, `# …`, `/* … */`, `{/* … */}`, `<!-- … -->`, `-- …`,
a block comment's `* …`): its words, which are prose."""
COMMENT_WORDS = 3
"""A comment of at least this many plain words is a sentence."""
DOCUMENTS = frozenset({".md", ".mdx", ".markdown", ".rst", ".txt", ".adoc"})
"""Files of prose: outside their code blocks, a compound word is English wherever it stands."""
SENTENCE_WORDS = 6
SENTENCE_SHARE = 0.75
"""A line of at least `SENTENCE_WORDS` words, this share of them plain words, and no mark of code
(`=`, `<`, `{`, `;`, a double quote): a sentence of a document or a web page."""
_ESCAPE = re.compile(r"(?:\\[ntr]){2,}|(?<![\w.:\\])\\[ntr]|\\(?:[ntr](?=[A-Z])|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2})")
"""`\nFormat`, `\u0026`, `{\n\teventPool`: escapes of text shown as a string literal (code a tool
printed as JSON), not part of the next word. A lone `\t` or `\n` right after a word, a dot, a colon
or a backslash stays: it is a Windows path's (`src\tests`, `C:\new`, `C:\\tools`)."""
_ESCAPE_AFTER_FILE = re.compile(r"(?<=\w)(\.[A-Za-z][A-Za-z0-9]{0,9})\\[ntr](?=[\w.])")
r"""`file1.txt\nfile2.txt`: a newline's escape right after a file's name (one of `_FILE_EXTENSIONS`)
ends it; a Windows path's folders are no such files (`C:\data.d\new` keeps its `\n`)."""
_PRODUCT_JS = re.compile(r"[A-Z][A-Za-z0-9]*\.js")
"""`Node.js`, `D3.js`, `Vue.js` in plain words: a product's name. A file so named (`App.js`) is one in a
call, a listing or code, where the names of plain words are not read."""
_SHEBANG = re.compile(r"#![ \t]*/\S*")
"""`#!/usr/bin/env python3`: the interpreter a script names, not a file of the work."""
_FILE_URI = re.compile(r"\bfile://(?:/(?=[A-Za-z]:[\\/]))?")
"""`file:///Users/me/app/vite.config.js#L19`, `file:///C:/app/main.ts`: a file written as an
address (an editor's link to it, a runtime's warning about it) is the file at that path."""
_URL = re.compile(r"\b[A-Za-z][\w+.-]{0,15}://[^\s\"'<>`()\[\]]*")
"""A web address, whole: on a page or in documentation the agent fetched, its query and fragment
(`…/use-router.mdx#_snippet_3`, `?utm_source=x`) are the site's own words, not names of the work
(`_without_query`)."""
_REQUEST_LINE = re.compile(r"\b(?:GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) +/[^\s\"]* +HTTP/\d")
"""`"HEAD /org/model/resolve/9ea9…/tokenizer.json HTTP/1.1" 307`: a request a server or a client
logged; its path is a route on some host, not a file of the work."""
_ELLIPSIS = re.compile(r"…|\.\.\.")
_LAST_WORD = re.compile(r"(?<![\w./:~<$-])[\w.:/-]*[\w)]$")
"""A word followed right away by an ellipsis was cut there."""
_SCOPED_AT = re.compile(r"(?<![\w@])@((?:[a-z0-9][\w.-]*)?/[\w.:/-]*[\w)])")
"""`@tanstack/react-query`, `@jetbrains/ring-ui/components/button`, `@/components/ui/card.vue`: a
scoped package, a module in one, or a path through the project's `@/` alias. `_WORD` reads each
without its `@` (which never starts a word, so that `user@host` gives no name); the `@` is given
back, except to a file outside the alias (`@docs/plan.md` is how Claude Code's user points at
`docs/plan.md`)."""
_ANGLED = re.compile(r"<([\w.+-]+(?:/[\w.+-]+)*\.[A-Za-z]\w*)>")
"""`#include <ros/ros.h>`: a file in angle brackets (which the closing-tag rule would otherwise skip)."""
_WINDOWS_PATH = re.compile(r"(?<![\w\\])[A-Za-z]:\\(?:[\w.@+$~-]+(?: [\w.@+$~-]+)*[\\/])*[\w.@+$~-]+[\\/]?")
"""A Windows path from its drive. A directory may hold single spaces (`OneDrive - Contoso\\`, as
Windows names them) since its `\\` ends it; the last part may not, where prose would run on."""
_SPACED_PATH = re.compile(
    r"(?<=[\"'])(?:~|\$HOME)?/(?:[\w.@+~-]+(?: [\w.@+~-]+)*/)*[\w.@+~-]+(?: [\w.@+~-]+)*/?(?=[\"'])"
    r"|(?<![\w./~$-])(?:~|\$HOME)?/(?:(?:[\w@+~-]+(?: [A-Z][a-z][\w.@+~-]*| \(x86\))+|[\w.@+~-]+)/)+[\w.@+~-]+/?"
)
"""A POSIX path through folders with spaces, read whole: one in quotes, whatever its folders are
called (`"/home/me/my project/app.py"`), or one whose spaced folder is capitalized words, as macOS
and Windows name them (`~/Library/Application Support/Code/…`, `/c/Program Files (x86)/…`); a path
that runs into lowercase words (`cp /a/b c/d`) or a protocol (`GET /docs HTTP/1.1`) stays apart.
Only matches that hold a space are taken (`_spaced_paths`); each part is read once from its start,
so the scan is linear."""
_SPACED_HINT = re.compile(r"/[\w@+~-]+ [A-Z(]|[\"'](?:~|\$HOME)?/[\w.@+~/-]* ")
"""A cheap test for `_SPACED_PATH`: most texts hold no path with a space at all."""
_CALLED = re.compile(r"(?<![\w.])([\w.]+)\(")
"""A word a `(` follows right away: a call (linear: a word is read once from its start)."""
_RELATIVE_WINDOWS_PATH = re.compile(
    r"(?<![\w.\\/:$-])(?:\.{1,2}\\(?:[\w@~-][\w.@~-]*\\)*|(?:[\w@~-][\w.@~-]*\\)+)[\w@~-][\w.@~-]*\.[A-Za-z]\w*"
)
"""A Windows path written from the working directory (`src\\utils\\retry.ts`, `.\\setup.ps1`): read
whole when it ends in a known file type and no directory of it does (`a.txt\\nb.txt` is two files
an escaped newline joins)."""
_LS_COLUMNS = re.compile(r"^[-dlcbps][-rwxsStT]{9}[@+.]?\s.*\s(\S+)$")
"""`ls -l`'s line: permissions, links, owner, size, date, then the name."""
_TREE = re.compile(r"^[\s│├└─|`*•-]+")
"""A tree's branches or a list's bullet before a listed name."""
LISTING_MIN_LINES = 8
LISTING_SHARE = 0.7
"""An output of at least this many lines, this share of them each one path, is a listing."""
LISTING_SAMPLE = 200
"""Lines of an output read to tell whether it is a listing."""


@dataclass(frozen=True)
class WorkingSet:
    ranked: list[tuple[str, str]]
    """(name, kind), most relevant first; kind is `file` (never an edited one), `test` or `name`."""

    def of_kind(self, kind: str) -> list[str]:
        return [name for name, k in self.ranked if k == kind]


@lru_cache(maxsize=16_384)
def is_file_name(word: str) -> bool:
    """A path, or a name whose extension is a known file type (`config.exs`, not `os.path`)."""
    if "://" in word or len(word) > 250 or not re.search(r"[A-Za-z]", word):
        return False
    base = _base(word)
    if _QUANTITY.fullmatch(base):
        return False  # `1.5h`, `2.5m`: a number and its unit, not `h` or `m` source
    if "." in base and base.rsplit(".", 1)[1].casefold() in _FILE_EXTENSIONS or word in _BARE_FILES:
        return True
    if _WINDOWS_PATH.fullmatch(word):
        return True
    if "/" not in word or _ARITY.match(word):
        return False
    # A directory or an extensionless file: rooted, or deep enough not to be `a/b` prose.
    if word.startswith("/") and word.count("/") < 2:
        return False  # `/sessions`, `/div`: a route or a closing tag, not a file
    return word.startswith(("/", "./", "../", "~/")) or word.endswith("/") or word.count("/") >= 2


def _without_query(match: re.Match[str]) -> str:
    url = match.group()
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    return url[:cut]


def _windows_file(path: str) -> bool:
    """`path` (backslash separated) names a file of a known type, and none of its directories does."""
    *folders, name = path.split("\\")
    return _known_type(name) and not any(_known_type(folder) for folder in folders)


def _spaced_paths(text: str) -> tuple[list[str], str]:
    """The paths through folders with spaces in `text` (`_SPACED_PATH`), and `text` without them. A
    quoted one counts when a folder holds the space or its last part is a file (`"/tmp is full"` is
    words in quotes); the `:` after one on a `$PATH` goes with it."""
    found: list[str] = []
    rest: list[str] = []
    at = 0
    for match in _SPACED_PATH.finditer(text):
        path = match[0]
        if " " not in path or not ("/" in path[path.index(" ") :] or _known_type(_base(path))):
            continue
        found.append(path)
        rest += (text[at : match.start()], " ")
        at = match.end() + text.startswith(":", match.end())
    rest.append(text[at:])
    return found, "".join(rest)


def _known_type(name: str) -> bool:
    return "." in name.strip(".") and name.rsplit(".", 1)[1].casefold() in _FILE_EXTENSIONS


def _base(path: str) -> str:
    """The last part of a path (`/` or `\\` separated)."""
    return re.split(r"[\\/]", path.rstrip("/\\"))[-1]


def _balanced_brackets(path: str) -> str:
    """`path` without the closing brackets at its end that open nowhere in it."""
    while path.endswith("]") and path.count("]") > path.count("["):
        path = path[:-1]
    return path


def _undotted(path: str) -> str:
    """`path` without a trailing `/` and the `./` and `../` it was written from (`../x/a.py` is `x/a.py`),
    its separators written `/` (a Windows path is the same file as the `/` spelling it ends with)."""
    path = path.rstrip("/\\").replace("\\", "/")
    while path.startswith(("./", "../")):
        path = path.partition("/")[2]
    return path


def _parts(folder: str) -> tuple[str, ...]:
    return tuple(p for p in re.split(r"[\\/]", folder) if p)


def _rooted(path: str) -> bool:
    """Written from the file system's root (`/…`, `C:\\…`): not `~/…` or `$HOME/…`, which name the
    same places another way and would share no directory with them, nor a backslash-rooted path."""
    return is_absolute(path) and not path.startswith(("~", "$", "\\"))


def _folder(path: str) -> str:
    """The directory part of a path, without its separator ('' for a bare name)."""
    return re.split(r"[\\/][^\\/]*$", path.rstrip("/\\"))[0] if re.search(r"[\\/]", path.rstrip("/\\")) else ""


def _system(path: str) -> bool:
    """A path into the system or into installed packages and caches (not the project's own)."""
    return path.startswith(_SYSTEM_ROOTS) or _PACKAGE_DIR.search(path) is not None or bool(_OS_FOLDERS.match(path))


def _own_frames(output: str, own: tuple[str, ...] = ()) -> str:
    """`output` without the stack frames that run through someone else's code (a parser's
    `TypeScriptParserMixin.parseExprAtom`, a library's internals): the frames of the project stay.
    `own`: the project's packages (`_own_packages`), when the session shows them; a JVM or .NET frame
    outside them is a library's (JUnit's runner, Spring's proxies)."""
    return _FRAME.sub(lambda m: "" if _foreign_frame(m, own) else m[0], output)


def _foreign_frame(frame: re.Match[str], own: tuple[str, ...]) -> bool:
    if frame["vm"]:
        qualified = frame["vm"].rsplit("/", 1)[-1]
        return qualified.startswith(_RUNTIME_PACKAGES) or bool(own) and not qualified.startswith(own)
    return _system(frame["js"] or frame["py"] or "")


_DECLARED_PACKAGE = re.compile(
    r"^[ \t]*(?:\d+(?:→|\t)\s*)?(?:package|namespace)[ \t]+([A-Za-z_]\w*\.[A-Za-z_]\w*)", re.M
)
"""A JVM or .NET source file's package or namespace (`package com.acme.orders;`, `namespace
Acme.Orders`), as a read shows it (line numbers first): its first two parts are the project's."""


def _own_packages(messages: Sequence[Message]) -> tuple[str, ...]:
    """The package prefixes (`com.acme.`) of the JVM or .NET sources the session's calls wrote or its
    tools showed: what a stack frame of the project's own code starts with. Empty when none shows."""
    found: set[str] = set()
    for message in messages:
        for part in message.tool_parts:
            for text in (part.result_text, *_strings(part.input)):
                if "package" in text or "namespace" in text:
                    found.update(m + "." for m in _DECLARED_PACKAGE.findall(text[:MAX_OUTPUT_CHARS]))
    return tuple(sorted(found))


_ENCODED = re.compile(r"[A-Za-z0-9+=]{20,}")
ENCODED_SHARE = 0.35
"""A run of at least 20 letters and digits, this share of them capitals or digits (two digits at
least), capitals and lower case both (a hex hash has no capitals), is encoded data (`sha512-GknRHD…+OikgtADx9ixlcpyD1RINh/N52ELD99wc…`, a key, a
token), not a name: a CamelCase name's capitals start its words (`PlayerProfileDashboard2`: 4 of 23)."""


def _encoded(term: str) -> bool:
    for part in re.split(r"[/\\.]", term):
        if len(part) >= 20 and _ENCODED.fullmatch(part):
            loud = sum(1 for c in part if c.isupper() or c.isdigit())
            digits = sum(1 for c in part if c.isdigit())
            mixed = any(c.islower() for c in part) and any(c.isupper() for c in part)  # not hex: a hash
            if digits >= 2 and loud >= ENCODED_SHARE * len(part) and mixed:
                return True
    return False


@lru_cache(maxsize=16_384)
def noise(term: str) -> bool:
    """Whether `term` is, by its syntax alone, not a name worth listing: a sed expression, a
    placeholder, a bare word (`def`, `None`, `POST`), or a word that is no identifier of any
    language (`28px`, `Cmd+Shift+R`, `<template>`, `hide=False`, `h-96`)."""
    if (
        _SED.fullmatch(term)
        or term.startswith("/dev/")  # `2>/dev/null`: a device, never a file of the work
        or _PLACEHOLDER.search(term)
        or _PERMISSIONS.fullmatch(term[1:] if term[:1] in "ntr" else term)  # `\ndrwxr-xr-x` read as one word
        or _REGEX_CLASS.search(term)
        or _ABBREVIATION.fullmatch(term)
        and not is_file_name(term)  # `a.c`, `x.h`: files
        or _EATEN_SEPARATORS.match(term)
        or term == REDACTED
        or _encoded(term)
        or "M-" in term
        and _META_ESCAPED.search(term)
    ):
        return True
    if term.startswith("@") and _SCOPED.match(term[1:]):
        return False
    if is_file_name(term) or (("/" in term or "\\" in term) and not term.startswith(":")):
        return False
    core = term.removesuffix("()")
    if _LOCAL_MEMBER.match(core):
        return True
    if re.fullmatch(r"[0-9a-f]{7,40}", core) and re.search(r"[a-f]", core) and re.search(r"\d", core):
        return False  # a commit or object hash
    if not _CODE_IDENTIFIER.fullmatch(core):
        return True
    return not (re.search(r"[_.:\-\d$@]|\(\)", core) or _CAMEL_STEP.search(core))


_SPECIFIER = re.compile(r"^\.\.?/(?:\.\./)*(?:[^./][^./]*/)*[^./][^./]*$")
"""`./api`, `../../src/store`: a relative path whose last part has no extension and no `/` after it."""
_WORDS_BY_SLASHES = re.compile(r"^[^\W\d_]+(?:/[^\W\d_]+)+$")
"""`Low/Medium/High`, `created/modified/deleted`: words a slash joins, a path only when the
session's files lie under it (`drop_alternatives`)."""
_SIZES_BY_SLASHES = re.compile(r"^\d+(?:\.\d+)?[A-Za-z%]*(?:/\d+(?:\.\d+)?[A-Za-z%]*)+$")
"""`24pt/18pt/14pt`, `16px/24px`: sizes or a ratio, never a path."""
_REGEX_LITERAL = re.compile(r"^/[^/\s]+/[dgimsuy]{1,4}$")
"""`/permission/i`: a search pattern, not a path."""

_REVISION = re.compile(r"^(?:[0-9a-f]{7,40}|HEAD(?:[~^]\d*)*):(?=[\w./])")
"""`c1f44e6:src/a.py`, `HEAD~1:a.py`: a file at a git revision, the name being the file's."""


def _hit_file(word: str) -> str | None:
    """The file of a search hit or a place in it (`src/otel.erl:-spec`, `a.py:12:`), or of a
    revision's (`HEAD:a.py`), else None."""
    if _REVISION.match(word):
        return _REVISION.sub("", word)
    if ":" not in word[1:]:
        return None
    path = word.partition(":")[0]
    return path if "." in path and is_file_name(path) else None


@lru_cache(maxsize=16_384)
def _code_like(word: str, kebab: bool = False) -> bool:
    """`word` is shaped like code; `kebab`: count `kebab-case` too (in code, not in prose, where
    "read-only" is English)."""
    word = word.rstrip(".:,")
    if word.endswith(")") and not word.endswith("()"):
        word = word.rstrip(")")  # `run(__MODULE__)`: the name, not the call's closing bracket
    if len(word) < 3:
        return False
    if is_file_name(word) or _hit_file(word):
        return True  # a path may be long: a deep absolute one is often over 80 characters
    if len(word) > 80:
        return False
    core = word[:-2] if word.endswith("()") else word
    return bool(
        _VARIABLE.match(core)
        or (core.startswith("@") and _SCOPED.match(core[1:]))
        or _DUNDER.match(core)
        or (kebab and _KEBAB.match(core))
        or _ARITY.match(core)
        or _SNAKE.match(core)
        or _CAMEL.match(core)
        or _DOTTED.match(core)
        or _UPPER.match(core)
    )


@lru_cache(maxsize=65_536)
def _normalized(term: str) -> str | None:
    """The name `term` stands for (a search hit's file, without a place in it, a closing bracket,
    progress marks or a context line's number), or None when it is none (too short or long, a
    number, junk, `noise`)."""
    term = _LINE_SUFFIX.sub("", term.strip()).rstrip(".:,;")
    if _SEARCH_PATH.search(term):
        return None
    term = _hit_file(term) or term
    if term[:2] in ("a/", "b/") and is_file_name(term[2:]):
        term = term[2:]  # a diff's sides (`--- a/src/x.py`, `+++ b/src/x.py`): the file is `src/x.py`
    if term.endswith(")") and not term.endswith("()"):
        term = term.rstrip(")")
    term = _PROGRESS.sub("", term)
    if "-" in term and is_file_name(in_file := _GREP_CONTEXT.sub(r"\1", term)):
        term = in_file
    if term[:1].isdigit() and (numbered := _NUMBERED.match(term)) and is_file_name(term[numbered.end() :]):
        term = term[numbered.end() :]  # `17:priv/static/assets`: a search's line number, then the path
    if (
        len(term) < 3
        or len(term) > (250 if is_file_name(term) else 120)
        or term.isdigit()
        or term.casefold() in _NOT_NAMES
        or _JUNK.search(term)
        or "'" in term
        or '"' in term
        or _REGEX_LITERAL.match(term)
        or noise(term)
    ):
        return None
    return term


class _Scores:
    def __init__(self, size: int) -> None:
        self.size = max(size, 1)
        self.score: dict[str, float] = {}
        self.kind: dict[str, str] = {}
        self.at = 0
        self.outputs = 0
        """Tool outputs read so far."""
        self.shown: dict[str, tuple[int, float]] = {}
        """Per name: in how many outputs it stood, and what they added to its score."""
        self.first_shown: dict[str, int] = {}
        """Per name: the message whose tool output showed it first."""
        self.typed: set[str] = set()
        """Names the user or the agent wrote: in words, in a call's arguments, as a file read."""
        self.opened: set[str] = set()
        """Names a call's arguments hold or a tool read: what the agent opened on purpose."""
        self.followed: set[str] = set()
        """Names shown in an output, then typed, read or run in a later message (`SEEN_THEN_USED`)."""
        self.listings: dict[str, set[int]] = {}
        """Per name shown in a directory listing: the listings (their output numbers)."""
        self.elsewhere: set[str] = set()
        """Names shown in an output that is not a listing."""
        self.declared: set[str] = set()
        """Kebab-case words seen as a property or key (`margin-top:`), and nowhere as a name."""
        self.worded: set[str] = set()
        """Compound words (`_WORD_COMPOUND`) seen in a sentence of an output or a document."""
        self.coded: set[str] = set()
        """Compound words seen anywhere else: in code, a command, a quoted value, backticks."""
        self.said: set[str] = set()
        """Names in the user's or the agent's own words (not in code they wrote)."""
        self.saying = False
        """Whether what is being read now is someone's words."""
        self.last_typed: dict[str, int] = {}
        """Per name typed: the last message that did."""
        self.called: set[str] = set()
        """Dotted names written as a call (`mu.Lock()`, `fields.Html(…)`): members, not files."""
        self.sayings: list[tuple[int, list[str]]] = []
        """The user's and the agent's own words (casefolded), with the message that said them."""

    def add(
        self,
        term: str,
        weight: float,
        kind: str | None = None,
        *,
        output: bool = False,
        listing: bool = False,
        typed: bool = True,
        opened: bool = False,
    ) -> None:
        found = _normalized(term)
        if found is None:
            return
        term = found
        gain = weight * (1 + RECENCY * (self.at / self.size) ** 2)
        self.score[term] = self.score.get(term, 0.0) + gain
        if output:
            count, total = self.shown.get(term, (0, 0.0))
            self.shown[term] = (count + 1, total + gain)
            self.first_shown.setdefault(term, self.at)
            if listing:
                self.listings.setdefault(term, set()).add(self.outputs)
            else:
                self.elsewhere.add(term)
        elif typed:
            self.typed.add(term)
            self.last_typed[term] = self.at
            if self.saying:
                self.said.add(term)
            if opened:
                self.opened.add(term)
            shown_at = self.first_shown.get(term)
            if shown_at is not None and shown_at < self.at and term not in self.followed:
                # Seen in an output, then used: the agent went on with it.
                self.followed.add(term)
                self.score[term] += SEEN_THEN_USED * (1 + RECENCY * (self.at / self.size) ** 2)
        if term not in self.kind:
            self.kind[term] = kind or ("file" if is_file_name(term) else "test" if _TEST.fullmatch(term) else "name")

    def settle(self) -> None:
        """Names that stand in most tool outputs are the harness's or the format's (`exit_code`,
        `stdout`), not the work's: only what the agent did with them counts."""
        if self.outputs < MIN_OUTPUTS_FOR_COMMON:
            return
        for term, (count, total) in self.shown.items():
            if count > COMMON_SHARE * self.outputs:
                self.score[term] -= total

    def calls_are_names(self) -> None:
        """A dotted name the code calls is a member whatever its last part looks like (`mu.Lock()`,
        `threading.Lock()`, `fields.Html(…)`): no file is called. A path or a file a tool read stays one."""
        for word in self.called:
            term = _normalized(word)
            if term is not None and self.kind.get(term) == "file" and not re.search(r"[\\/]", term):
                self.kind[term] = "name"

    def merge_paths(self) -> None:
        """One file, one name: `pane_view_live.ex`, `live/pane_view_live.ex`, `assets/` and the
        longer path ending with them are the same file when exactly one longer path does. Their uses
        add up on the longest, which is the one listed; a name several paths end with stays. A path
        written from another directory (`./testbed/t.py`, `../testbed/t.py`) reads without its dots,
        and spellings that differ only in them or in their separators (`src\\app\\t.py`, `src/app/t.py`)
        are one candidate, not several."""
        by_base: dict[str, list[str]] = {}
        for term, kind in self.kind.items():
            if kind in ("file", "read") and term in self.score:
                by_base.setdefault(_base(term), []).append(term)
        for group in by_base.values():
            alive = sorted(group, key=len, reverse=True)
            undotted = {t: _undotted(t) for t in alive}
            for term in list(alive):
                bare = undotted[term]
                wider = [t for t in alive if t != term and (undotted[t] == bare or undotted[t].endswith("/" + bare))]
                longer = {undotted[t] for t in wider} - {bare}  # the same spelling but for dots is this file
                if wider and len(longer) <= 1:
                    into = min(
                        [t for t in wider if undotted[t] in longer] or wider,
                        key=lambda t: (t.startswith(("./", "../", ".\\", "..\\")), -len(t)),  # from the root
                    )
                    self.score[into] += self.score.pop(term)
                    if self.kind[term] == "read":
                        self.kind[into] = "read"
                    for marks in (self.typed, self.opened, self.followed, self.elsewhere, self.said):
                        if term in marks:
                            marks.add(into)
                    if term in self.listings:
                        self.listings.setdefault(into, set()).update(self.listings[term])
                    if term in self.first_shown:
                        self.first_shown[into] = min(self.first_shown[term], self.first_shown.get(into, self.size))
                    if term in self.last_typed:
                        self.last_typed[into] = max(self.last_typed[term], self.last_typed.get(into, 0))
                    alive.remove(term)

    def drop_cut(self) -> None:
        """A file name with an unknown extension that a longer name continues was cut mid-name
        (`adapters.p` beside `adapters.py`, at the end of a clipped output)."""
        files = sorted(t for t, k in self.kind.items() if k in ("file", "read") and t in self.score)
        for i, term in enumerate(files):
            base = _base(term)
            if "." not in base.strip(".") or base.rsplit(".", 1)[1].casefold() in _FILE_EXTENSIONS:
                continue
            later = files[i + 1] if i + 1 < len(files) else ""
            if later.startswith(term) and re.match(r"\w", later[len(term) :]) and term not in self.typed:
                del self.score[term]

    def drop_foreign(self) -> None:
        """System and installed-package paths (`/usr/lib/python3.10/…`, `site-packages`) are not the
        project's: listed only when the agent opened them, not when a traceback or listing showed them."""
        for term in [t for t in self.score if self.kind[t] in ("file", "read") and _system(t)]:
            if term not in self.opened and self.kind[term] != "read":
                del self.score[term]

    def drop_utility_classes(self) -> None:
        """Utility classes (`_UTILITY_CLASS`) the code and outputs are full of are styling, not
        names; kept when someone named one in words."""
        for term in [t for t in self.score if self.kind[t] == "name" and _UTILITY_CLASS.fullmatch(t)]:
            if term not in self.said:
                del self.score[term]

    def drop_alternatives(self) -> None:
        """Words a slash joins (`Low/Medium/High`, `Vue/React/Angular` in a document the agent
        wrote or read) are choices, not a path, unless a file of the session lies under them or
        is them but for its extension; sizes a slash joins (`24pt/18pt/14pt`) never are. A tool's
        read keeps them."""
        files = [t for t, k in self.kind.items() if k in ("file", "read") and t in self.score]
        words = [t for t in files if self.kind[t] == "file" and _WORDS_BY_SLASHES.match(t)]
        for term in files:
            if self.kind[term] == "file" and _SIZES_BY_SLASHES.match(term):
                del self.score[term]
        if not words:
            return
        sizes = {term.count("/") + 1 for term in words}
        folders: set[str] = set()
        for path in files:
            # Its directories, and its name without the extension (`Shared/store/useValue` is an
            # import of `Shared/store/useValue.ts`).
            parts = re.split(r"[\\/]", path.strip("/\\"))
            if "." in parts[-1].strip("."):
                parts[-1] = parts[-1].rsplit(".", 1)[0]
            else:
                parts.pop()
            for size in sizes:
                folders.update("/".join(parts[i : i + size]) for i in range(len(parts) - size + 1))
        for term in words:
            if term not in folders:
                del self.score[term]

    def drop_specifiers(self) -> None:
        """A relative module path without an extension (`../models`, `./api`) is an import's
        specifier, written in code: the file it stands for is listed by its own path when the
        agent opened it. Kept only when someone named it in words."""
        for term in [t for t in self.score if self.kind[t] == "file" and _SPECIFIER.match(t)]:
            if term not in self.said:
                del self.score[term]

    def drop_declared(self) -> None:
        for term in self.declared:
            if term in self.score and term not in self.typed and term not in self.elsewhere:
                del self.score[term]

    def drop_handles(self, handles: Sequence[re.Pattern[str]]) -> None:
        """The ids a harness gives its own processes (`AgentAdapter.handles`: `bash_5`) are its,
        not the work's, wherever they stood."""
        for term in [t for t in self.score if self.kind[t] == "name" and any(h.fullmatch(t) for h in handles)]:
            del self.score[term]

    def drop_worded(self) -> None:
        """Compound words that only ever stood in sentences (`high-level`, `production-ready` in a
        document the agent read or wrote) are English, not names; one seen in code, a command, quotes
        or backticks, or named in someone's words, stays."""
        for term in self.worded - self.coded - self.said:
            if term in self.score and self.kind[term] == "name":
                del self.score[term]

    def stems(self) -> None:
        """A file only shown whose name, extension aside, the agent typed (`AppAvatar` for
        `AppAvatar.vue`, `stage` for `models/stage.py`), or whose name's words (two to
        `PHRASE_WORDS`, each of three letters or more) the user or the agent then said in a row
        (`prompt_injection.py` after "the prompt injection scanner"), was referred to:
        `SEEN_THEN_USED`."""
        typed: dict[str, int] = {}
        for term in self.typed:
            if self.kind.get(term) not in ("file", "read"):
                stem = re.split(r"[.:]|->", term.removesuffix("()"))[-1]
                typed[stem] = max(typed.get(stem, 0), self.last_typed.get(term, 0))
        used = self.followed | self.typed
        candidates = [t for t in self.score if self.kind[t] == "file" and t not in used]
        stems = {t: _base(t).rsplit(".", 1)[0] if "." in _base(t) else "" for t in candidates}
        said = self.said_phrases({_phrase(stem) for stem in stems.values()} - {""})
        for term in candidates:
            stem = stems[term]
            at = typed.get(stem, said.get(_phrase(stem)))
            if len(stem) >= 4 and at is not None and at > self.first_shown.get(term, self.size):
                self.followed.add(term)
                self.score[term] += SEEN_THEN_USED * (1 + RECENCY * (at / self.size) ** 2)

    def said_phrases(self, phrases: set[str]) -> dict[str, int]:
        """Per phrase of `phrases` (words one space apart), the last message whose words said it."""
        last: dict[str, int] = {}
        lengths: dict[str, set[int]] = {}  # per first word, the lengths of the phrases it opens
        for phrase in phrases:
            first, *rest = phrase.split(" ")
            lengths.setdefault(first, set()).add(len(rest) + 1)
        for at, words in self.sayings:
            for i, word in enumerate(words):
                for n in lengths.get(word, ()):
                    run = " ".join(words[i : i + n])
                    if run in phrases:
                        last[run] = at
        return last

    def neighbours(self) -> None:
        """A file only shown, beside one the agent worked on (same directory), gets `NEIGHBOUR_BONUS`."""
        if not NEIGHBOUR_BONUS:
            return
        worked = self.worked_folders()
        for term in list(self.score):
            if self.kind[term] == "file" and term not in self.typed and _tail(_folder(term)) in worked:
                self.score[term] += NEIGHBOUR_BONUS

    def far_from_work(self) -> None:
        """A file tools only showed (no one typed, opened or went on with it), `FAR_DEPTH` or more
        directories below the nearest directory holding a file the agent opened, is someone else's
        code the searches kept hitting (a vendored `include/boost/…` a hundred greps listed): its
        score counts `FAR_FACTOR`. Paths from the file system's root only; without an opened one,
        nothing."""
        worked: set[tuple[str, ...]] = set()  # every directory above a file the agent worked with
        for term in self.opened | self.typed:
            if self.kind.get(term) in ("file", "read") and _rooted(term):
                parts = _parts(_folder(term))
                worked.update(parts[:i] for i in range(len(parts) + 1))
        if not worked:
            return
        for term in list(self.score):
            if self.kind[term] != "file" or not _rooted(term):
                continue
            if term in self.typed or term in self.opened or term in self.followed:
                continue
            folder = _parts(_folder(term))
            shared = next(i for i in range(len(folder), -1, -1) if folder[:i] in worked)
            if len(folder) - shared >= FAR_DEPTH:
                self.score[term] *= FAR_FACTOR

    def cap_listings(self) -> None:
        """A listing names many files, each less surely one the work needs: of the names only listings
        show (nothing else named them), each listing keeps its `LISTING_NAMES` best, and of those beside a
        file the agent worked on its `WORKED_LISTING_NAMES` best (a listing of the directory the
        work is in is that directory's map)."""
        worked = self.worked_folders()
        only: dict[tuple[int, bool], list[str]] = {}
        for term, seen in self.listings.items():
            if term in self.score and term not in self.typed and term not in self.elsewhere:
                only.setdefault((max(seen), _tail(_folder(term)) in worked), []).append(term)
        for (_, beside), names in only.items():
            names.sort(key=lambda t: -self.score[t])
            for term in names[WORKED_LISTING_NAMES if beside else LISTING_NAMES :]:
                del self.score[term]

    def worked_folders(self) -> set[str]:
        """The directories (as `_tail` spells them) holding a file the agent worked on: one it named
        in a call (edited, read) or in its words."""
        worked = {_tail(_folder(t)) for t in self.typed if self.kind.get(t) in ("file", "read")}
        worked.discard("")
        return worked

    def collapse_runs(self) -> None:
        """Names the same but for their numbers (`func_6_0` … `func_6_150`, generated or listed by the
        hundred), more than `RUN_NAMES` of them, become one entry: the first and the last, scored as
        the best of them. Those the user or the agent named in their words, and files a call opened,
        stay on their own."""
        shapes: dict[str, list[str]] = {}
        for term in self.score:
            kept = term in self.said or (self.kind[term] in ("file", "read") and term in self.opened)
            if not kept and re.search(r"\d", term):
                shapes.setdefault(self.kind[term] + ":" + re.sub(r"\d+", "#", term), []).append(term)
        for members in shapes.values():
            if len(members) <= RUN_NAMES:
                continue
            members.sort(key=lambda t: [int(n) for n in re.findall(r"\d+", t)])
            run = f"{members[0]}{RUN_MARK}{members[-1]}"
            best = max(self.score[t] for t in members)
            self.kind[run] = self.kind[members[0]]
            for term in members:
                del self.score[term]
            self.score[run] = best

    def prose(self, text: str, weight: float) -> None:
        self.saying = True
        self.sayings.append((self.at, _PROSE_WORD.findall(text.casefold())))
        for span in _BACKTICKED.findall(text):
            span = span.strip()
            if _CODE_SPAN.match(span) and re.search(r"[^\W\d_]", span) and _balanced(span):
                if _EXPRESSION.search(span):
                    # `Module(test_file.py)`, `fspath=a/b.py`: an expression; the names in it count.
                    self.code(span, 3 * weight, kebab=False)
                    continue
                # A plain word in backticks (`threshold`) is named on purpose, but less surely a name.
                self.add(span, (3 if _code_like(span) or not span.isalpha() else 1) * weight)
        plain = _BACKTICKED.sub(" ", text)
        self.code(_JOINED_SENTENCE.sub(" ", plain) if "." in plain else plain, 1.5 * weight, kebab=False, plain=True)
        self.saying = False

    def code(
        self,
        text: str,
        weight: float,
        *,
        once: bool = False,
        file_weight: float | None = None,
        kebab: bool = True,
        spread: bool = False,
        opened: bool = False,
        plain: bool = False,
        document: bool = False,
    ) -> None:
        """Names in `text`, each use worth `weight`. `once`: a tool output (each name once, shown
        not used); `plain`: someone's plain words, where `a/b` is an alternative, not a path, and a
        CamelCase word alone is a product's name (`GitHub`) unless it names an error or a test."""
        if "\\" in text:
            text = _ESCAPE.sub(" ", text)
            text = _ESCAPE_AFTER_FILE.sub(_file_ends, text)
        if "#!" in text:
            text = _SHEBANG.sub(" ", text)
        if "file://" in text:
            text = _FILE_URI.sub(" ", text)
        if plain and "://" in text:
            text = _URL.sub(_without_query, text)
        if " HTTP/" in text:
            text = _REQUEST_LINE.sub(" ", text)
        whole: list[str] = []
        for pattern, mark in ((_WINDOWS_PATH, ":\\"), (_BRACKET_PATH, "/[")):
            if mark in text and (paths := pattern.findall(text)):
                whole += [_balanced_brackets(p) for p in paths] if mark == "/[" else paths
                text = pattern.sub(" ", text)
        if "/" in text and _SPACED_HINT.search(text):
            spaced, text = _spaced_paths(text)
            whole += spaced
        if "\\" in text and (relative := [p for p in _RELATIVE_WINDOWS_PATH.findall(text) if _windows_file(p)]):
            whole += relative
            for path in relative:
                text = text.replace(path, " ")
        if "-[" in text:
            text = _ARBITRARY_VALUE.sub(" ", text)
        listing = once and _is_listing(text)
        found = whole + ([m for m in _ANGLED.findall(text) if is_file_name(m)] if "<" in text else [])
        if "$" in text:
            found += [w for w in map(_unvariable, _WORD.findall(text)) if _code_like(w, kebab)]
        else:
            found += [w for w in _WORD.findall(text) if _code_like(w, kebab)]
        if plain:
            found = [
                w
                for w in found
                if not _alternatives(w)
                and not (_CAMEL.match(w) and not _NAMED_IN_WORDS.fullmatch(w))
                and not _PRODUCT_JS.fullmatch(w)
            ]
        if "…" in text or "..." in text:
            cut = _cut_words(text)  # cut mid-name by whoever clipped the text
            found = [w for w in found if w not in cut]
        if (
            kebab
            and (":" in text or '="' in text or "='" in text)
            and any("-" in w for w in found)
            and (keys := _declared_words(text))
        ):
            uses = Counter(w for w in found if w in keys)
            self.declared.update(w for w, n in keys.items() if n >= uses[w])  # only ever a key
            kept = []
            for word in found:
                if keys.get(word, 0) > 0:
                    keys[word] -= 1  # this use is a key's
                else:
                    kept.append(word)
            found = kept
        if "@" in text:
            for scoped in _SCOPED_AT.findall(text):
                if not scoped.startswith("/") and is_file_name(_base(scoped)):
                    continue  # `@agents/scout.md`: Claude Code's mention of the file `agents/scout.md`
                if scoped in found:
                    found[found.index(scoped)] = "@" + scoped
                elif _SCOPED.match(scoped):  # `@tanstack/react-query`: one slash, so `scoped` alone was no name
                    found.append("@" + scoped)
        if kebab and any("-" in w and _WORD_COMPOUND.fullmatch(w) for w in found):
            _compound_contexts(text, self.worded, self.coded, document)
        if "(" in text:
            self.called.update(w for w in _CALLED.findall(text) if "." in w.strip("."))
        words = found
        if once:
            # Each name once, however many places the output shows it at (`Task.java:101`,
            # `Task.java:102`: one file); in order, so that ties rank by first use.
            unique: dict[str, str] = {}
            for word in found:
                unique.setdefault(_normalized(word) or word, word)
            words = list(unique.values())
        tests = _tests_in(text)
        if once:
            tests = list(dict.fromkeys(tests))
        names = len(words) + len(tests)
        if spread and names > SPREAD_NAMES:
            # A long listing shows many names, each less surely one the work needs.
            weight *= SPREAD_NAMES / names
            file_weight = None if file_weight is None else file_weight * SPREAD_NAMES / names
        for word in words:
            self.add(
                word,
                weight if file_weight is None or not is_file_name(word) else file_weight,
                output=once,
                listing=listing,
                opened=opened,
            )
        for test in tests:
            self.add(test, weight, "test", output=once, listing=listing, opened=opened)


_NAMED_IN_WORDS = re.compile(r"[A-Z]\w*(?:Error|Exception|Warning|Failure)|Test[A-Z]\w*|\w+Tests?")
"""CamelCase words that are names even in plain words: errors and tests."""


def _phrase(stem: str) -> str:
    """A file name's words as someone would say them (`prompt_injection` → "prompt injection"),
    or "" when it is not two to `PHRASE_WORDS` words of three letters or more."""
    parts = [w.casefold() for w in _STEM_WORD.findall(stem)]
    whole = "".join(parts) == re.sub(r"[-_]", "", stem).casefold()  # nothing but those words
    if whole and 2 <= len(parts) <= PHRASE_WORDS and all(len(w) >= 3 for w in parts):
        return " ".join(parts)
    return ""


def _tests_in(text: str) -> list[str]:
    """The test names `text` holds (`_TEST`), not a test file's name without its type (`parse_test`
    of `parse_test.go`, `test_views` of `test_views.py`: the file is listed as one)."""
    found = []
    for match in _TEST.finditer(text):
        stem = _TEST_FILE_STEM.match(text, match.end())
        if stem is None or stem[1].casefold() not in _FILE_EXTENSIONS:
            found.append(match[0])
    return found


def _file_ends(escape: re.Match[str]) -> str:
    """A file type's `\\n` (`_ESCAPE_AFTER_FILE`) as the end of the name; another's as it was."""
    return escape[1] + " " if escape[1][1:].casefold() in _FILE_EXTENSIONS else escape[0]


def _cut_words(text: str) -> set[str]:
    """The words an ellipsis follows right away (`/testbed/requests/sessions.p…`)."""
    cut = set()
    for mark in _ELLIPSIS.finditer(text):
        word = _LAST_WORD.search(text, max(0, mark.start() - 250), mark.start())
        if word:
            cut.add(word.group())
    return cut


def _unvariable(word: str) -> str:
    """A shell or script variable (`$name`) is its name; an environment variable or a path keeps
    its `$` (`$HOME`, `$HOME/src`)."""
    if word.startswith("$") and not is_file_name(word) and not _VARIABLE.match(word):
        return word[1:]
    return word


def _alternatives(word: str) -> bool:
    """`green/blue/red`, `dev/build/start`: choices in plain words, not a path (no root, no file
    extension)."""
    if "/" not in word or word.startswith(("/", "./", "../", "~/", "$")) or _ARITY.match(word):
        return False
    base = _base(word)
    return not ("." in base and base.rsplit(".", 1)[1].casefold() in _FILE_EXTENSIONS)


def _tail(folder: str) -> str:
    """A directory's last two parts: how one directory is known whether written whole or relative."""
    return "/".join(re.split(r"[\\/]", folder)[-2:]) if folder else ""


def _is_listing(text: str) -> bool:
    """The output lists paths, one a line (`ls`, `find`, `tree`, a glob's matches)."""
    if text.count("\n") < LISTING_MIN_LINES - 1:
        return False
    lines = [line for line in text.split("\n", LISTING_SAMPLE)[:LISTING_SAMPLE] if line.strip()]
    if len(lines) < LISTING_MIN_LINES:
        return False
    entries = 0
    for line in lines:
        columns = _LS_COLUMNS.match(line)
        name = columns.group(1) if columns else _TREE.sub("", line).strip()
        if name and " " not in name and (is_file_name(name) or "." in name or name.endswith("/")):
            entries += 1
    return entries >= LISTING_SHARE * len(lines)


def _declared_words(text: str) -> Counter[str]:
    """The kebab-case words `text` uses as a format's keys (`_KEBAB_KEY`) or as a style
    declaration's values (`_CSS_VALUE`), each use counted."""
    words = Counter(_KEBAB_KEY.findall(text))
    if ";" in text or "}" in text:
        for value in _CSS_VALUE.findall(text):
            if "-" in value:
                words.update(_VALUE_WORD.findall(value))
    return words


def _compound_contexts(text: str, worded: set[str], coded: set[str], document: bool = False) -> None:
    """Sort the compound words of `text` by where they stand: in a sentence (`worded`) or
    elsewhere (`coded`). `document`: the text is a document's (`DOCUMENTS`), where any line of
    plain words outside a code block is prose, a heading or a short bullet too; elsewhere a line
    that is only a comment is prose from `COMMENT_WORDS` words. The text is an output already
    clipped to `MAX_OUTPUT_CHARS`."""
    fenced = False
    for line in text.splitlines():
        if document and _FENCE.match(line):
            fenced = not fenced
            continue
        if "-" not in line:
            continue
        if fenced:
            coded.update(_WORD_COMPOUND.findall(line))
            continue
        if "`" in line:
            for span in _BACKTICKED.findall(line):
                coded.update(_WORD_COMPOUND.findall(span))
            line = _BACKTICKED.sub(" ", line)
        compounds = _WORD_COMPOUND.findall(line)
        if not compounds:
            continue
        comment = None if document else _COMMENT.match(line)
        if comment is not None:
            prose = _is_sentence(comment.group(1), COMMENT_WORDS)
        else:
            prose = _is_sentence(line, 1 if document else SENTENCE_WORDS)
        if not prose and '"' in line:
            rest = _QUOTED_SPAN.sub(lambda quoted: _quoted_words(quoted, worded), line)
            if len(rest) != len(line):
                compounds = _WORD_COMPOUND.findall(rest)
        (worded if prose else coded).update(compounds)


def _quoted_words(quoted: re.Match[str], worded: set[str]) -> str:
    """A sentence in quotes (a JSON value, a string literal) is words all the same: `"title":
    "Integrate payment processing with a third-party gateway"`; its compounds go to `worded` and it
    to nothing. Not a class list (`"glass-card p-6 relative glow-border"`): a sentence's words are
    mostly words no hyphen joins."""
    span = quoted.group(1)
    words = span.split()
    if "-" not in span or not _is_sentence(span) or 4 * sum("-" in w for w in words) > len(words):
        return quoted.group(0)
    worded.update(_WORD_COMPOUND.findall(span))
    return ""


def _is_sentence(line: str, least: int = SENTENCE_WORDS) -> bool:
    if _NOT_SENTENCE.search(line):
        return False
    words = [w for w in _SENTENCE_MARKS.sub("", line, count=1).split() if not _MARKS_ONLY.match(w)]
    if len(words) < least:
        return False
    return sum(1 for w in words if _SENTENCE_WORD.match(w)) >= SENTENCE_SHARE * len(words)


def _balanced(span: str) -> bool:
    """No bracket left open or closed too often, and no quotes: `f(x)`, not `f(x` or `d["k"]`."""
    if any(q in span for q in "'\""):
        return False
    depth = 0
    for char in span:
        depth += 1 if char in "([{" else -1 if char in ")]}" else 0
        if depth < 0:
            return False
    return depth == 0


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def working_set(messages: Sequence[Message], edited: set[str], read: Sequence[str] = (), later: str = "") -> WorkingSet:
    """The names `messages` worked with, ranked (see the module doc); `edited` paths left out.
    `read`: the files the tool calls read or searched, each worth one more use in the agent's text.
    `later`: what the messages after these say in their own words (a kept tail): a file shown here
    whose name's words it says in a row ("the prompt injection scanner") is referred to there."""
    scores = _Scores(len(messages))
    adapters = registered_adapters()
    own = _own_packages(messages)
    scores.at = len(messages) // 2
    for path in read:
        scores.add(path, READ_BONUS, "read", opened=True)
    scores.at = 0
    for index, message in enumerate(messages):
        scores.at = index
        if message.summary or message.compaction is not None:
            continue
        if message.role == "user":
            words = user_words(message, adapters, messages[index - 1] if index else None)
            if words:
                scores.prose(words, 1.0)
            elif words is None:
                # A background subagent's report, handed back in a harness notice: shown, as an output.
                for report in (n.outcome.body for a in adapters for n in a.notifications(message.text)):
                    if report:
                        scores.outputs += 1
                        scores.code(
                            report[:MAX_OUTPUT_CHARS],
                            OUTPUT_WEIGHT,
                            once=True,
                            file_weight=OUTPUT_FILE_WEIGHT,
                            spread=True,
                        )
            continue
        text = written(message)
        scores.prose(written_prose(text, adapters), 1.0)
        if "```" in text:
            # Code the agent wrote in its reply (a proposal, a snippet to paste): typed, as a call's —
            # once: not a block that is this message's call itself (mini-swe-agent's command).
            called = {s.strip() for part in message.tool_parts for s in _strings(part.input)}
            code = "\n".join(block for block in fenced_blocks(text) if block.strip() not in called)
            if code:
                scores.code(code[:MAX_OUTPUT_CHARS], CODE_BLOCK_WEIGHT)
        for part in message.tool_parts:
            call = ToolCall.of(part)
            adapter = pick(call, adapters)
            plan = adapter.plan(call)
            edit = adapter.plan_edit(call) if plan is None else None
            if plan is not None:
                # A plan's items are prose (and its statuses are not names).
                scores.prose("\n".join(item.text for item in plan), 1.0)
                continue
            if edit is not None:
                scores.prose(edit.text or "", 1.0)  # one task of the plan: prose too
                continue
            target = adapter.path(call)
            document = target is not None and target[target.rfind(".") :].casefold() in DOCUMENTS
            for text in _strings(adapter.named_input(call)):
                scores.code(text, 1.0, opened=True, document=document)
            result = part.result_text
            clipped = result[:MAX_OUTPUT_CHARS]
            if len(result) > MAX_OUTPUT_CHARS:
                clipped = clipped[: max(clipped.rfind(" "), clipped.rfind("\n"))]  # not the word cut in two
            # The harness's own tools (and tools no adapter knows) answer in its words, not the work's.
            harness_tool = adapter.kind(call) == "other" or not adapter.knows(call)
            if adapter.result_notices is not None and harness_tool:
                clipped = adapter.result_notices.sub(" ", clipped)  # not a file's or a command's text
            output = _MARKUP.sub(" ", _CUT_HERE.sub("… ", clipped) if "<" in clipped else clipped)
            if "at " in output or 'File "' in output:
                output = _own_frames(output, own)
            if '":' in output and harness_tool:
                output = _JSON_KEY.sub(" ", output)
            scores.outputs += 1
            # A web page or search results are others' prose: names count as in plain words there.
            web = adapter.reads_web(call)
            scores.code(
                output,
                OUTPUT_WEIGHT,
                once=True,
                file_weight=OUTPUT_FILE_WEIGHT,
                spread=True,
                kebab=not web,
                plain=web,
                document=document,
            )
            if not web:
                for name in dict.fromkeys(a or b for a, b in _DEFINED.findall(output)):
                    if _code_like(name):
                        scores.add(name, DEFINITION_WEIGHT, typed=False)
            failing = "\n".join(line for line in output.splitlines() if _FAILING.search(line))
            for name in dict.fromkeys(_EXCEPTION.findall(output) + _tests_in(failing)):
                scores.add(name, 1.5, typed=False)
            if "`" in output:
                # A document's words name these on purpose (`mouseMove` - moves the cursor): the API
                # a README or a guide the agent read points it to.
                spans = (m.strip() for m in _BACKTICKED.findall(output))
                # Not a span with spaces: a command (`mkdir -p /workspace/app`), not a name.
                for span in dict.fromkeys(s for s in spans if _code_like(s, kebab=True) and not _SPACED.search(s)):
                    scores.add(span, BACKTICKED_OUTPUT_WEIGHT, typed=False)
    if later:
        scores.sayings.append((len(messages), _PROSE_WORD.findall(later.casefold())))
    scores.settle()
    scores.calls_are_names()
    scores.drop_cut()
    scores.merge_paths()
    scores.drop_foreign()
    scores.drop_specifiers()
    scores.drop_alternatives()
    scores.drop_utility_classes()
    scores.drop_declared()
    scores.drop_worded()
    scores.drop_handles([a.handles for a in adapters if a.handles is not None])
    scores.stems()
    scores.neighbours()
    scores.far_from_work()
    scores.cap_listings()
    scores.collapse_runs()
    for term, kind in scores.kind.items():
        if kind in ("file", "read") and term in scores.score:
            scores.score[term] *= FILE_FACTOR
    edited_paths = {_undotted(p) for p in edited}  # `/` separated, as `_undotted` writes them
    ranked = [
        (term, scores.kind[term])
        for term in sorted(scores.score, key=lambda t: -scores.score[t])
        if scores.score[term] >= MIN_SCORE
        and (scores.kind[term] not in ("file", "read") or not _edited(_undotted(term), edited_paths))
    ]
    return WorkingSet(ranked)


def _edited(path: str, edited: set[str]) -> bool:
    """`path` is an edited file, or the end of one's path (both written as `_undotted` writes them)."""
    return path in edited or any(p.endswith("/" + path) for p in edited)


READ = "Files read: "
NAMED = "Files named: "
TESTS = "Tests: "
IDENTIFIERS = "Identifiers: "
_LABELS = {"read": READ, "file": NAMED, "test": TESTS, "name": IDENTIFIERS}
CHUNK = 25
"""Names per bullet, so a summary short of room drops the least relevant names, not all of them."""


def fit_working_set(ws: WorkingSet, counter: TokenCounter, budget: int, root: str = "") -> list[str]:
    """Relevant Files bullets listing the working set within `budget` tokens, most relevant first:
    `Files read: a, b`, `Files named: …`, `Tests: …`, `Identifiers: …`, at most `CHUNK` names a
    bullet. Names are taken in order of relevance until the budget is spent. Paths under `root`
    (the project's, with a trailing `/`, which the summary states once) are written relative to it;
    files of one directory in one bullet share it: `src/app/{a.py, b.py}`. A name another listed
    name spells out whole (`thread_key` beside `state.thread_key`, `send` beside `send()`), and
    a directory a listed file lies in, are left out and their room given to the next (`_covered`,
    `_inside`)."""
    bullets = _fit(ws.ranked, counter, budget, root)
    names = [(position, item) for kind, chunk in bullets if kind in ("name", "test") for position, item in chunk]
    paths = [(position, item) for kind, chunk in bullets if kind in ("file", "read") for position, item in chunk]
    covered = _covered([item for _, item in names])
    left_out = {position for position, item in names if item in covered} | _inside(paths)
    if left_out:
        kept = [pair for position, pair in enumerate(ws.ranked) if position not in left_out]
        bullets = _fit(kept, counter, budget, root)
    chunks: list[tuple[float, str]] = []
    for kind, chunk in bullets:
        relevance = sum(position for position, _ in chunk) / len(chunk)
        chunks.append((relevance, _LABELS[kind] + _render(kind, [item for _, item in chunk])))
    chunks.sort(key=lambda pair: pair[0])
    return [bullet for _, bullet in chunks]


_JOINED = re.compile(r"(?:\.|::|->)")


def _covered(names: list[str]) -> set[str]:
    """Of `names` (identifiers, tests), those another of them holds whole as its first or last part
    (`state.thread_key` holds `thread_key` and `state`; `Repo::Schema` holds `Schema`), or holds
    with a call's `()` (`flush()` holds `flush`, `app.mount()` holds `app.mount`): a reader meets
    them there, so listing them again only takes room. A name's `()` aside, it is what is held
    (`getAll()` is held by `Service.getAll()`)."""
    holders: dict[str, set[str]] = {}
    for name in names:
        core = name.removesuffix("()")
        pieces = _JOINED.split(core)
        held = {core} if core != name else set()
        if len(pieces) > 1 and all(pieces):
            held.update((pieces[0], pieces[-1]))
        for part in held:
            holders.setdefault(part, set()).add(name)
    return {name for name in names if holders.get(name.removesuffix("()"), set()) - {name}}


def _inside(paths: list[tuple[int, str]]) -> set[int]:
    """Of the listed paths (rank, path as written), the directories another listed path lies in
    (`src/app` beside `src/app/main.py`): the file's path names them already."""
    written = [item.rstrip("/\\") for _, item in paths]
    return {
        position
        for position, item in paths
        if (folder := item.rstrip("/\\"))
        and RUN_MARK not in item
        and any(other != folder and other.startswith((folder + "/", folder + "\\")) for other in written)
    }


def _fit(
    ranked: list[tuple[str, str]], counter: TokenCounter, budget: int, root: str
) -> list[tuple[str, list[tuple[int, str]]]]:
    """The greedy fill `fit_working_set` makes: per bullet its kind and (rank, name) items."""
    spent = 0
    bullets: list[tuple[str, list[tuple[int, str]]]] = []
    open_bullet: dict[str, tuple[list[tuple[int, str]], int]] = {}
    """Per kind: the bullet being filled and its cost so far."""
    for position, (item, kind) in enumerate(ranked):
        if budget - spent < 3:
            break
        if root and kind in ("file", "read"):
            item = RUN_MARK.join(from_root(part, root) for part in item.split(RUN_MARK))
        items, cost = open_bullet.get(kind, ([], 0))
        grown = items + [(position, item)]
        new_cost = counter.count(_LABELS[kind] + _render(kind, [i for _, i in grown])) + 2
        if spent - cost + new_cost > budget:
            continue
        spent += new_cost - cost
        if not items:
            bullets.append((kind, grown))
        else:
            bullets[next(i for i, (k, b) in enumerate(bullets) if b is items)] = (kind, grown)
        open_bullet[kind] = (grown, new_cost) if len(grown) < CHUNK else ([], 0)
    return bullets


def _render(kind: str, items: list[str]) -> str:
    """A bullet's names, comma separated; files sharing a directory written once before their
    rests (`src/app/{a.py, b.py}`, `C:\\proj\\{src\\a.cs, docs\\b.md}`; see `_groups`)."""
    if kind not in ("file", "read"):
        return ", ".join(items)
    groups = _groups(items)
    parts = []
    for prefix, rests in groups:
        if not prefix:
            parts.append(rests[0])
        elif len(rests) == 1:
            parts.append(prefix + rests[0])
        else:
            parts.append(f"{prefix}{{{', '.join(rests)}}}")
    return ", ".join(parts)


GROUP_MIN_SAVING = 10
"""Characters a shared directory must save to be written once: `/repo/{a.py, b/c.py}` saves too
little to be worth reading paths in two pieces."""


def _groups(items: list[str]) -> list[tuple[str, list[str]]]:
    """`items` as (shared directory with its separator, the rest of each path) in order of each
    group's first item; a path alone has prefix ''. Greedy: the directory whose sharing saves the
    most characters first (its length times the paths under it beyond the first), then the next
    among the paths left. One level only, so that `listed` spells every name out again."""
    under: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        if RUN_MARK in item or re.search(r"[{},\s]", item):
            continue  # kept whole: `listed` could not spell it out again
        for match in re.finditer(r"[\\/]", item.rstrip("/\\")):
            prefix = item[: match.end()]
            under.setdefault(prefix, []).append(index)
    taken: dict[int, str] = {}
    while True:
        best, saving = "", GROUP_MIN_SAVING - 1
        for prefix, members in under.items():
            free = [i for i in members if i not in taken]
            gain = (len(free) - 1) * len(prefix) - 2
            if len(free) >= 2 and (gain > saving or (gain == saving and len(prefix) > len(best))):
                best, saving = prefix, gain
        if not best:
            break
        for index in under.pop(best):
            taken.setdefault(index, best)
    grouped: dict[str | int, tuple[str, list[str]]] = {}
    for index, item in enumerate(items):
        prefix = taken.get(index, "")
        grouped.setdefault(prefix or index, (prefix, []))[1].append(item[len(prefix) :])
    return list(grouped.values())


_GROUPED = re.compile(r"([^,{}]*)\{([^{}]*)\}")


def listed(bullet: str) -> list[tuple[str, str]] | None:
    """The (name, kind) pairs a working-set bullet lists (a directory's group, `dir/{a, b}`,
    spelled out), or None for another bullet."""
    for kind, label in _LABELS.items():
        if bullet.startswith(label):
            body = _GROUPED.sub(
                lambda m: ", ".join(m.group(1) + name.strip() for name in m.group(2).split(",")), bullet[len(label) :]
            )
            return [(name.strip().strip("`"), kind) for name in body.split(", ") if name.strip().strip("`")]
    return None


__all__ = [
    "IDENTIFIERS",
    "MAX_SHARE",
    "MAX_TOKENS",
    "NAMED",
    "READ",
    "SHARE",
    "TESTS",
    "WorkingSet",
    "fit_working_set",
    "is_file_name",
    "listed",
    "working_set",
]
