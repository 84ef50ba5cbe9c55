"""The `clawgate` command line: every subcommand and option. argparse alone, so that
`clawgate --help` answers at once; what a command needs is imported when it runs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from runtime.store.keys import check_session_id

_N = TypeVar("_N", int, float)
DEFAULT_LINES = 20
DECISION_TIMEOUT = 15.0  # seconds `approvals approve|reject` waits for a worker


class _Parser(argparse.ArgumentParser):
    """A bad argument is one line (and exit 2), like a bad setting: bot/errors.py."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"clawgate: {message} (see {self.prog} --help)\n")


class _Version(argparse.Action):
    """`--version`, read from the installed package only when asked (keeps --help fast)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import version  # noqa: PLC0415

        print(f"clawgate {version('clawgate')}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="clawgate",
        description="A team AI assistant for Slack and Feishu that never runs a risky tool "
        "call without a human. Settings come from the environment and ./.env "
        "(docs/configuration.md).",
        epilog="clawgate <command> --help shows a command's options.",
    )
    parser.add_argument("--version", action=_Version, nargs=0, help="print the version and exit")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an unexpected error"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    chat = sub.add_parser("chat", help="chat with the assistant in this terminal")
    chat.add_argument(
        "--session",
        type=_session_name,
        default="local",
        help="session name (default: local; no spaces or braces, at most 192 characters)",
    )

    serve = sub.add_parser(
        "serve", help="serve the chat platforms over HTTP, with a worker in process"
    )
    serve.add_argument("--host", help="the address to listen on (wins over CLAWGATE_HOST)")
    serve.add_argument("--port", type=_port, help="the port to listen on (wins over CLAWGATE_PORT)")
    worker = sub.add_parser(
        "worker", help="an extra worker: takes queued work, no HTTP (needs REDIS_URL)"
    )
    for command in (serve, worker):
        command.add_argument(
            "--workdir", help="where tools work and files land (wins over CLAWGATE_WORKDIR)"
        )

    sub.add_parser(
        "selftest",
        help="a live run of the configured model and platform: a tool call, an approval, "
        "the file it wrote (in a throwaway work dir)",
    )
    sub.add_parser(
        "doctor",
        help="check this machine is ready: settings, Redis, the model, Slack, Feishu, the port, "
        "the policy, the sandbox, admins",
    )
    completion = sub.add_parser(
        "completion",
        help="print a shell completion script",
        description="e.g. clawgate completion bash > ~/.local/share/bash-completion/completions/"
        "clawgate, clawgate completion zsh > ~/.zfunc/_clawgate, or clawgate completion fish > "
        "~/.config/fish/completions/clawgate.fish",
    )
    completion.add_argument("shell", choices=["bash", "zsh", "tcsh", "fish"])

    add_approvals_parser(sub)
    add_console_parser(sub)
    add_audit_parser(sub)
    add_policy_parser(sub)
    add_trace_parser(sub)
    add_onboarding_parsers(sub)

    bench = sub.add_parser("bench", help="measure performance")
    bench.add_argument("target", choices=["runtime", "approval", "ingest"], help="what to measure")
    bench.add_argument("--calls", type=int, default=20_000, help="tool calls to time (runtime)")
    bench.add_argument(
        "--turns",
        type=_positive(int),
        default=None,
        help="turns or round trips to time (default 500; ingest: per thread, default 20)",
    )
    bench.add_argument(
        "--bash-calls",
        type=_positive(int),
        default=200,
        help="runtime: bash calls to time, uncontained and in the sandbox (default 200)",
    )
    bench.add_argument(
        "--rates",
        type=_rates,
        default=[100, 250, 500, 750, 1000, 1500],
        help="ingest: requests per second to step through (default 100,250,500,750,1000,1500)",
    )
    bench.add_argument(
        "--duration",
        type=_positive(float),
        default=3.0,
        help="ingest: seconds per rate (default 3)",
    )
    bench.add_argument(
        "--split",
        action="store_true",
        help="ingest: serve without its worker (CLAWGATE_WORKER_MODE=none) + one worker",
    )
    bench.add_argument(
        "--threads",
        type=_positive(int),
        default=50,
        help="ingest: concurrent Slack threads / Feishu chats for the end-to-end test (default 50)",
    )
    bench.add_argument(
        "--history",
        type=_counts,
        default=None,
        help="approval: prior messages in a session, one measure each (default 10,100,1000,10000;"
        " runtime --model-server: 10,400)",
    )
    bench.add_argument(
        "--peers",
        action="store_true",
        help="approval: the same round in the OpenAI Agents SDK and LangGraph, side by side "
        '(needs REDIS_URL and pip install "clawgate[peers]")',
    )
    bench.add_argument(
        "--model-server",
        action="store_true",
        help="runtime: time turns on the real openai client against a local OpenAI-compatible "
        "fake the bench starts (CPU, Redis round trips, turns/s per turn) instead; ingest: the "
        "server under test uses the openai provider against such a fake in its own process",
    )
    bench.add_argument(
        "--floor",
        action="store_true",
        help="ingest: the floor app (bot/bench/floor.py: the least code doing the same durable "
        "Slack turn) instead of clawgate, with the fake model",
    )
    bench.add_argument(
        "--compare-floor",
        action="store_true",
        help="ingest: clawgate with the fake model, then the floor app under the same load: "
        "CPU per turn clawgate/floor and Redis commands per turn of both",
    )
    bench.add_argument(
        "--rounds",
        type=_positive(int),
        default=1,
        help="ingest --compare-floor: this many rounds of both in turn, each round's CPU "
        "ratio and their median (default 1)",
    )
    bench.add_argument(
        "--json", action="store_true", help="print one JSON document of the figures (every bench)"
    )
    bench.add_argument(
        "--platform",
        choices=["slack", "feishu"],
        default="slack",
        help="ingest: whose signed events to send, to a fake of whose API (default slack)",
    )
    bench.add_argument(
        "--workers",
        type=_worker_counts,
        default=None,
        help="ingest: throughput of this many `clawgate worker` processes, each count in turn "
        "(e.g. 1,2), and how ingest spread over the inbox partitions",
    )
    bench.add_argument(
        "--backlog",
        type=_positive(int),
        default=None,
        help="ingest --workers: events queued before the workers start (default 2000)",
    )
    return parser


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise argparse.ArgumentTypeError(f"not a port (1-65535): {text!r}")
    return int(text)


def _worker_counts(text: str) -> list[int]:
    counts = [part.strip() for part in text.split(",") if part.strip()]
    if not counts or not all(c.isdigit() and 0 < int(c) <= 64 for c in counts):
        raise argparse.ArgumentTypeError(f"expected worker counts from 1 to 64 like 1,2: {text!r}")
    return [int(c) for c in counts]


def _session_name(name: str) -> str:
    try:
        check_session_id(f"console:{name}")  # the terminal's session ids carry this prefix
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{name!r}: 1-192 characters, no spaces or braces"
        ) from None
    return name


def _positive(kind: Callable[[str], _N]) -> Callable[[str], _N]:
    def parse(text: str) -> _N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
        return value

    return parse


def _rates(text: str) -> list[int]:
    parse = _positive(int)
    rates = [parse(item.strip()) for item in text.split(",") if item.strip()]
    if not rates:
        raise argparse.ArgumentTypeError("expected a comma-separated list of rates, like 100,500")
    return rates


def _counts(text: str) -> list[int]:
    counts = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        if not item.isdigit():
            raise argparse.ArgumentTypeError(f"not a count: {item!r}")
        counts.append(int(item))
    if not counts:
        raise argparse.ArgumentTypeError("expected a comma-separated list, like 10,100,1000,10000")
    return counts


def add_approvals_parser(sub: Any) -> None:
    """`sub`: the `clawgate` parser's subparsers."""
    approvals = sub.add_parser("approvals", help="list and decide approvals (needs REDIS_URL)")
    verbs = approvals.add_subparsers(dest="verb", required=True)
    listing = verbs.add_parser("list", help="open approvals (pending or executing)")
    listing.add_argument("--json", action="store_true", help="a JSON array")
    listing.add_argument(
        "--conversation",
        metavar="REF",
        help="only these: a conversation id or a prefix of one, like slack:T123",
    )
    listing.add_argument("--status", choices=["pending", "executing"], help="only these")
    show = verbs.add_parser("show", help="one approval with its audit trail")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="one JSON object")
    approve = verbs.add_parser(
        "approve", help="approve as the operator; a worker runs the call and resumes the run"
    )
    approve.add_argument("id")
    approve.add_argument(
        "--always", action="store_true", help="also grant calls like it in its conversation"
    )
    reject = verbs.add_parser("reject", help="reject as the operator")
    reject.add_argument("id")
    reject.add_argument("reason", nargs="*", help="why (told to the model)")
    for decide in (approve, reject):
        decide.add_argument(
            "--wait",
            action="store_true",
            help="follow the outcome until it ends: ran, answer posted, failed, rejected",
        )
        decide.add_argument(
            "--timeout",
            type=_positive(float),
            default=DECISION_TIMEOUT,
            metavar="S",
            help=f"seconds to wait for a worker (and each step with --wait; "
            f"default {DECISION_TIMEOUT:g}); exit 3 after",
        )
    add_stats_verb(verbs)


def add_console_parser(sub: Any) -> None:
    """`sub`: the `clawgate` parser's subparsers."""
    console = sub.add_parser("console", help="web console sign-in links and sessions")
    verbs = console.add_subparsers(dest="verb", required=True)
    link = verbs.add_parser("link", help="print a one-time sign-in link for one person")
    link.add_argument(
        "--as",
        dest="person",
        required=True,
        metavar="PLATFORM:USER",
        help="whose link: a chat identity like slack:U123 or feishu:ou_abc",
    )
    sessions = verbs.add_parser("sessions", help="signed-in console sessions")
    actions = sessions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="live sessions, oldest first")
    listing.add_argument("--json", action="store_true", help="a JSON array")
    revoke = actions.add_parser("revoke", help="end sessions now")
    revoke.add_argument("what", help="a session id (as listed) or a person, like slack:U123")


def add_stats_verb(verbs: Any) -> None:
    """`clawgate approvals stats`; `verbs`: the approvals parser's subparsers."""
    stats = verbs.add_parser(
        "stats",
        help="how requests went per signature and conversation: counts, time to decision, "
        "suggestions (reads the audit trail)",
    )
    stats.add_argument(
        "--since",
        metavar="SINCE",
        default="7d",
        help="requests made since then: 30m, 24h, 7d (default) or an ISO time like 2025-01-31",
    )
    stats.add_argument(
        "--conversation", metavar="REF", help="only these: a conversation id or a prefix of one"
    )
    stats.add_argument("--json", action="store_true", help="one JSON object")


def add_audit_parser(sub: Any) -> None:
    """`sub`: the `clawgate` parser's subparsers."""
    audit = sub.add_parser("audit", help="the audit trail (needs REDIS_URL)")
    verbs = audit.add_subparsers(dest="verb", required=True)
    tail = verbs.add_parser(
        "tail",
        help="recent audit entries: commands, approvals, refusals, policy changes, tool calls",
    )
    tail.add_argument(
        "-n",
        "--lines",
        metavar="N",
        help=f"how many of the newest entries (default {DEFAULT_LINES}; with --since: all)",
    )
    tail.add_argument(
        "--since",
        metavar="SINCE",
        help="only entries since then: 10m, 2h, 1d, or an ISO time like 2025-01-31T09:00",
    )
    tail.add_argument("--json", action="store_true", help="one JSON object per line")
    tail.add_argument(
        "-f", "--follow", action="store_true", help="keep printing new entries until Ctrl-C"
    )
    receipt = verbs.add_parser(
        "receipt",
        help="check a tool receipt: its MAC (CLAWGATE_AUDIT_KEY) and the session's history; "
        "exit 1 when not verified",
    )
    receipt.add_argument("id", help="the receipt's id, like rc_0123456789abcdef0123")
    receipt.add_argument("--json", action="store_true", help="one JSON object")
    verify = verbs.add_parser(
        "verify", help="check the audit trail's hash chain; exit 1 at the first broken link"
    )
    verify.add_argument(
        "--since",
        metavar="SINCE",
        help="only entries since then (as for tail): the first one anchors the check",
    )
    verify.add_argument("--session", metavar="ID", help="only this session's sub-chain")
    verify.add_argument(
        "--checkpoints",
        metavar="FILE",
        help="also match the checkpoints kept in this file (CLAWGATE_AUDIT_CHECKPOINT_FILE)",
    )
    verify.add_argument("--json", action="store_true", help="one JSON object")


def add_policy_parser(sub: Any) -> None:
    """`sub`: the `clawgate` parser's subparsers."""
    policy = sub.add_parser("policy", help="show or change the tool policy (changes: REDIS_URL)")
    verbs = policy.add_subparsers(dest="verb", required=True)
    show = verbs.add_parser("show", help="the effective policy and where each value comes from")
    _common(show)
    for verb, what in (
        ("allow", "let a tool run (a deny anywhere still wins)"),
        ("deny", "never run a tool, and hide it from the model"),
        ("reset", "remove the override of a tool: the file's policy applies again"),
    ):
        change = verbs.add_parser(verb, help=what)
        change.add_argument("tool")
        _common(change)
    grants = verbs.add_parser(
        "grants", help='the grants "approve always" left, of every scope (needs REDIS_URL)'
    )
    grants.add_argument("--json", action="store_true", help="print JSON")
    revoke = verbs.add_parser("revoke", help="remove a grant by its id (needs REDIS_URL)")
    revoke.add_argument("grant", help="its id, as `clawgate policy grants` shows it")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--conversation",
        metavar="REF",
        default=None,
        help="a conversation id or prefix, like slack:T123:C456 (default: global)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_trace_parser(sub: Any) -> None:
    """`sub`: the `clawgate` parser's subparsers."""
    trace = sub.add_parser("trace", help="show recorded run traces (needs REDIS_URL)")
    verbs = trace.add_subparsers(dest="verb", required=True)
    show = verbs.add_parser(
        "show", help="a run's decision tree, with the runs that resumed it after approval"
    )
    show.add_argument("id", help="trace id (RunResult.trace_id, `clawgate approvals show`)")
    show.add_argument("--json", action="store_true", help="the stored JSON documents")


def add_onboarding_parsers(sub: Any) -> None:
    """`clawgate init`, `clawgate slack manifest` and `clawgate feishu checklist`. `sub`: the
    subparsers."""
    init = sub.add_parser(
        "init",
        help="set up a deployment here: ask the settings, check them live, write .env and "
        "clawgate.toml, run doctor",
    )
    init.add_argument(
        "--non-interactive", action="store_true", help="take every answer from the flags"
    )
    init.add_argument("--force", action="store_true", help="replace .env and clawgate.toml")
    for flag, what in (
        ("--platform", "slack, feishu or none"),
        ("--slack-bot-token", "xoxb-…"),
        ("--slack-app-token", "xapp-…, for Socket Mode"),
        ("--slack-signing-secret", "for HTTP (the Events API)"),
        ("--slack-api-url", "Slack's Web API (default https://slack.com/api/)"),
        ("--feishu-app-id", "cli_…"),
        ("--feishu-app-secret", "the app's secret"),
        ("--feishu-domain", "default https://open.feishu.cn"),
        ("--model-base-url", "an OpenAI-compatible server (default OpenAI; demo: offline)"),
        ("--model-api-key", "its key"),
        ("--model", "the model's name"),
        ("--redis-url", "redis://… (default: the embedded store, chat only)"),
        ("--admins", "slack:U… or feishu:ou_…, comma-separated"),
        ("--workdir", "where tools work (default ./workspace)"),
        ("--policy", "the starting policy: default, strict or none"),
    ):
        init.add_argument(flag, help=what)
    slack = sub.add_parser("slack", help="set up the Slack app (docs/slack.md)")
    slack_verbs = slack.add_subparsers(dest="verb", required=True)
    manifest = slack_verbs.add_parser(
        "manifest", help="print the Slack app manifest (JSON) to create the app from"
    )
    where = manifest.add_mutually_exclusive_group()
    where.add_argument(
        "--socket-mode", action="store_true", help="Socket Mode: no public URL, no request URLs"
    )
    where.add_argument(
        "--url", metavar="https://HOST", help="clawgate's public URL (default: a placeholder)"
    )
    feishu = sub.add_parser("feishu", help="set up the Feishu / Lark app (docs/feishu.md)")
    feishu_verbs = feishu.add_subparsers(dest="verb", required=True)
    checklist = feishu_verbs.add_parser(
        "checklist", help="print the developer console steps: permissions, events, callbacks"
    )
    checklist.add_argument(
        "--url", metavar="https://HOST", help="clawgate's public URL, for the request URL mode"
    )
