"""`clawgate feishu checklist`: the Feishu / Lark developer console steps for exactly what
clawgate uses: the permissions of every Open API call it makes and of the event it handles,
the event and the card callback to subscribe to, how they reach it, and publishing.

Nothing here loads lark-oapi or reads a setting."""

from __future__ import annotations

from typing import TextIO
from urllib.parse import urlsplit

from bot.server import FEISHU_EVENTS_PATH

PLACEHOLDER_HOST = "https://YOUR-HOST"
SEND_AS_BOT = "im:message:send_as_bot"
READ = "im:message:readonly"
NAMES = "contact:user.base:readonly"
CARDS = "cardkit:card:write"
CARDS_READ = "cardkit:card:read"

# Every Open API call clawgate makes (adapters/feishu) and the permissions it needs; Feishu's
# API reference lists im:message:send_as_bot among the ones that suffice for each IM call.
# tests/unit/test_manifest.py finds the calls in the code: one this table does not know
# fails it.
API_SCOPES: dict[str, tuple[str, ...]] = {
    "im.v1.message.create": (SEND_AS_BOT,),  # a message to a chat, or to an approver
    "im.v1.message.reply": (SEND_AS_BOT,),  # answers, in the asker's thread
    "im.v1.message.update": (SEND_AS_BOT,),  # the "Working…" message edited
    "im.v1.message.patch": (SEND_AS_BOT,),  # approval cards updated after the decision
    "im.v1.message.delete": (SEND_AS_BOT,),  # a streamed card that could not be finished
    # The answer streamed into a CardKit card (adapters/feishu/cardkit.py).
    "cardkit.v1.card.create": (CARDS,),  # the card entity, sent as a card message
    "cardkit.v1.card_element.content": (CARDS,),  # its steps and answer, typed out
    "cardkit.v1.card.settings": (CARDS,),  # streaming mode switched off at the end
    "cardkit.v1.card.update": (CARDS,),  # the finished card, whole
    "cardkit.v1.card.id_convert": (CARDS_READ,),  # the card a retaken run's message shows
    "/open-apis/bot/v3/info": (),  # the bot's own open_id, at start: needs the Bot feature
    "im.v1.file.create": ("im:resource",),  # a file uploaded to post (a long answer's text)
    "im.v1.image.create": ("im:resource",),  # an image uploaded to post (send_file)
    # Reading (adapters/feishu/reading.py): the thread before a mention, and its files. Each
    # takes any of im:message, im:message:readonly, im:message.history:readonly; in groups
    # also im:message.group_msg (the optional scope below), else a thread is not read.
    "im.v1.message.list": (READ,),  # the thread (or a direct chat) before a message
    "im.v1.message.get": (READ,),  # a thread's root, a chain of quote-replies
    "im.v1.message_resource.get": (READ,),  # images and files people attach
    "contact.v3.user.get": (NAMES,),  # the names of the people in the thread
}
# The events clawgate handles (adapters/feishu/app.py) and what each needs to be delivered.
EVENT_SCOPES: dict[str, tuple[str, ...]] = {
    "im.message.receive_v1": (
        "im:message.p2p_msg:readonly",  # direct messages to the bot
        "im:message.group_at_msg:readonly",  # group messages that @mention the bot
    ),
}
CALLBACKS = ("card.action.trigger",)  # the approval card's buttons and edit form
OPTIONAL_SCOPES = {
    "im:message.group_msg": "optional: replies in its threads need no @mention, and a\n"
    "group thread is read before a mention (reads every group message;\n"
    "may need an admin's approval)",
}
_WHY = {
    SEND_AS_BOT: "send and reply, edit its messages, update its cards",
    "im:resource": "upload the files it posts",
    "im:message.p2p_msg:readonly": "receive direct messages to the bot",
    "im:message.group_at_msg:readonly": "receive group messages that @mention the bot",
    READ: "read the thread before a mention, and the files people send",
    NAMES: "name the people of that thread (else their open_ids)",
    CARDS: "stream answers into one card (else a text working message)",
    CARDS_READ: "find the card a restarted run left, to finish it",
}


def required_scopes() -> list[str]:
    scopes = {scope for scopes in API_SCOPES.values() for scope in scopes}
    scopes |= {scope for scopes in EVENT_SCOPES.values() for scope in scopes}
    return sorted(scopes)


def request_url(base: str) -> str:
    """clawgate's Feishu endpoint under `base` (`https://host`, or a prefix behind a proxy);
    raises ValueError for anything else."""
    parts = urlsplit(base.strip())
    if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f"{base!r}: expected an https:// URL, like https://bot.example.com")
    path = parts.path.rstrip("/")
    if not path.endswith(FEISHU_EVENTS_PATH):
        path += FEISHU_EVENTS_PATH
    return f"https://{parts.netloc}{path}"


def checklist(url: str | None = None) -> str:
    """The steps, as plain text. `url`: the request URL (see `request_url`), else a
    placeholder to replace."""
    url = url or f"{PLACEHOLDER_HOST}{FEISHU_EVENTS_PATH}  (your server's public URL)"
    events = ", ".join(EVENT_SCOPES)
    width = max(len(scope) for scope in [*required_scopes(), *OPTIONAL_SCOPES])
    scopes = []
    for scope, why in [*((s, _WHY[s]) for s in required_scopes()), *OPTIONAL_SCOPES.items()]:
        first, *more = why.split("\n")
        scopes += [f"     {scope:<{width}}  {first}", *(f"     {'':<{width}}  {m}" for m in more)]
    lines = [
        "Feishu / Lark console steps for clawgate",
        "(console labels in English and Chinese; Feishu: open.feishu.cn/app, Lark:",
        " open.larksuite.com/app with FEISHU_DOMAIN=https://open.larksuite.com)",
        "",
        "1. Create a custom app (企业自建应用). Credentials & Basic Info (凭证与基础信息):",
        "   App ID -> FEISHU_APP_ID, App Secret -> FEISHU_APP_SECRET.",
        "2. Add features (添加应用能力) -> Bot (机器人). clawgate reads its open_id from",
        "   GET /open-apis/bot/v3/info at start, which needs the bot and no permission.",
        "3. Permissions & Scopes (权限管理): add",
        *scopes,
        "   (search the list by these names; send_as_bot is 以应用的身份发消息)",
        "4. Events & Callbacks (事件与回调), choose how they reach clawgate, the same for",
        "   events and for callbacks:",
        "   a. long connection (使用长连接接收事件 / 使用长连接接收回调): run clawgate with",
        "      FEISHU_MODE=websocket first (the console saves this mode only while a client",
        "      is connected). No public URL; the encrypt key and token are optional.",
        "   b. request URL (将事件发送至开发者服务器 / 将回调发送至开发者服务器):",
        f"      {url}",
        "      for both events and callbacks; clawgate must be running to answer the",
        "      verification challenge when you save it. Encryption strategy (加密策略): set",
        "      an Encrypt Key -> FEISHU_ENCRYPT_KEY and copy the Verification Token ->",
        "      FEISHU_VERIFICATION_TOKEN (both required in this mode).",
        f"   Event configuration (事件配置): add {events} (接收消息, receive messages).",
        f"   Callback configuration (回调配置): add {', '.join(CALLBACKS)} (卡片回传交互).",
        "5. Version Management & Release (版本管理与发布): create a version, set its",
        "   availability (可用范围) to the people who will use the bot, and publish it.",
        "   Permissions, events and callbacks apply only once a version is published:",
        "   publish again after every change.",
        "6. Add the bot to the groups where it should work (group settings -> Group bots",
        "   -> Add bot, 群机器人 -> 添加机器人); for a direct chat, search for it by name.",
        "7. Admins: CLAWGATE_ADMINS=feishu:<open_id>. An open_id (ou_...) is per app: find",
        "   yours with this app. With clawgate serving (REDIS_URL set), send the bot /help",
        "   in a direct chat, then `clawgate audit tail -n 5` shows you as feishu:ou_...",
    ]
    return "\n".join(lines) + "\n"


def print_checklist(url: str | None, out: TextIO, err: TextIO) -> int:
    """`clawgate feishu checklist`: the steps on `out`."""
    try:
        endpoint = request_url(url) if url is not None else None
    except ValueError as exc:
        print(f"clawgate: --url: {exc}", file=err)
        return 2
    out.write(checklist(endpoint))
    return 0
