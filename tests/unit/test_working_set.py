"""The working set (issue 27): what the agent saw and then referred to ranks in; noise stays out.

Synthetic histories only. Each rule is general — by syntax, by role, by what came before — and
each test names the class of input it stands for:
- saw, then referred: a header a file it read includes, a file a listing showed whose name the
  agent then typed (even without its extension), a name an output showed that a later call used;
- noise: a name where a harness cut an output short, bytes `cat -v` escaped, test-runner progress glued to a path, files far below the work that searches kept
  hitting, sed expressions, placeholders, bare keywords, CSS
  properties, system and installed-package paths (unless the agent opened one), a script's `#!`
  interpreter, a `\n` escape glued to a file name, paths cut by a
  clip or an ellipsis, a search's context-line numbers, glob patterns, product names in prose,
  `a/b/c` alternatives in prose, and in any text unless files of the session lie under them,
  sizes a slash joins (`24pt/18pt/14pt`);
- a run of generated names is one entry; files of one directory share it in a bullet;
- the project root is where the agent's relative paths resolve, so every relative path in the
  summary reads from it.
"""

from __future__ import annotations

import json

import pytest
from _histories import assistant, call, stored, user

from contextfold.compaction.base import SummaryRequest
from contextfold.compaction.extractive import ExtractiveSummarizer
from contextfold.compaction.pins import names_file
from contextfold.compaction.template import CRITICAL, FILES, parse_summary
from contextfold.compaction.workingset import (
    LISTING_NAMES,
    RUN_MARK,
    WORKED_LISTING_NAMES,
    WorkingSet,
    fit_working_set,
    listed,
    noise,
    working_set,
)
from contextfold.domain import Message
from contextfold.tokens.counting import counter_for

COUNTER = counter_for("gpt-4o")


def ranked(messages: list[Message], edited: set[str] | None = None, read: tuple[str, ...] = ()) -> list[str]:
    return [name for name, _ in working_set(stored(messages), edited or set(), read).ranked]


def bash(command: str, output: str) -> Message:
    return assistant("", call("Bash", {"command": command}, output))


# -- saw, then referred -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "defined", "used"),
    [
        (
            "  await fetchPlayers()\n  setShowEditForm(false)\n  setSelectedPlayer(null)\n"
            "  const resetForm = () => { setFormData(EMPTY_FORM) }\n"
            "  function openEditForm(player) { setSelectedPlayer(player) }\n"
            "func (s *PlayerStore) LoadRoster(id string) error {\n"
            "def player_summary(player):\n",
            ("resetForm", "openEditForm", "LoadRoster", "player_summary"),
            ("fetchPlayers", "setShowEditForm", "setFormData", "EMPTY_FORM"),
        ),
        # Languages whose methods no keyword opens: a modifier does (Java, C#, TypeScript), or Kotlin's `fun`.
        (
            "    Order order = orderRepo.findById(orderId);\n    auditLog.record(order);\n"
            "    public static List<Order> findOpenOrders(Customer customer) {\n"
            "    protected async Task<IActionResult> GetOrderTotal(int id) {\n"
            "    override fun onCreateView(inflater: LayoutInflater): View {\n",
            ("findOpenOrders", "GetOrderTotal", "onCreateView"),
            ("orderRepo.findById", "auditLog.record"),
        ),
    ],
)
def test_what_a_read_file_defines_ranks_above_what_it_only_uses(
    source: str, defined: tuple[str, ...], used: tuple[str, ...]
) -> None:
    names = ranked([user("Change how the list is loaded."), bash("cat src/view_source", source)])
    assert max(names.index(n) for n in defined) < min(names.index(n) for n in used), names


def test_a_header_a_read_file_includes_is_a_name_and_ranks_once_the_agent_opens_it() -> None:
    source = '#include <ros/ros.h>\n#include <geometry_msgs/Twist.h>\n#include "get_location.h"\nint main() {}\n'
    names = ranked(
        [
            user("Why does the node not publish?"),
            assistant("", call("Read", {"file_path": "/repo/src/node.c"}, source)),
            bash("grep -rn publish_twist /repo/src", "/repo/src/node.c:40: publish_twist(cmd);"),
            assistant("", call("Read", {"file_path": "/repo/include/get_location.h"}, "int get_location(void);")),
        ]
    )
    # Headers in angle brackets are files, like quoted ones (not closing tags to skip).
    assert "ros/ros.h" in names and "geometry_msgs/Twist.h" in names
    # Seen in the file it read, then opened: ahead of the headers it only saw.
    assert names.index("/repo/include/get_location.h") < names.index("ros/ros.h")


def test_a_file_a_listing_showed_ranks_first_once_the_agent_types_its_name() -> None:
    listing = "\n".join(f"hooks/{name}" for name in ("a-start.sh", "b-stop.sh", "c-check.sh", "hooks.json"))
    listing += "\n" + "\n".join(f"hooks/helper_{i}.py" for i in range(8)) + "\nhooks/notify-session.sh"
    names = ranked(
        [
            user("The session hook does not fire."),
            bash("find hooks -type f", listing),
            assistant("The hook is wired in the plugin manifest.", call("Read", {"file_path": "manifest.toml"}, "x")),
            # The agent names the script without its extension: it meant the file the listing showed.
            bash("grep -rn notify-session manifest.toml", "manifest.toml:3: run = 'notify-session'"),
        ]
    )
    shown = [n for n in names if n.startswith("hooks/")]
    assert shown[0] == "hooks/notify-session.sh", shown


def test_code_the_agent_wrote_in_its_reply_is_typed_not_only_its_prose() -> None:
    reply = (
        "Switch the build on the mode:\n\n```javascript\n// vite.config.js\nimport { defineConfig, loadEnv } from 'vite';\n"
        "export default defineConfig(({ mode }) => ({ define: loadEnv(mode, process.cwd()) }));\n```\n"
    )
    listing = "\n".join(["src/main.js", "src/App.vue", "vite.config.js"])
    names = ranked([user("Make the build skip the app in maintenance mode."), bash("ls", listing), assistant(reply)])
    assert "defineConfig" in names and "loadEnv" in names, names
    # Written in a reply after a listing showed it: referred to, ahead of the files only shown.
    assert names.index("vite.config.js") < names.index("src/main.js"), names


def test_a_reply_s_block_that_is_its_own_call_counts_once() -> None:
    # mini-swe-agent shows the command in its reply and runs that very block: one use, not one and a half.
    def run(command: str, output: str, text: str = "THOUGHT: look at it.") -> Message:
        return assistant(text, call("Bash", {"command": command}, output))

    older = "grep -n alpha_parse src/lib.py"
    history = [user("Fix the parser."), *(run(f"echo step{i}", "ok") for i in range(6))]
    newer = run("grep -n beta_parse src/lib.py", "40: def beta_parse")
    shown = run(older, "12: def alpha_parse", text=f"THOUGHT: look at it.\n\n```bash\n{older}\n```")
    plain = run(older, "12: def alpha_parse")
    # Typed once each, the newer name ranks first, whether or not the reply shows the block.
    names = ranked([*history, shown, newer])
    assert names == ranked([*history, plain, newer])
    assert names.index("beta_parse") < names.index("alpha_parse"), names


LISTED = [f"scanners/{name}.py" for name in ("ban_topics", "code", "gibberish", "language", "regex", "secrets")]
LISTED += ["scanners/prompt_injection.py", "scanners/sentiment.py", "scanners/token_limit.py", "scanners/toxicity.py"]


def test_a_file_a_listing_showed_ranks_first_once_someone_says_its_name_in_words() -> None:
    history = [
        user("Deploy the API."),
        bash("find scanners -type f", "\n".join(LISTED)),
        assistant("", call("Read", {"file_path": "Makefile"}, "run:\n\tuvicorn app:app")),
    ]
    before = [n for n in ranked(history) if n.startswith("scanners/")]
    assert before[0] != "scanners/prompt_injection.py", before  # nothing singles it out yet
    said = [
        n for n in ranked([*history, user("We only need the prompt injection scanner.")]) if n.startswith("scanners/")
    ]
    assert said[0] == "scanners/prompt_injection.py", said
    # Said before the listing showed it, or as one word of the name, it is not referred to.
    early = [user("We only need the prompt injection scanner."), *history[1:]]
    assert [n for n in ranked(early) if n.startswith("scanners/")][0] != "scanners/prompt_injection.py"
    word = [n for n in ranked([*history, user("Why does the injection fail?")]) if n.startswith("scanners/")]
    assert word[0] != "scanners/prompt_injection.py", word


def test_words_said_after_the_history_refer_to_a_file_it_showed() -> None:
    history = [user("Deploy the API."), bash("find scanners -type f", "\n".join(LISTED))]
    plain = [name for name, _ in working_set(stored(history), set()).ranked if name.startswith("scanners/")]
    later = working_set(stored(history), set(), later="Keep the prompt injection scanner only.")
    names = [name for name, _ in later.ranked if name.startswith("scanners/")]
    assert plain[0] != "scanners/prompt_injection.py" and names[0] == "scanners/prompt_injection.py", (plain, names)


def test_a_listing_of_the_directory_the_agent_edits_in_keeps_more_names_than_one_elsewhere() -> None:
    count = WORKED_LISTING_NAMES + 5
    work = "\n".join(f"/repo/internal/server/module_{chr(97 + i // 26)}{chr(97 + i % 26)}.go" for i in range(count))
    other = "\n".join(f"/repo/docs/guide/page_{chr(97 + i // 26)}{chr(97 + i % 26)}.md" for i in range(count))
    names = ranked(
        [
            user("Split the server's handlers."),
            assistant("", call("Glob", {"pattern": "internal/server/*.go"}, work)),
            assistant("", call("Glob", {"pattern": "docs/guide/*.md"}, other)),
            assistant("", call("Edit", {"file_path": "/repo/internal/server/server.go"}, "ok")),
        ],
        edited={"/repo/internal/server/server.go"},
    )
    # The map of the directory the work is in keeps more of its names; another listing its best few.
    assert sum("/internal/server/module_" in n for n in names) == WORKED_LISTING_NAMES
    assert sum("/docs/guide/page_" in n for n in names) == LISTING_NAMES


def test_a_name_an_output_showed_and_a_later_call_used_outranks_one_typed_twice_unseen() -> None:
    names = ranked(
        [
            user("Speed up the export."),
            bash("grep -rn def src/export.py", "src/export.py:10:def stream_rows_batched(rows):"),
            bash("python -c 'from export import load_legacy_rows as f; f()'", "ok"),
            bash("python -c 'from export import load_legacy_rows as f; f()'", "ok"),
            bash("python -c 'from export import stream_rows_batched as f; f([])'", "ok"),
        ]
    )
    # Seen in the search's hit, then run: the agent met it and went on with it.
    assert names.index("stream_rows_batched") < names.index("load_legacy_rows"), names


# -- noise ------------------------------------------------------------------------------------------


def test_a_name_a_document_puts_in_backticks_outranks_one_the_same_output_shows_in_plain_code() -> None:
    readme = (
        "## Example\n```js\nconst helperValue = otherThing.compute(inputValue)\n```\n\n"
        "## Tools\n- `mouseMove` - move the cursor\n- `screenInfo` - the screen's size\n"
    )
    names = ranked([user("Which tools does the server have?"), bash("cat README.md", readme)])
    assert names.index("mouseMove") < names.index("helperValue")
    assert names.index("screenInfo") < names.index("otherThing.compute")


# -- names of any script, names that start with a digit ----------------------------------------------


def test_file_names_starting_with_a_digit_or_a_non_ascii_letter_are_found_wherever_they_stand() -> None:
    listing = "01-intro.md\n02-setup.md\n设计文档.md\nREADME.md"
    names = ranked(
        [
            user("Merge 2024_report.md into the notes and translate 设计文档.md."),
            bash("ls docs", listing),
            assistant("", call("Read", {"file_path": "数据/加载.py"}, "def 加载(): ...")),
            bash("python src/数据/模型.py", "ok"),
            assistant("Now 01-intro.md needs the new heading."),
        ]
    )
    for name in ("2024_report.md", "01-intro.md", "设计文档.md", "数据/加载.py", "src/数据/模型.py"):
        assert name in names, (name, names)


def test_identifiers_of_any_script_are_names_but_a_digit_never_starts_one() -> None:
    names = ranked(
        [
            user("Rename `数据_加载` to 数据_读取 and call 模块.加载 from the CLI."),
            assistant("", call("Read", {"file_path": "/repo/app.py"}, "数据_读取 = 模块.加载\nx_2024_01 = 1")),
        ]
    )
    for name in ("数据_加载", "数据_读取", "模块.加载", "x_2024_01"):
        assert name in names, (name, names)


def test_names_with_capitals_in_a_row_are_identifiers_but_an_acronyms_plural_is_a_word() -> None:
    # Written by the agent in a plan and in code: a name ending in one capital, or holding an acronym.
    plan = (
        "```ts\nconst getTargetX = (i: number) => '500px'\nel.innerHTML = toJSON(userID)\n"
        "const node: HTMLElement = parse()\n```\nThe APIs and URLs stay; IOError is raised when it fails."
    )
    names = ranked(
        [
            user("Make the flying cards responsive."),
            assistant("", call("Write", {"file_path": "/w/PLAN.md", "content": plan}, "File created")),
            assistant(
                "", call("Edit", {"file_path": "/w/a.ts", "old_string": "getTargetX()", "new_string": "x"}, "ok")
            ),
        ]
    )
    for name in ("getTargetX", "el.innerHTML", "toJSON", "userID", "HTMLElement", "IOError"):
        assert name in names, (name, names)
    assert "APIs" not in names and "URLs" not in names, names


def test_the_paths_of_logged_requests_are_routes_not_files() -> None:
    log = (
        'https://huggingface.co:443 "HEAD /org/model/resolve/9ea9927/tokenizer_config.json HTTP/1.1" 307 0\n'
        '127.0.0.1:5000 - "GET /static/js/app.bundle.js HTTP/1.1" 200 -\n'
        "Loaded scanners from app/scanners.py"
    )
    names = ranked([user("Why is the server slow to start?"), bash("make run", log)])
    assert "app/scanners.py" in names, names
    assert not [n for n in names if "tokenizer_config" in n or "bundle" in n], names


def test_a_test_files_name_is_a_file_and_the_tests_in_it_are_tests() -> None:
    go = "--- FAIL: TestParseAmount (0.00s)\n    parse_test.go:42: got 15, want 1.5\nFAIL"
    py = "FAILED tests/test_views.py::test_login_redirects - assert 302 == 200\n1 failed"
    ws = working_set(stored([user("Fix the tests."), bash("go test ./...", go), bash("pytest", py)]), set())
    kinds = dict(ws.ranked)
    assert kinds.get("TestParseAmount") == "test" and kinds.get("test_login_redirects") == "test", kinds
    assert kinds.get("parse_test.go") == "file" and kinds.get("tests/test_views.py") == "file", kinds
    assert "parse_test" not in kinds and "test_views" not in kinds, kinds


def test_images_documents_and_markup_files_are_files() -> None:
    written = "Figures: 00-cover.svg, 01-overview.svg and 02-flow.svg; the print copy is book-final.pdf."
    names = ranked(
        [
            user("List the figures in the index."),
            assistant("", call("Write", {"file_path": "/book/index.md", "content": written}, "ok")),
            bash("ls /book/img", "00-cover.svg\n01-overview.svg\n02-flow.svg\nlogo.png"),
        ],
        edited={"/book/index.md"},
    )
    for name in ("00-cover.svg", "01-overview.svg", "02-flow.svg", "book-final.pdf"):
        assert name in names, (name, names)
    kinds = dict(working_set(stored([user("Open `00-cover.svg` and `console.log` it.")]), set()).ranked)
    assert kinds.get("00-cover.svg") == "file" and kinds.get("console.log") == "name"


def test_markup_attributes_search_paths_and_file_modes_are_not_names() -> None:
    svg = '<svg viewBox="0 0 10 10"><text font-family="serif" stroke-width="2" text-anchor="middle">Hi</text></svg>'
    env = "PATH=/mingw64/bin:/usr/bin:/c/Users/me/bin:/c/Tools/Scripts\nPYTHONPATH=/srv/app/lib:/srv/app/vendor"
    names = ranked(
        [
            user("Why is the title clipped?"),
            assistant("", call("Write", {"file_path": "/book/title.svg", "content": svg}, "ok")),
            bash("env", env),
            bash(
                "ls -l /book", "drwxr-xr-x 1 me 197121 0 Feb 28 12:49 img\n-rw-r--r-- 1 me 197121 7340 Feb 28 title.svg"
            ),
            assistant("The `text-box` class and /srv/app/lib/render.py decide it."),
        ],
        edited={"/book/title.svg"},
    )
    for junk in ("font-family", "stroke-width", "text-anchor", "drwxr-xr-x", "-rw-r--r--"):
        assert junk not in names, (junk, names)
    assert not [n for n in names if ":/" in n], names
    assert "text-box" in names and "/srv/app/lib/render.py" in names


def test_a_diffs_sides_are_the_file_and_a_one_letter_variables_members_are_not_names() -> None:
    diff = (
        "diff --git a/src/app/users.ts b/src/app/users.ts\n--- a/src/app/users.ts\n+++ b/src/app/users.ts\n"
        "@@ -1,3 +1,3 @@\n-const names = rows.map((r) => r.userName)\n+const names = rows.flatMap((d) => d.displayName)\n"
    )
    names = ranked([user("Why are names doubled?"), bash("git diff", diff), bash("git diff", diff)])
    assert "src/app/users.ts" in names
    assert not [n for n in names if n.startswith(("a/", "b/"))], names
    assert "r.userName" not in names and "d.displayName" not in names
    assert "rows.flatMap" in names


def test_numbers_versions_dates_times_sizes_and_durations_are_not_names() -> None:
    output = (
        "took 1.5h (2.5m of it idle), 3.14 s per call; v1.2.3 is 1.2.3, released 2024-01-05 at 12:30:45\n"
        "size 28px 1.5MB 10k 0x7fff 1e10 100% 2024_01 12/05/2024 10.0.0.1"
    )
    names = ranked([user("How slow is the build?"), bash("./build --stats", output), bash("./build --stats", output)])
    for number in ("1.5h", "2.5m", "3.14", "1.2.3", "2024-01-05", "12:30:45", "28px", "1.5MB", "10k", "0x7fff"):
        assert number not in names, (number, names)
    assert not [n for n in names if n[0].isdigit()], names


def test_test_runner_progress_glued_to_a_system_path_is_not_a_file() -> None:
    output = (
        "EEEEEEEEEEE.E/usr/lib/python3.10/unittest/case.py:550: ResourceWarning: unclosed socket\n"
        ".E/usr/lib/python3.10/socket.py:776: ResourceWarning\n"
        'File "/testbed/requests/adapters.py", line 12, in send\n'
        'File "/usr/lib/python3.10/unittest/case.py", line 59, in testPartExecutor\n'
    )
    names = ranked([user("Fix the failing tests."), bash("python -m unittest", output)])
    assert not [n for n in names if n.startswith(("EEE", ".E", "E/"))], names
    assert not [n for n in names if n.startswith("/usr/lib/")], names  # shown, never opened
    assert "/testbed/requests/adapters.py" in names


def test_other_ecosystems_installed_packages_are_not_the_projects_files() -> None:
    rspec = (
        "Failure/Error: expect(user.display_name).to eq('Bob')\n"
        "# ./spec/models/user_spec.rb:12:in `block (2 levels) in <top (required)>'\n"
        "# /Users/ana/.rbenv/versions/3.2.0/lib/ruby/gems/3.2.0/gems/rspec-core-3.12.0/lib/rspec/core/example.rb:263\n"
        "# /app/vendor/bundle/ruby/3.2.0/gems/activesupport-7.1.0/lib/active_support/callbacks.rb:110\n"
    )
    go = "panic: nil map\n\t/home/ana/go/pkg/mod/github.com/spf13/cobra@v1.8.0/command.go:983 +0x1d\n\t/repo/cmd/root.go:40"
    pods = "/repo/ios/Pods/Alamofire/Source/Session.swift:12: warning: deprecated\n/repo/ios/App/Login.swift:3: error"
    laravel = "#0 /var/www/app/vendor/laravel/framework/src/Illuminate/Pipeline/Pipeline.php(183): handle()\n"
    names = ranked(
        [
            user("Fix the failing spec."),
            bash("bundle exec rspec", rspec),
            bash("go run .", go),
            bash("xcodebuild", pods),
            bash("php artisan serve", laravel),
        ]
    )
    assert not [n for n in names if any(p in n for p in (".rbenv", "vendor/", "pkg/mod", "Pods/"))], names
    assert {"./spec/models/user_spec.rb", "/repo/cmd/root.go", "/repo/ios/App/Login.swift"} <= set(names), names


def test_a_system_path_the_agent_opened_stays() -> None:
    path = "/usr/lib/python3.10/site-packages/requests/sessions.py"
    names = ranked(
        [
            user("Where does the session retry?"),
            bash("python -c 'import requests'", f'File "{path}", line 3\nFile "/opt/py/lib/python3.10/x.py", line 4'),
            assistant("", call("Read", {"file_path": path}, "class Session: ...")),
        ]
    )
    assert path in names and "/opt/py/lib/python3.10/x.py" not in names


def test_interpreters_and_system_files_a_script_or_an_output_names_are_not_the_works() -> None:
    script = "#!/usr/bin/env python3\nimport csv\n\ndef load_rows(path):\n    return list(csv.reader(open(path)))\n"
    names = ranked(
        [
            user("Write a loader for the export."),
            assistant("", call("Write", {"file_path": "/repo/tools/load_rows.py", "content": script}, "File created")),
            assistant("", call("Write", {"file_path": "/repo/run.sh", "content": "#! /bin/bash\nset -e\n"}, "ok")),
            bash("./run.sh", "/bin/bash: line 3: ./missing.sh: No such file or directory\nsee /etc/passwd"),
        ]
    )
    for system in ("/usr/bin/env", "/bin/bash", "/etc/passwd"):
        assert system not in names, (system, names)
    assert "load_rows" in names
    opened = ranked(
        [user("Why does login fail?"), assistant("", call("Read", {"file_path": "/etc/hosts"}, "127.0.0.1"))]
    )
    assert "/etc/hosts" in opened  # one the agent opened stays


def test_a_newline_escaped_right_after_a_file_name_ends_it() -> None:
    # A test fixture shown as a string literal: `\n` between two listed files, and a Windows path
    # whose folder reads like a file's name but for its type keeps its backslash.
    output = '    "content" => "file1.txt\\nfile2.txt"\n    root = C:\\data.d\\new.md\n'
    names = ranked([user("What does the fixture hold?"), bash("cat test/fixture.exs", output)])
    assert "file2.txt" in names and "nfile2.txt" not in names, names
    assert "C:\\data.d\\new.md" in names, names


def test_files_searches_keep_hitting_far_below_the_work_rank_behind_the_works_own() -> None:
    # The agent works in planner/ and greps the checkout again and again: each search hits a
    # vendored library four directories down and a sibling package's file, in that order.
    root = "/home/dev/ws/src/robot/"
    vendored = root + "sdk/include/boost/asio/serial_port.hpp"
    sibling = root + "ros_sdk/src/server_params.cpp"
    messages = [
        user("Find where the lidar serial port is opened."),
        assistant("", call("Read", {"file_path": root + "planner/scripts/run.py"}, "import rospy")),
    ]
    for word in ("serial", "port", "lidar", "baud", "tty"):
        messages.append(bash(f"grep -rn {word} {root}", f"{vendored}:12: {word}\n{sibling}:40: {word}\n"))
    names = ranked(messages)
    assert names.index(sibling) < names.index(vendored), names
    # Once the agent opens a file down there, that tree is part of the work: first seen, first.
    opened = root + "sdk/include/boost/asio/impl/serial_port.ipp"
    messages.append(assistant("", call("Read", {"file_path": opened}, "")))
    names = ranked(messages)
    assert names.index(vendored) < names.index(sibling), names


def test_sed_expressions_placeholders_keywords_and_globs_are_not_names() -> None:
    names = ranked(
        [
            user("Replace the deprecated alias. Run `your_command_here` if unsure; see `../path/to/your` docs."),
            bash("sed -i 's/collections.Callable/Callable/g' src/compat.py", ""),
            assistant("The `def`, `None` and `POST` handling stays; `<file>` is a template. Check `src/*.py`."),
            bash("grep -rn Callable src/compat.py", "src/compat.py:3:from collections.abc import Callable"),
        ]
    )
    for junk in ("s/collections.Callable/Callable/g", "your_command_here", "../path/to/your", "def", "None", "POST"):
        assert junk not in names, (junk, names)
    assert not [n for n in names if "<" in n or "*" in n], names
    assert "src/compat.py" in names


def test_bytes_shown_as_cat_v_shows_them_are_not_names() -> None:
    # A Chinese file name through `cat -v`: every byte past ASCII as M-x.
    listing = "docs/M-eM-/M-9M-fM-/M-.md\n_M-3M-gM-.M-1M-hM-/M-4.md\ndocs/notes.md"
    names = ranked([user("What is in docs?"), bash("ls docs | cat -v", listing), bash("cat docs/notes.md", "x")])
    assert not [n for n in names if "M-" in n], names
    assert "docs/notes.md" in names


def test_css_properties_and_their_values_are_the_formats_words_but_class_names_are_names() -> None:
    style = (
        ".card { margin-top: 4px; background-color: #fff; display: inline-block; justify-content: space-between;\n"
        "  font-family: system-ui, sans-serif; gap: var(--gap-lg); animation: pulse-ring 2s }\n"
        "@keyframes pulse-ring { to { opacity: 0 } }\n<div class='focus-ring card-body pulse-ring'></div>"
    )
    names = ranked(
        [
            user("Tidy the card."),
            assistant("", call("Write", {"file_path": "/repo/src/card.vue", "content": style}, "ok")),
            bash("cat /repo/src/card.vue", style),
        ],
        edited={"/repo/src/card.vue"},
    )
    for word in ("margin-top", "background-color", "inline-block", "space-between", "system-ui", "sans-serif"):
        assert word not in names, names
    # The project's own names stay: its classes, an animation's name also written elsewhere.
    assert "focus-ring" in names and "card-body" in names and "pulse-ring" in names, names


def test_utility_classes_are_styling_but_a_projects_own_classes_and_one_named_in_words_are_names() -> None:
    markup = (
        '<div className="flex items-center justify-between px-4 py-2 md:grid-cols-2 text-gray-500 glass-card">\n'
        '  <span className="rounded-lg bg-gradient-to-br -mt-2 is-active text-muted">{title}</span>\n</div>'
    )
    names = ranked(
        [
            user("Make the header's title grey."),
            assistant("", call("Write", {"file_path": "/repo/src/Header.tsx", "content": markup}, "ok")),
            bash("cat /repo/src/Header.tsx", markup),
            assistant("The title keeps `text-gray-500`; the row uses its own `glass-card` class."),
        ],
        edited={"/repo/src/Header.tsx"},
    )
    for utility in ("items-center", "justify-between", "px-4", "py-2", "md:grid-cols-2", "rounded-lg", "-mt-2"):
        assert utility not in names, utility
    assert "bg-gradient-to-br" not in names
    assert "text-gray-500" in names  # the agent named it in its words
    assert "glass-card" in names and "is-active" in names and "text-muted" in names


def test_compound_words_of_sentences_are_english_but_in_code_a_command_or_backticks_they_are_names() -> None:
    page = (
        "# Choosing a chart library\n"
        "12→- ✅ **Recharts** gives a high-level API that is production-ready for most dashboards.\n"
        "13→A well-documented library with real-time updates and `chart-tooltip` hooks built in.\n"
        "14→It ships framer-motion transitions and a glass-panel look out of the box, we read.\n"
    )
    names = ranked(
        [
            user("Which chart library should the dashboard use?"),
            assistant("", call("Read", {"file_path": "/repo/docs/charts.md"}, page)),
            assistant(
                "",
                call(
                    "Edit",
                    {
                        "file_path": "/repo/src/App.tsx",
                        "new_string": "import { motion } from 'framer-motion'\n"
                        "{/* Category cards grid - mobile-first responsive */}\n<div class='glass-panel'>",
                    },
                    "ok",
                ),
            ),
            assistant("Recharts, then."),
        ]
    )
    for english in ("high-level", "production-ready", "well-documented", "real-time", "mobile-first"):
        assert english not in names, english
    assert "chart-tooltip" in names  # in backticks
    assert "framer-motion" in names and "glass-panel" in names  # also in code


def test_a_sentence_in_quotes_is_words_but_a_class_list_in_quotes_is_names() -> None:
    orders = json.dumps(
        {
            "orders": [
                {"id": 50, "title": "Integrate payment processing with a Third-Party gateway"},
                {"id": 64, "title": "Build the field option editor for Selection-Based fields"},
            ]
        }
    )
    markup = '<div className="glass-card glass-card-hover relative overflow-hidden glow-border shadow">'
    names = ranked(
        [
            user("Pick the next work order."),
            assistant("", call("mcp__factory__list_orders", {}, orders)),
            assistant("", call("Read", {"file_path": "/repo/src/Card.tsx"}, markup)),
            assistant("Order 64 next."),
        ]
    )
    assert "Third-Party" not in names and "Selection-Based" not in names, names
    assert "glass-card-hover" in names and "glow-border" in names, names


def test_in_a_document_a_heading_or_a_short_bullet_is_prose_but_a_code_block_is_code() -> None:
    spec = (
        "## Mobile-First Layout\n- Course-specific stats\n- two-phase rollout\n```bash\nnpm install lucide-react\n```\n"
    )
    names = ranked(
        [
            user("Write the spec."),
            assistant("", call("Write", {"file_path": "/repo/specs/layout.md", "content": spec}, "ok")),
            assistant("Spec written."),
        ]
    )
    for english in ("Mobile-First", "Course-specific", "two-phase"):
        assert english not in names, english
    assert "lucide-react" in names  # in the document's code block


def test_a_web_pages_names_count_as_in_plain_words_where_a_project_files_stay_names() -> None:
    page = (
        "LangChain and LlamaIndex lead; HubSpot and DeepMind wrote about graph-based retrieval.\n"
        "Call `createRetriever` with a ChromaStore, then await results.\n"
    )
    searches = (
        ("WebSearch", {"query": "rag frameworks"}),
        ("WebFetch", {"url": "https://example.org/rag"}),
        ("web_search", {"query": "rag frameworks"}),  # Codex's, Gemini CLI's
        ("browser", {"code": "goto('https://example.org/rag')"}),  # OpenHands'
        # MCP servers' pages and documentation, known by their tools' words
        ("mcp__playwright__browser_navigate", {"url": "https://example.org/rag"}),
        ("mcp__fetch__fetch", {"url": "https://example.org/rag"}),
        ("mcp__firecrawl__firecrawl_scrape", {"url": "https://example.org/rag"}),
        ("mcp__context7__get-library-docs", {"context7CompatibleLibraryID": "/rag/retrievers", "topic": "rag"}),
    )
    for tool, args in searches:
        names = ranked(
            [
                user("Which retrieval library fits?"),
                assistant("", call(tool, args, page)),
                assistant(
                    "", call("Read", {"file_path": "/repo/docs/notes.md"}, "The RetrieverPool wraps a ChromaStore.")
                ),
                assistant("Done reading."),
            ]
        )
        for product in ("LangChain", "LlamaIndex", "HubSpot", "DeepMind", "graph-based"):
            assert product not in names, (tool, product)
        assert "createRetriever" in names  # in backticks
        assert "RetrieverPool" in names and "ChromaStore" in names  # a project file's names


def test_documentation_an_mcp_server_returns_gives_its_api_not_its_addresses_or_ids() -> None:
    docs = "\n".join(
        f"TITLE: Navigating\nSOURCE: https://github.com/acme/router/blob/main/docs/use-router.mdx#_snippet_{i}"
        f"?utm_source=context7\nCODE:\n```\nconst router = useNavigator()\nrouter.push('/home')\n```"
        for i in range(8)
    )
    names = ranked(
        [
            user("Make the sign-in button go to the dashboard."),
            assistant(
                "",
                call("mcp__context7__get-library-docs", {"context7CompatibleLibraryID": "/acme/router"}, docs),
            ),
            assistant("", call("Edit", {"file_path": "/w/src/SignIn.tsx", "old_string": "a", "new_string": "b"}, "ok")),
            assistant("Done."),
        ],
        edited={"/w/src/SignIn.tsx"},
    )
    assert "router.push" in names  # the documentation's code
    assert not [n for n in names if "snippet" in n or "utm" in n], names  # the addresses' fragments and queries
    assert "/acme/router" not in names  # the library's id the call gave, not a file


def test_an_mcp_servers_json_keys_are_its_protocol_where_a_commands_json_is_the_works() -> None:
    symbol = json.dumps(
        [{"name_path": "OrderService/place", "relative_path": "src/orders.py", "body_location": {"start_line": 3}}]
    )
    printed = json.dumps({"order_total": 12, "customer_tier": "gold"})
    names = ranked(
        [
            user("Why does placing an order charge twice?"),
            assistant("", call("mcp__serena__find_symbol", {"name_path": "place", "relative_path": "src"}, symbol)),
            bash("curl -s localhost:8000/api/orders/7", printed),
            assistant("The order endpoint returns the total once."),
        ]
    )
    for key in ("name_path", "relative_path", "body_location", "start_line"):
        assert key not in names, key
    assert "OrderService/place" in names or "src/orders.py" in names  # its values stay
    assert "order_total" in names and "customer_tier" in names  # the work's API fields


def test_what_claude_code_appends_to_a_subagents_report_is_not_the_works() -> None:
    report = (
        "Added `withRetry` in `src/api/retry.ts` and wrapped `fetchJson`.\n"
        "agentId: a81f2c3 (for resuming to continue this agent's work if needed)\n"
        "<usage>total_tokens: 34007\ntool_uses: 8\nduration_ms: 396952</usage>"
    )
    launched = (
        "Async agent launched successfully.\nagentId: a2b1218 (This is an internal ID for your use.)\n"
        "output_file: /tmp/claude/-w/tasks/a2b1218.output\nThe agent is currently working in the background."
    )
    names = ranked(
        [
            user("Add retries to the API client."),
            assistant("", call("Task", {"description": "Implement retries", "prompt": "Add retries"}, report)),
            assistant("", call("Agent", {"description": "Write tests", "prompt": "Test retries"}, launched)),
            bash("cat usage.txt", "tool_uses: 8 per run; see track_tool_uses()"),  # a command's output is its own
            assistant("Both agents ran."),
        ]
    )
    assert "withRetry" in names and "fetchJson" in names
    for notice in ("agentId", "total_tokens", "duration_ms", "a2b1218.output", "/tmp/claude/-w/tasks/a2b1218.output"):
        assert notice not in names, notice
    assert "track_tool_uses" in names


def test_a_background_subagents_report_in_a_harness_notice_is_shown_as_an_output_is() -> None:
    report = "Found `verifyPassword` in src/lib/auth.ts; `SESSION_TTL` is 3600."
    notice = (
        "<task-notification>\n<task-id>a2b</task-id>\n<status>completed</status>\n"
        f'<summary>Agent "Explore auth" completed</summary>\n<result>{report}</result>\n</task-notification>'
    )
    names = ranked(
        [
            user("Why does login fail?"),
            assistant("", call("Task", {"description": "Explore auth", "prompt": "Map it"}, "Async agent launched.")),
            user(notice),
            assistant("The subagent found the check."),
        ]
    )
    assert "verifyPassword" in names and "src/lib/auth.ts" in names and "SESSION_TTL" in names


def test_a_file_written_as_a_file_address_is_that_file() -> None:
    names = ranked(
        [
            user("Why is [@vite.config.js#L19:38](file:///Users/me/app/vite.config.js#L19:38) ignored?"),
            bash(
                "npm run dev",
                "Warning: Module type of file:///Users/me/app/postcss.config.js?t=1770 is not specified\n"
                "  at file:///C:/Users/me/app/src/main.ts:3:1",
            ),
            assistant("Looking at the config."),
        ]
    )
    for path in ("/Users/me/app/vite.config.js", "/Users/me/app/postcss.config.js", "C:/Users/me/app/src/main.ts"):
        assert any(n.endswith(path.rsplit("/", 1)[1]) and "://" not in n for n in names), (path, names)
    assert not [n for n in names if n.startswith("file:")], names


def test_encoded_data_in_an_output_is_no_path_or_name() -> None:
    lock = (
        '"integrity": "sha512-GknRHDHvnAo0VIQqjMozSeflFP566NHuXo+OikgtADx9ixlcpyD1RINh/N52ELD99wc04HCDpP2CKm83a/X=="\n'
        '"resolved": "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz"\n'
        "token: eyJhbGciOiJIUzI1NiJ9Q2x1c3Rlcg0K3xYz9Lmn\n"
    )
    names = ranked(
        [
            user("Why does npm ci fail?"),
            bash("cat package-lock.json | head", lock),
            assistant("", call("Read", {"file_path": "/w/src/components/PlayerProfileDashboard2/index.tsx"}, "x")),
            assistant("Checked PlayerProfileDashboard2."),
        ]
    )
    assert not [n for n in names if "OikgtADx9ix" in n or "eyJhbGci" in n], names
    assert "/w/src/components/PlayerProfileDashboard2/index.tsx" in names  # CamelCase and a digit: a name
    assert not noise("a1b2c3d4e5f6a7b8c9d0e1f2")  # a hex hash (no capitals): a commit, kept


def test_the_harness_settings_and_handles_a_call_names_are_not_the_works_names() -> None:
    names = ranked(
        [
            user("Find where parse_config is used, then restart the dev server."),
            assistant(
                "",
                call(
                    "Grep",
                    {"pattern": "parse_config", "path": "src", "output_mode": "files_with_matches"},
                    "src/app/loader.py\nsrc/app/cli_main.py",
                ),
            ),
            assistant(
                "", call("Bash", {"command": "npm run dev", "run_in_background": True}, "Running with ID: bash_5")
            ),
            assistant("", call("BashOutput", {"bash_id": "bash_5"}, "ready on http://localhost:3000")),
            assistant(
                "",
                call(
                    "Task",
                    {"subagent_type": "general-purpose", "model": "claude_opus", "prompt": "Review loader.py"},
                    "No issues in loader.py.",
                ),
            ),
            assistant("", call("exec_command", {"cmd": "make serve", "sandbox_permissions": "require_escalated"}, "")),
            assistant("The server runs as bash_5; `parse_config` is used in loader.py and cli_main.py."),
        ]
    )
    for harness in ("files_with_matches", "bash_5", "general-purpose", "claude_opus", "require_escalated"):
        assert harness not in names, harness
    assert "parse_config" in names
    assert any(name.endswith("loader.py") for name in names)


def test_paths_cut_by_a_clip_or_an_ellipsis_are_not_listed() -> None:
    names = ranked(
        [
            user("Why does send fail?"),
            bash("grep -rn send /testbed/requests", "/testbed/requests/adapters.py:10: def send(self):"),
            bash("tail -c 60 log.txt", "Traceback (most recent call last): /testbed/requests/sessions.p…"),
            bash("head -c 60 log2.txt", "/testbed/requests/adapters.p"),
        ]
    )
    assert "/testbed/requests/adapters.py" in names
    assert "/testbed/requests/adapters.p" not in names and "/testbed/requests/sessions.p" not in names


def test_a_name_where_the_harness_cut_an_output_short_is_not_listed() -> None:
    # mini-swe-agent shows an output's head and tail around the elided middle; SWE-agent and
    # OpenHands clip a long file view.
    elided = (
        "<returncode>0</returncode>\n<output_head>\nResourceWarning: unclosed <socket family=AddressFamily.AF_INET>"
        "\nResourceWarning: unclosed <socket family=AddressFa\n</output_head>\n<elided_chars>\n4405 characters "
        "elided\n</elided_chars>\n<output_tail>\nOK\n</output_tail>"
    )
    clipped = (
        "def build_response(req):\n    return make_respo<response clipped><NOTE>Only part of the file is shown.</NOTE>"
    )
    names = ranked(
        [
            user("Why the socket warnings?"),
            bash("python -m pytest test_requests.py", elided),
            assistant(
                "", call("str_replace_editor", {"command": "view", "path": "/testbed/requests/adapters.py"}, clipped)
            ),
        ]
    )
    assert "AddressFamily.AF_INET" in names and "build_response" in names
    assert "AddressFa" not in names and "make_respo" not in names, names


def test_a_command_an_output_puts_in_backticks_is_not_a_file() -> None:
    # OpenHands answers each command with the command itself in backticks.
    names = ranked(
        [
            user("Make a todo app."),
            bash("mkdir -p /workspace/todo-app", "Command `mkdir -p /workspace/todo-app` executed with exit code 0."),
            bash("cat README.md", "Call `python manage.py migrate`, then `app/settings.py` holds `DEBUG`."),
        ]
    )
    assert not [n for n in names if " " in n], names
    assert "/workspace/todo-app" in names and "app/settings.py" in names


def test_the_rest_of_an_address_after_its_at_sign_is_not_a_name() -> None:
    page = (
        '<script src="https://unpkg.com/vue@3/dist/vue.global.js"></script>\n'
        '<script src="/static/js/app.js"></script>\nMail ops@example.org.'
    )
    names = ranked(
        [
            user("Add Vue."),
            assistant("", call("Write", {"file_path": "/app/index.html", "content": page}, "ok")),
            bash("npm ls vue", "vue@3.4.0 deduped"),
        ],
        edited={"/app/index.html"},
    )
    assert "3/dist/vue.global.js" not in names and "example.org" not in names, names
    assert "/static/js/app.js" in names and not [n for n in names if n.startswith("3.")], names


def test_sentences_joined_without_a_space_are_not_dotted_names() -> None:
    thought = (
        "The server returned nothing at this page.Upon revisiting the main page, a form shows. It simply "
        "returns a static message.Next, I'll check the script.I'll also read parser.Parser and call time.Now()."
    )
    names = ranked([user("Solve the challenge."), assistant(thought, call("Bash", {"command": "ls"}, "x"))])
    assert not {"page.Upon", "message.Next", "script.I"} & set(names), names
    assert "parser.Parser" in names and "time.Now" in names


def test_an_expression_in_backticks_gives_its_names_not_itself() -> None:
    thought = (
        "So `Module(test_file.py)` has `Session` as parent, `Package` is made with "
        "`fspath=.../testmod/__init__.py`, and `isinitpath(x.py)` is true; `perform_collect()` runs."
    )
    names = ranked(
        [user("Why is the package collected twice?"), assistant(thought, call("Bash", {"command": "ls"}, "x"))]
    )
    assert not [n for n in names if "(" in n.removesuffix("()") or "=" in n], names
    assert {"test_file.py", "x.py", "perform_collect()"} <= set(names), names


def test_compiled_bytecode_a_listing_shows_is_not_listed() -> None:
    listing = "src/_pytest/main.py\nsrc/_pytest/__pycache__/main.cpython-39.pyc\nsrc/_pytest/nodes.py"
    names = ranked(
        [
            user("Fix the collection."),
            bash("find src/_pytest -name 'main*'", listing),
            bash("cat src/_pytest/main.py src/_pytest/nodes.py", "x"),
        ]
    )
    assert "src/_pytest/main.py" in names
    assert not [n for n in names if "__pycache__" in n], names


def test_the_names_of_stack_frames_in_someone_elses_code_are_not_listed() -> None:
    build = (
        "SyntaxError: Unexpected token\n"
        "    at TypeScriptParserMixin.parseExprAtom (/app/node_modules/@babel/parser/lib/index.js:4792:19)\n"
        "    at TypeScriptParserMixin.parseMaybeUnary (/app/node_modules/@babel/parser/lib/index.js:4801:7)\n"
        "    at renderRoster (/app/src/RosterView.tsx:12:3)\n"
    )
    trace = (
        "Traceback (most recent call last):\n"
        '  File "/repo/app/views.py", line 3, in load_roster\n    fetch_players(team)\n'
        '  File "/usr/lib/python3.10/socket.py", line 9, in create_connection\n    sock.connect(sa)\n'
        "ConnectionRefusedError: refused"
    )
    history = [user("Fix the roster page.")] + [bash("npm run build", build), bash("python app.py", trace)] * 3
    names = ranked(history)
    assert not [n for n in names if "Mixin" in n or n in ("create_connection", "sock.connect")], names
    assert {"renderRoster", "load_roster", "fetch_players"} <= set(names), names


def test_the_jvms_and_dotnets_own_frames_are_not_listed_and_a_frame_file_counts_once() -> None:
    runner = "\n".join(f"\tat org.junit.engine.NodeTestTask.execute(NodeTestTask.java:{100 + i})" for i in range(30))
    runtime = "\n".join(f"\tat java.base/java.util.ArrayList.forEach(ArrayList.java:{1500 + i})" for i in range(10))
    trace = (
        "org.opentest4j.AssertionFailedError: expected: <2> but was: <3>\n"
        "\tat com.acme.orders.OrderServiceTest.findsOpenOrders(OrderServiceTest.java:42)\n"
        f"{runner}\n{runtime}\n"
        "   at System.Linq.Enumerable.First[TSource](IEnumerable`1 source)\n"
        "   at Acme.Orders.OrderController.GetOrder(Int32 id) in C:\\src\\OrderController.cs:line 18\n"
    )
    source = "public class OrderService {\n  public List<Order> findOpenOrders(Customer c) {\n"
    names = ranked(
        [
            user("Fix the failing order test."),
            bash("mvn test", trace),
            assistant("", call("Read", {"file_path": "/repo/src/OrderService.java"}, source)),
        ]
    )
    assert not [n for n in names if n.startswith(("java.", "System.")) or n == "ArrayList.java"], names
    assert {"OrderServiceTest.java", "com.acme.orders.OrderServiceTest.findsOpenOrders"} <= set(names), names
    assert "Acme.Orders.OrderController.GetOrder" in names, names
    # Thirty frames of one file are one file shown once: it ranks behind the file the agent read.
    assert names.index("/repo/src/OrderService.java") < names.index("NodeTestTask.java"), names
    # Once a source the session shows declares the project's package, a frame outside it is a library's.
    declared = "1→package com.acme.orders;\n2→\n" + source
    names = ranked(
        [
            user("Fix the failing order test."),
            bash("mvn test", trace),
            assistant("", call("Read", {"file_path": "/repo/src/OrderService.java"}, declared)),
        ]
    )
    assert not [n for n in names if "NodeTestTask" in n or n.startswith("org.junit")], names
    assert {"OrderServiceTest.java", "com.acme.orders.OrderServiceTest.findsOpenOrders"} <= set(names), names


def test_a_scoped_package_is_a_name_but_a_mail_address_is_not() -> None:
    names = ranked(
        [
            user("Use react-query for the roster; mail ops@example.org when done."),
            bash("npm install @tanstack/react-query", "added 2 packages"),
            bash(
                "grep -rn @tanstack/react-query src",
                "src/main.tsx:3:import { QueryClient } from '@tanstack/react-query'",
            ),
        ]
    )
    assert "@tanstack/react-query" in names, names
    assert not [n for n in names if "example" in n], names


def test_code_printed_as_an_escaped_string_gives_its_names_without_the_escapes() -> None:
    # A tool printed a Go file as a JSON string: `\n\t` before each indented line.
    printed = '{"content": "var (\\n\\teventPool = sync.Pool{\\n\\t\\tNew: newBatch,\\n\\t})\\n"}'
    names = ranked(
        [
            user("Why does the watcher leak?"),
            bash("gh api repos/o/r/contents/watcher.go", printed),
            bash("grep -rn 'eventPool\\|newBatch' internal/watcher", "internal/watcher/watcher.go:9: eventPool"),
            bash("cat 'search_leads\\tests\\test_leads.py'", "x"),
        ]
    )
    assert "eventPool" in names and "newBatch" in names, names
    assert not [n for n in names if n in ("teventPool", "tNew")], names
    assert "search_leads\\tests\\test_leads.py" in names and "ests" not in names, names


def test_import_specifiers_quoted_strings_and_regex_literals_are_not_files() -> None:
    source = (
        "import { api } from './api'\n"
        "import { Model } from '../../src/models'\n"
        "import { store } from '../store'\n"
        "const PERMISSION = /permission/i\n"
        'export const load = () => api.get("/v1/users")\n'
    )
    names = ranked(
        [
            user("Why does the permission screen hang?"),
            assistant("", call("Read", {"file_path": "/repo/src/screens/permission.ts"}, source)),
            assistant("The store it imports, `../store`, holds the flag.", call("Grep", {"pattern": "from '"}, "x")),
        ]
    )
    assert "/repo/src/screens/permission.ts" in names
    # A specifier only code wrote is the import's; one the agent named in words stays.
    assert "./api" not in names and "../../src/models" not in names and "../store" in names, names
    assert not [n for n in names if "'" in n or '"' in n or n.startswith("/permission/")], names


def test_a_search_context_line_number_is_not_part_of_the_file() -> None:
    output = (
        "src/store/user/actions.js-48-  commit(x)\nsrc/store/user/actions.js:49:  dispatch(y)\n"
        "src/store/user/getters.js-1-export const isOwner = (state) => state.owner\n"
        "src/store/user/getters.js:2:  dispatch(z)"
    )
    names = ranked([user("Find the commits."), bash("grep -rn -C1 dispatch src/store", output)])
    assert {"src/store/user/actions.js", "src/store/user/getters.js"} <= set(names), names
    # The context line's first word is glued to its number: `getters.js-1-export`.
    assert not [n for n in names if n.endswith("-48") or "-1-" in n], names


def test_shapes_that_read_as_names_but_are_none() -> None:
    listing = '{"stdout": "total 8\\ndrwxr-xr-x 2 u u 4096 app\\n-rw-r--r-- 1 u u 12 mix.exs"}'
    names = ranked(
        [
            user("Why is the modal cut off? т.к. it worked yesterday, z.B. on the roster page."),
            bash("ls -la", listing),
            bash("grep -n static config/config.exs", "17:priv/static/assets\n18:priv/static/images"),
            assistant("Line 17 sets it.", call("Read", {"file_path": "config/config.exs"}, 'static: "priv/static"')),
            bash("grep -rn className src", 'src/Modal.tsx:3: <div className="max-h-[80vh] md:min-w-[12rem] p-4">'),
            assistant(
                "The agents match `/agent-[a-zA-Z0-9]+/`; the key was `[redacted]`; the template says `[Vue/React]`.",
                call("Read", {}, "x"),
            ),
            bash("cat C:\\Users\\me\\notes.txt", "cat: 'C:Usersmenotes.txt': No such file or directory"),
            assistant("", call("Read", {"file_path": "x.h"}, "int x;")),
            bash(
                "ls 'app/tournaments/pga/[year]/course/[courseId]/[category]'",
                "app/tournaments/pga/[year]/course/[courseId]/[category]/page.tsx",
            ),
        ]
    )
    # A file mode the JSON's `\n` escape glued an `n` to; a path after `grep -n`'s line number.
    assert "ndrwxr-xr-x" not in names and "config/config.exs" in names, names
    assert not [n for n in names if n.startswith(("17:", "18:"))], names
    # A utility class's arbitrary value; a regular expression; abbreviations; a redacted secret.
    assert not {"max-h", "md:min-w", "min-w", "т.к", "z.B", "[redacted]", "[Vue/React]"} & set(names), names
    assert "x.h" in names, names  # one letter, a dot, one letter: a file when the letter is a file type
    # A Windows path whose backslashes the shell ate names no file.
    assert "C:Usersmenotes.txt" not in names, names
    assert not [n for n in names if "[a-zA-Z0-9]" in n], names
    # A directory named `[category]` keeps its closing bracket.
    assert "app/tournaments/pga/[year]/course/[courseId]/[category]/page.tsx" in names, names
    assert not [n for n in names if n.endswith("[category")], names


def test_one_file_written_from_several_directories_is_one_entry() -> None:
    names = ranked(
        [
            user("Make the cookie tests pass."),
            bash("cd / && python -m pytest ./testbed/test_requests.py", "1 failed"),
            bash("cd /testbed/requests && python ../testbed/test_requests.py", "1 failed"),
            assistant("", call("Read", {"file_path": "/testbed/test_requests.py"}, "def test_cookie(): ...")),
            bash("grep -n cookie test_requests.py", "test_requests.py:1:def test_cookie(): ..."),
        ]
    )
    assert [n for n in names if n.endswith("test_requests.py")] == ["/testbed/test_requests.py"], names


def test_a_windows_path_written_from_the_working_directory_keeps_its_directories() -> None:
    listing = "hr_recruitment\\models\\applicant_fields.py\nhr_recruitment\\views\\applicant_views.xml\n"
    names = ranked(
        [
            user("Add a quiz field to the applicant form."),
            bash("dir /s /b hr_recruitment", listing),
            assistant(
                "", call("Read", {"file_path": "C:\\odoo\\addons\\hr_recruitment\\models\\applicant_fields.py"}, "x")
            ),
            bash("python -c \"print('a.txt\\nb.txt')\"", "a.txt\nb.txt"),
            assistant("Next: .\\deploy.ps1 and hr_recruitment\\views\\applicant_views.xml."),
        ],
        edited={"C:\\odoo\\addons\\hr_recruitment\\views\\applicant_views.xml"},
    )
    files = {n for n in names if "applicant" in n or "deploy" in n}
    # One entry for the file read, by its whole path; the edited file not at all (the summary lists
    # it apart); the script run from here whole.
    assert files == {"C:\\odoo\\addons\\hr_recruitment\\models\\applicant_fields.py", ".\\deploy.ps1"}, names
    assert not [n for n in names if "\\" in n and ".txt" in n], names  # an escaped newline joins no files


def test_a_windows_path_through_a_folder_with_spaces_is_one_path() -> None:
    plan = "C:\\Users\\me\\OneDrive - Contoso\\16 - Notes\\hr\\plan.md"
    names = ranked(
        [
            user("Summarize the hiring plan."),
            bash("dir /s /b", plan + "\nC:\\Users\\me\\file.txt and then some words"),
            assistant("", call("Read", {"file_path": plan}, "# Plan")),
        ]
    )
    assert plan in names and "C:\\Users\\me\\file.txt" in names, names
    assert not [n for n in names if n != plan and ("Notes" in n or n.endswith("OneDrive"))], names


def test_a_posix_path_through_folders_with_spaces_is_one_path() -> None:
    settings = "/Users/me/Library/Application Support/Code/User/settings.json"
    quoted = "/home/me/my project/src/app.py"
    processes = (
        "me  812 /Applications/Figma.app/Contents/Frameworks/Figma Helper.app/Contents/MacOS/Figma --type=gpu\n"
        "me  813 /Users/me/Library/Application Support/Figma/DesktopProfile/v37 --no-sandbox\n"
    )
    names = ranked(
        [
            user("Fix the crash in app.py, then turn off format-on-save in my editor."),
            bash("ps aux | grep -i figma", processes),
            bash(f'python "{quoted}"', "Traceback: ZeroDivisionError"),
            bash('echo "/tmp is full"', "/tmp is full"),
            bash("cp /srv/a.txt b/c.txt", ""),
            bash(
                "echo $PATH",
                "/usr/bin:/c/Program Files/nodejs:/c/Users/me/AppData/Local/Microsoft/WindowsApps:/c/Program Files (x86)/Print Conductor:/c/Windows",
            ),
            bash(
                "tail access.log",
                '127.0.0.1 - "GET /docs HTTP/1.1" 200\n127.0.0.1 - "POST /analyze/prompt HTTP/1.1" 200',
            ),
            assistant("", call("Read", {"file_path": settings}, '{"editor.formatOnSave": true}')),
        ]
    )
    assert settings in names and quoted in names, names
    # A process listing's applications and the folders on a PATH are the system's: not listed,
    # whole or in pieces.
    assert not [n for n in names if "Figma" in n or n.startswith("Support") or n.endswith("Application")], names
    assert not [n for n in names if "Program" in n or "Files" in n or "Windows" in n or n.startswith(":")], names
    # Words in quotes, two paths a lowercase word follows, and a request line stay what they were.
    assert not [n for n in names if " " in n and n not in (settings, quoted)], names


def test_a_dotted_name_the_code_calls_is_a_member_whatever_its_last_part_looks_like() -> None:
    source = "func (w *Watcher) Add() {\n\tw.mu.Lock()\n\tdefer w.mu.Unlock()\n}\nconst data = await response.json();\n"
    history = stored(
        [
            user("Why does the watcher deadlock? It also reads package.json."),
            assistant("", call("Read", {"file_path": "/repo/watcher.go"}, source)),
            bash("python -c 'import threading; threading.Lock()'", ""),
            assistant("`w.mu.Lock` is taken twice; response.json is parsed once. See package.json."),
        ]
    )
    kinds = dict(working_set(history, set()).ranked)
    for member in ("w.mu.Lock", "response.json", "threading.Lock"):
        assert kinds.get(member) == "name", (member, kinds)
    assert kinds.get("package.json") == "file", kinds


def test_module_paths_keep_their_at_sign_and_devices_are_no_files() -> None:
    source = (
        "import AppAvatar from '@/components/Avatars/AppAvatar.vue'\n"
        "import Button from '@jetbrains/ring-ui/components/button/button'\n"
        "import { invoke } from '@tauri-apps/api/core'\n"
    )
    names = ranked(
        [
            user("Why is the avatar blank? See @docs/avatars.md; mail me at dev@example.org/today."),
            assistant("", call("Read", {"file_path": "/repo/src/pages/Profile.vue"}, source)),
            bash("npm test 2>/dev/null | grep AppAvatar", "src/pages/Profile.vue:1: AppAvatar"),
        ]
    )
    # `@/` is the project's alias and `@scope/…` a package: without the `@` they read as paths
    # from the file system's root (`/components/…`) or as the project's own (`jetbrains/…`).
    assert {
        "@/components/Avatars/AppAvatar.vue",
        "@jetbrains/ring-ui/components/button/button",
        "@tauri-apps/api/core",
    } <= set(names), names
    assert not [n for n in names if n.startswith(("/components", "jetbrains/", "tauri-apps/"))], names
    # Claude Code's user points at a file with `@`: the file is `docs/avatars.md`.
    assert "docs/avatars.md" in names and "@docs/avatars.md" not in names, names
    assert "/dev/null" not in names and not [n for n in names if "example" in n], names


def test_product_names_and_alternatives_in_plain_words_are_not_names() -> None:
    names = ranked(
        [
            user("Deploy it like on GitHub; pick green/blue/red for the theme."),
            assistant("JavaScript and TypeScript both work; a ValueError means the config is wrong."),
        ]
    )
    assert not {"GitHub", "JavaScript", "TypeScript", "green/blue/red"} & set(names), names
    assert "ValueError" in names
    # A product named like a script is one in words; a file so named is one where a call reads it.
    names = ranked(
        [
            user("The charts use D3.js on Node.js; App.js draws them."),
            assistant("", call("Read", {"file_path": "/repo/src/App.js"}, "export default function App() {}")),
        ]
    )
    assert not {"D3.js", "Node.js"} & set(names), names
    assert "/repo/src/App.js" in names, names


def test_words_and_sizes_a_slash_joins_in_a_document_are_not_paths_unless_files_lie_under_them() -> None:
    plan = (
        "# Guide\nPick a size (Small/Medium/Large) and a framework (Vue/React/Angular); fonts 24pt/18pt/14pt.\n"
        "Components live in src/components/layouts and hooks in Shared/store/useGlobalValue.\n"
    )
    names = ranked(
        [
            user("Write the style guide."),
            assistant("", call("Write", {"file_path": "/repo/docs/guide.md", "content": plan}, "File created")),
            bash("ls -R /repo/src", "/repo/src/components/layouts/Main.vue\n/repo/Shared/store/useGlobalValue.ts"),
        ]
    )
    assert not {"Small/Medium/Large", "Vue/React/Angular", "24pt/18pt/14pt"} & set(names), names
    # A directory the session's files lie under, and an import of a file without its extension, stay.
    assert "src/components/layouts" in names and "Shared/store/useGlobalValue" in names, names


# -- runs and bullets -------------------------------------------------------------------------------


def test_a_long_run_of_generated_names_is_one_entry_but_one_the_agent_named_stays() -> None:
    body = "\n".join(f"def func_6_{i}(x):\n    return x + {i}" for i in range(151))
    names = ranked(
        [
            user("Which generated function overflows?"),
            assistant("", call("Read", {"file_path": "/repo/gen/funcs.py"}, body)),
            assistant("It is `func_6_17`: it returns past the limit."),
        ]
    )
    assert f"func_6_0{RUN_MARK}func_6_150" in names
    assert "func_6_17" in names
    assert not [n for n in names if n.startswith("func_6_") and RUN_MARK not in n and n != "func_6_17"], names


def test_files_of_one_directory_share_it_and_read_back_whole() -> None:
    ws = WorkingSet(
        [
            ("/repo/src/app/a.py", "file"),
            ("/repo/src/app/b.py", "file"),
            ("parse_rows", "name"),
            ("/repo/docs/guide.md", "file"),
            ("/repo/src/app/c.py", "file"),
        ]
    )
    bullets = fit_working_set(ws, COUNTER, 1_000, "/repo/")
    named = next(b for b in bullets if b.startswith("Files named: "))
    assert named == "Files named: src/app/{a.py, b.py, c.py}, docs/guide.md"
    assert listed(named) == [
        ("src/app/a.py", "file"),
        ("src/app/b.py", "file"),
        ("src/app/c.py", "file"),
        ("docs/guide.md", "file"),
    ]
    assert sum(COUNTER.count(b) for b in bullets) <= 1_000


def test_paths_that_share_a_long_directory_write_it_once_whatever_the_separator() -> None:
    downloads = "C:\\Users\\dev\\Downloads\\docs-main\\docs-main\\"
    items = [
        downloads + ".claude\\scripts\\README.md",
        "/home/dev/shop/src/cart/total.py",
        downloads + ".claude\\enterprise\\CLAUDE.md",
        "/home/dev/shop/tests/test_total.py",
        "notes.md",
        downloads + "README.md",
    ]
    bullets = fit_working_set(WorkingSet([(item, "file") for item in items]), COUNTER, 1_000)
    assert bullets == [
        "Files named: " + downloads + "{.claude\\scripts\\README.md, .claude\\enterprise\\CLAUDE.md, README.md}, "
        "/home/dev/shop/{src/cart/total.py, tests/test_total.py}, notes.md"
    ]
    # Read back, every path is whole again; the group stands where its first path ranked.
    assert sorted(name for name, _ in listed(bullets[0]) or []) == sorted(items)
    # The spelled-out list costs more than the grouped one.
    assert COUNTER.count(bullets[0]) < COUNTER.count("Files named: " + ", ".join(items))


def test_a_short_shared_directory_or_a_name_with_a_space_is_not_grouped() -> None:
    items = ["/repo/a.py", "/repo/lib/b.py", "/data/My Files/x.csv", "/data/My Files/y.csv"]
    (bullet,) = fit_working_set(WorkingSet([(item, "file") for item in items]), COUNTER, 1_000)
    assert bullet == "Files named: " + ", ".join(items)
    assert [name for name, _ in listed(bullet) or []] == items


# -- paths relative to the root, consistently ------------------------------------------------------


def test_the_root_is_where_the_agents_relative_paths_resolve_so_every_relative_path_reads_from_it() -> None:
    home = "/home/dev/shop/"
    head = stored(
        [
            user("Make the cart total include tax."),
            assistant("", call("Read", {"file_path": home + "src/cart/total.py"}, "def total(items): ...")),
            bash("cat src/cart/tax.py src/lib/money.py", "RATE = 0.2\nclass Money: ..."),
            assistant("", call("Read", {"file_path": home + "src/cart/tax.py"}, "RATE = 0.2")),
            assistant("", call("Read", {"file_path": home + "src/lib/money.py"}, "class Money: ...")),
            assistant(
                "", call("Edit", {"file_path": home + "src/cart/total.py", "old_string": "a", "new_string": "b"})
            ),
            assistant("", call("Edit", {"file_path": home + "src/cart/view.py", "old_string": "a", "new_string": "b"})),
        ]
    )
    request = SummaryRequest(head=head, previous=None, counter=COUNTER, budget_tokens=4_000)
    summary = parse_summary(ExtractiveSummarizer().summarize_sync(request).text)
    # The edited files live in src/cart/, but the agent works from the shop: its `src/lib/money.py`
    # means the shop's, so the root is the shop and that relative path reads right from it.
    assert any(b.startswith(f"Project root: `{home}`") for b in summary[CRITICAL]), summary[CRITICAL]
    named = [name for b in summary[FILES] for name, _ in (listed(b) or [])]
    assert "src/lib/money.py" in named and not [n for n in named if n.startswith(home)], named
    # Edited files too: relative to the root, which the pins read back to the exact path.
    assert any(b.startswith("src/cart/view.py — ") for b in summary[FILES])
    assert not [b for b in summary[FILES] if home in b]
    assert names_file(summary, home + "src/cart/view.py")


def test_a_name_a_longer_listed_name_spells_out_is_left_out_and_its_room_goes_to_the_next() -> None:
    ranked = [
        ("thread_key", "name"),
        ("state.thread_key", "name"),
        ("render", "name"),
        ("Repo::render", "name"),
        ("flush()", "name"),
        ("flush", "name"),
        ("getAll()", "name"),
        ("Service.getAll()", "name"),
        ("close()", "name"),
    ] + [(f"helper_{chr(97 + i)}", "name") for i in range(26)]
    whole = fit_working_set(WorkingSet(ranked), COUNTER, 2_000)
    listed_names = [name for bullet in whole for name, _ in listed(bullet) or []]
    assert "state.thread_key" in listed_names and "thread_key" not in listed_names
    assert "Repo::render" in listed_names and "render" not in listed_names
    assert "flush()" in listed_names and "flush" not in listed_names
    assert "Service.getAll()" in listed_names and "getAll()" not in listed_names
    assert "close()" in listed_names  # nothing else holds it
    # Within a budget the spelled-out names would fill, the room they leave takes the next names.
    budget = COUNTER.count("Identifiers: " + ", ".join(name for name, _ in ranked[:17])) + 2
    tight = [
        name for bullet in fit_working_set(WorkingSet(ranked), COUNTER, budget) for name, _ in listed(bullet) or []
    ]
    assert "helper_j" in tight, tight


def test_a_directory_a_listed_file_lies_in_is_not_listed_again() -> None:
    ranked = [
        ("/repo/src/app", "read"),
        ("/repo/src/app/main.py", "read"),
        ("/repo/docs", "file"),
        ("/repo/docs/guide.md", "file"),
        ("/repo/assets", "file"),
    ]
    bullets = fit_working_set(WorkingSet(ranked), COUNTER, 1_000, "/repo/")
    written = [name for bullet in bullets for name, _ in listed(bullet) or []]
    assert "src/app/main.py" in written and "docs/guide.md" in written
    assert "src/app" not in written and "docs" not in written
    assert "assets" in written  # no listed file lies in it
