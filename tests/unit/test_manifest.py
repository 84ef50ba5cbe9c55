"""`clawgate slack manifest` and `clawgate feishu checklist` ask for exactly what the code
uses: the scopes of every platform API call found in the source (a call the tables do not
know fails here, so a new call forces an update), the events the adapters handle, the slash
commands they register, and the endpoint the server serves."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.app import ASSISTANT_EVENTS, MESSAGE_EVENTS
from adapters.slack.inbound import COMMANDS
from bot.cli import main
from bot.feishu_checklist import (
    API_SCOPES,
    CALLBACKS,
    EVENT_SCOPES,
    OPTIONAL_SCOPES,
    checklist,
    required_scopes,
)
from bot.server import FEISHU_EVENTS_PATH, SLACK_EVENTS_PATH, Service, build_app
from bot.slack_manifest import (
    EVENT_SUBSCRIPTIONS,
    METHOD_SCOPES,
    PLACEHOLDER_HOST,
    bot_scopes,
    manifest,
    request_url,
)

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    p for layer in ("runtime", "adapters", "bot") for p in (ROOT / layer).rglob("*.py")
)

# --- the Slack Web API methods clawgate calls, read from the source ------------------------


@cache
def _sdk_methods() -> dict[str, str]:
    """AsyncWebClient's method names -> the Web API method each calls (`chat_postMessage` ->
    `chat.postMessage`), read from slack_sdk's own source."""
    methods = {}
    for name, function in inspect.getmembers(AsyncWebClient, inspect.iscoroutinefunction):
        called = re.findall(r"api_call\(\s*\"([\w.]+)\"", inspect.getsource(function))
        if not name.startswith("_") and name != "api_call" and len(called) == 1:
            methods[name] = called[0]
    return methods


def slack_calls(source: str) -> set[str]:
    """The Web API methods `source` calls: `client.chat_update(...)` and `api_call("x.y")`."""
    sdk = _sdk_methods()
    found = {sdk[name] for name in re.findall(r"\.(\w+)\(", source) if name in sdk}
    if ".files_upload_v2(" in source:  # slack_sdk's upload in three steps, two of them methods
        found |= {"files.getUploadURLExternal", "files.completeUploadExternal"}
    return found | set(re.findall(r"\.api_call\(\s*[\"']([\w.]+)[\"']", source))


def test_the_scanner_finds_calls_in_both_forms() -> None:
    source = 'await self.client.reactions_add(name=n)\nawait client.api_call("team.info")\n'
    assert slack_calls(source) == {"reactions.add", "team.info"}
    assert "reactions.add" not in METHOD_SCOPES  # so such a call, once in the code, fails below


def test_the_manifest_scopes_cover_every_slack_method_clawgate_calls() -> None:
    called = set().union(*(slack_calls(path.read_text()) for path in SOURCES))
    assert {"auth.test", "chat.postMessage", "chat.update", "views.open"} <= called
    unknown = sorted(called - set(METHOD_SCOPES))
    assert unknown == [], f"add these methods and their bot scopes to METHOD_SCOPES: {unknown}"
    assert sorted(set(METHOD_SCOPES) - called) == []  # no scope asked for a call long gone
    scopes = set(manifest("https://x.example/slack/events")["oauth_config"]["scopes"]["bot"])
    for method in called:
        assert set(METHOD_SCOPES[method]) <= scopes, method
    assert sorted(scopes) == bot_scopes(called)  # and nothing more than that needs


def test_the_events_are_those_the_adapter_handles_each_with_its_scope() -> None:
    assert set(EVENT_SUBSCRIPTIONS) == {*MESSAGE_EVENTS, *ASSISTANT_EVENTS}
    settings = manifest(None)["settings"]["event_subscriptions"]
    subscribed = [event for events in EVENT_SUBSCRIPTIONS.values() for event in events]
    assert settings["bot_events"] == subscribed
    # Mentions, then `message` from every kind of conversation: DMs (im) are sessions of
    # their own, and replies in the bot's threads in channels, private channels and group
    # DMs need no mention; the assistant view's threads (in the DM) start and change.
    assert set(subscribed) == {"app_mention", *ASSISTANT_EVENTS} | {
        f"message.{kind}" for kind in ("channels", "groups", "im", "mpim")
    }
    scopes = set(manifest(None)["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "channels:history", "groups:history", "im:history"} <= scopes
    assert {"mpim:history", "commands", "assistant:write"} <= scopes


def test_the_assistant_view_is_on() -> None:
    features = manifest(None)["features"]
    assert features["assistant_view"]["assistant_description"]
    assert features["app_home"]["messages_tab_enabled"]  # its threads live in the DM


def test_the_slash_commands_are_those_the_adapter_registers() -> None:
    commands = manifest(None)["features"]["slash_commands"]
    assert [c["command"] for c in commands] == list(COMMANDS)
    assert all(c["description"] and not c["should_escape"] for c in commands)


def _served_post_paths() -> dict[str, str]:
    """platform -> the path `clawgate serve` routes that platform's POSTs to."""

    async def slack(_: web.Request) -> web.Response:
        return web.Response()

    async def feishu(_: web.Request) -> web.Response:
        return web.Response()

    adapters = {
        "slack": SimpleNamespace(handle_http=slack),
        "feishu": SimpleNamespace(handle_http=feishu),
    }
    # No console: it needs the sign-in store and the inbox, which are not asked about here.
    no_console = {"runtime": SimpleNamespace(sign_in=None), "ingest": None}
    service = cast(Service, SimpleNamespace(**adapters, **no_console))
    names: dict[object, str] = {slack: "slack", feishu: "feishu"}
    paths = {}
    for route in build_app(service, platforms=True).router.routes():
        if route.method == "POST" and route.resource is not None:
            paths[names[route.handler]] = str(route.resource.canonical)
    assert set(paths) == {"slack", "feishu"}
    return paths


def _urls(document: Any) -> list[str]:
    """Every request URL in a manifest."""
    if isinstance(document, dict):
        own = [v for k, v in document.items() if k in ("url", "request_url")]
        return own + [u for v in document.values() for u in _urls(v)]
    if isinstance(document, list):
        return [u for v in document for u in _urls(v)]
    return []


def test_every_request_url_is_the_served_endpoint() -> None:
    served = _served_post_paths()["slack"]
    url = request_url("https://x.example")
    document = manifest(url)
    urls = _urls(document)
    assert len(urls) == 2 + len(COMMANDS)  # events, interactivity, each command
    assert set(urls) == {f"https://x.example{served}"}
    assert document["settings"]["interactivity"]["is_enabled"] is True
    assert document["settings"]["socket_mode_enabled"] is False
    assert document["features"]["app_home"]["messages_tab_enabled"] is True


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("https://x.example/", "https://x.example/slack/events"),
        ("https://x.example:8443/bots", "https://x.example:8443/bots/slack/events"),
        ("https://x.example/slack/events", "https://x.example/slack/events"),
    ],
)
def test_the_url_given_is_the_server_or_the_endpoint(given: str, expected: str) -> None:
    assert request_url(given) == expected


@pytest.mark.parametrize("bad", ["http://x.example", "x.example", "https://", "https://x/?a=1"])
def test_a_url_slack_would_refuse_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="https"):
        request_url(bad)


def test_socket_mode_has_no_request_url() -> None:
    document = manifest("https://ignored.example/slack/events", socket_mode=True)
    assert _urls(document) == []
    assert document["settings"]["socket_mode_enabled"] is True
    assert document["settings"]["interactivity"] == {"is_enabled": True}
    assert [c["command"] for c in document["features"]["slash_commands"]] == list(COMMANDS)
    assert document["oauth_config"] == manifest(None)["oauth_config"]


# --- the command line ------------------------------------------------------------------------


def test_slack_manifest_prints_the_manifest_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slack", "manifest", "--url", "https://x.example"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == manifest("https://x.example/slack/events")
    assert err == ""


def test_without_a_url_a_placeholder_is_printed_and_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["slack", "manifest"]) == 0
    out, err = capsys.readouterr()
    assert set(_urls(json.loads(out))) == {f"{PLACEHOLDER_HOST}{SLACK_EVENTS_PATH}"}
    assert "replace" in err and PLACEHOLDER_HOST in err


def test_socket_mode_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slack", "manifest", "--socket-mode"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == manifest(None, socket_mode=True)
    assert "connections:write" in err and "SLACK_APP_TOKEN" in err


def test_a_bad_url_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["slack", "manifest", "--url", "http://x.example"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "https" in err
    with pytest.raises(SystemExit) as exited:  # both: argparse refuses
        main(["slack", "manifest", "--url", "https://x.example", "--socket-mode"])
    assert exited.value.code == 2


def test_the_commands_load_no_platform_sdk_and_need_no_setting() -> None:
    probe = (
        "import sys, io, contextlib; from bot.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    codes = [main(['slack', 'manifest', '--socket-mode']),\n"
        "             main(['feishu', 'checklist'])]\n"
        "sdks = ('lark_oapi', 'slack_bolt', 'slack_sdk')\n"
        "print(codes, sorted(m for m in sdks if m in sys.modules))"
    )
    env = {"PATH": "/usr/bin:/bin", "REDIS_URL": "redis://127.0.0.1:1/0", "CLAWGATE_PORT": "x"}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "[0, 0] []", done.stderr


# --- Feishu ----------------------------------------------------------------------------------


def feishu_calls(source: str) -> set[str]:
    """The Open API calls `source` makes: `client.im.v1.message.reply(...)` as
    `im.v1.message.reply`, and raw requests by their `.uri("/open-apis/...")`."""
    typed = re.findall(r"client\.(\w+)\.(v\d+)\.(\w+)\.(\w+)\(", source)
    return {".".join(call) for call in typed} | set(re.findall(r"\.uri\(\"([^\"]+)\"\)", source))


def test_the_feishu_scanner_finds_both_forms() -> None:
    source = 'client.im.v1.chat.get(r)\nlark.BaseRequest.builder().uri("/open-apis/x/v1/y")\n'
    assert feishu_calls(source) == {"im.v1.chat.get", "/open-apis/x/v1/y"}


def test_the_checklist_asks_the_permissions_of_every_feishu_call() -> None:
    called = set().union(*(feishu_calls(p.read_text()) for p in SOURCES))
    assert {"im.v1.message.reply", "im.v1.message.patch", "/open-apis/bot/v3/info"} <= called
    unknown = sorted(called - set(API_SCOPES))
    assert unknown == [], f"add these calls and their permissions to API_SCOPES: {unknown}"
    assert sorted(set(API_SCOPES) - called) == []
    text = checklist()
    for scope in {s for scopes in [*API_SCOPES.values(), *EVENT_SCOPES.values()] for s in scopes}:
        assert scope in required_scopes() and scope in text
    assert all(scope in text for scope in OPTIONAL_SCOPES)


# lark-oapi's registration methods -> the event or callback type they subscribe to.
_REGISTRATIONS = {
    "p2_im_message_receive_v1": "im.message.receive_v1",
    "p2_card_action_trigger": "card.action.trigger",
}


def _constants(path: Path) -> dict[str, Any]:
    tree = ast.parse(path.read_text())
    return {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def test_the_checklist_subscribes_to_what_the_adapter_handles() -> None:
    """Read from adapters/feishu/app.py without importing lark-oapi (seconds)."""
    app = ROOT / "adapters" / "feishu" / "app.py"
    registered = re.findall(r"\.register_(\w+)\(", app.read_text())
    unknown = sorted(set(registered) - set(_REGISTRATIONS))
    assert unknown == [], f"which event or callback do these subscribe to? {unknown}"
    handled = {_REGISTRATIONS[name] for name in registered}
    constants = _constants(app)
    assert handled == {constants["MESSAGE_EVENT"], constants["CARD_EVENT"]}
    assert set(EVENT_SCOPES) | set(CALLBACKS) == handled
    text = checklist()
    assert all(kind in text for kind in handled)


def test_the_request_url_is_the_served_endpoint() -> None:
    served = _served_post_paths()["feishu"]
    text = checklist("https://x.example" + served)
    assert f"https://x.example{served}" in text
    assert f"{PLACEHOLDER_HOST}{served}" in checklist()
    assert urlsplit(f"https://x.example{served}").path == FEISHU_EVENTS_PATH


def test_feishu_checklist_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["feishu", "checklist", "--url", "https://x.example/"]) == 0
    out, err = capsys.readouterr()
    assert out == checklist("https://x.example/feishu/events") and err == ""
    for needed in ["im.message.receive_v1", "card.action.trigger", *required_scopes()]:
        assert needed in out
    assert "FEISHU_ENCRYPT_KEY" in out and "FEISHU_VERIFICATION_TOKEN" in out
    assert "open_id" in out and "CLAWGATE_ADMINS" in out
    assert main(["feishu", "checklist", "--url", "ftp://x"]) == 2
    assert "https" in capsys.readouterr().err
