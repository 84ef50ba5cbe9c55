"""`clawgate serve` and `clawgate worker`: the HTTP endpoints, serve's worker (in a child
process, bot/worker_child.py, or in this one), Socket Mode, and a graceful stop on SIGTERM
(stop accepting, finish or hand back work in hand)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp import ClientSession, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.asyncio import Redis

from adapters.console.relay import ConsoleRelay
from adapters.dispatch import steering_kind
from adapters.http import BODY_TIMEOUT, DEFAULT_BODY_TIMEOUT, MAX_BODY
from adapters.jobs import JobHandler
from adapters.router import Router
from adapters.web.app import console_app
from bot.doctor import policy_file_problem, print_serving_checks
from bot.errors import Unavailable
from bot.http_limits import ConnectionLimits, GuardedSite, raise_file_limit
from bot.policy_reload import keep_policy_fresh
from bot.settings import Settings, SettingsError
from bot.wiring import approval_store, build_mcp, build_runtime, build_sandbox
from bot.worker_child import WorkerChild, die_with_parent
from runtime.agent import Release, Runtime
from runtime.approval.notices import notice_of
from runtime.channel import ApprovalNotice
from runtime.mcp.supervisor import McpServers
from runtime.models import Actor, ConversationRef
from runtime.outage import OUTAGE
from runtime.policy.approvers import OPERATOR_PLATFORM
from runtime.policy.model import PolicyDocument
from runtime.queue.gauges import sample_inbox
from runtime.queue.inbound import Inbound
from runtime.queue.inbox import Inbox
from runtime.queue.ingest import Ingest
from runtime.queue.steering import Steering
from runtime.queue.worker import WORKER_SILENCE, Worker, sweep_forever
from runtime.redact import shown_url
from runtime.shutdown import cancel
from runtime.store.connection import REDIS_DOWN, connect
from runtime.store.durability import (
    DurabilityError,
    DurabilityUnknown,
    durability_warnings,
    fsync_mode,
)
from runtime.store.keys import Keys
from runtime.tools.sandbox import Sandbox
from runtime.web_access import WebAccess

# A platform's SDK is imported only when the platform is enabled: lark-oapi alone takes
# seconds and ~170 MB, which a Slack-only server never needs.
if TYPE_CHECKING:
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
    from slack_sdk.web.async_client import AsyncWebClient

    from adapters.feishu.app import FeishuAdapter, LongConnection
    from adapters.feishu.reading import FeishuReader
    from adapters.slack.app import SlackAdapter
    from adapters.slack.inbound import SlackIdentity
    from adapters.slack.reading import SlackReader

log = logging.getLogger(__name__)

SWEEP_INTERVAL = 5.0
READY_TIMEOUT = 0.8  # seconds: /readyz answers within a second whatever Redis does
# The platforms' request URLs (`clawgate slack manifest` and `feishu checklist` print them).
SLACK_EVENTS_PATH = "/slack/events"
FEISHU_EVENTS_PATH = "/feishu/events"
CONSOLE_PATH = "/console/"


@dataclass
class Service:
    """Everything one process runs: the runtime, its worker, and the platform adapters."""

    redis: Redis
    inbox: Inbox
    runtime: Runtime
    worker: Worker | None  # None: this process only ingests (CLAWGATE_WORKER_MODE child, none)
    slack: SlackAdapter | None
    feishu: FeishuAdapter | None
    http: ClientSession  # shared by the platform clients: connections are kept open
    sandbox: Sandbox  # how bash commands are contained here
    settings: Settings  # what it was started with (the console's Health page probes the model)
    # What could go wrong unnoticed (a Redis that may lose writes, no sandbox): said at start
    # and in /readyz, which stays ready.
    warnings: list[str] = field(default_factory=list)
    long_connection: LongConnection | None = None  # Feishu's, once started
    socket_mode: AsyncSocketModeHandler | None = None  # Slack's, once started
    mcp: McpServers | None = None  # the policy file's MCP servers, supervised here
    ingest: Ingest | None = None  # queues decisions made in the web console
    worker_child: WorkerChild | None = None  # serve's worker process (CLAWGATE_WORKER_MODE=child)

    async def aclose(self) -> None:
        if self.mcp is not None:
            await self.mcp.aclose()
        await self.runtime.loop.aclose()  # the models' connections
        await self.http.close()
        await self.redis.aclose()

    def details(self) -> list[str]:
        """What /readyz says besides ready: the warnings, then each MCP server's state (a
        server that is down leaves the process ready: its calls fail, plainly)."""
        lines = [f"warning: {w}" for w in self.warnings]
        return lines + [state.line for state in (self.mcp.states() if self.mcp else [])]

    async def ready(self) -> list[str]:
        """What keeps this process from doing its job; empty when ready. Answers within
        READY_TIMEOUT even when Redis hangs: a probe that waits is no probe."""
        try:
            async with asyncio.timeout(READY_TIMEOUT):
                return await self._ready()
        except TimeoutError:
            return [f"redis did not answer within {READY_TIMEOUT:g} s"]

    async def _ready(self) -> list[str]:
        try:
            await self.redis.ping()
        except REDIS_DOWN:
            return ["redis unreachable"]
        problems = []
        if self.long_connection is not None and not self.long_connection.alive:
            problems.append("the feishu long connection stopped")
        if self.socket_mode is not None and not await self.socket_mode.client.is_connected():
            problems.append("the slack socket mode connection is down")
        if self.worker is not None:
            return problems if self.worker.polling() else [*problems, "worker not polling"]
        if self.worker_child is not None and not self.worker_child.running:
            problems.append("the worker child process is not running (it is started again)")
        try:
            polling = await self.inbox.workers_polling(WORKER_SILENCE)
        except REDIS_DOWN:
            return ["redis unreachable"]
        return problems if polling else [*problems, "no worker is polling the inbox"]


async def _slack_identity(client: AsyncWebClient, settings: Settings) -> SlackIdentity:
    from slack_sdk.errors import SlackApiError  # noqa: PLC0415 - only with Slack enabled

    from adapters.slack.inbound import SlackIdentity  # noqa: PLC0415

    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        raise SettingsError(
            f"SLACK_BOT_TOKEN: auth.test failed ({exc.response.get('error', 'unknown')})"
        ) from exc
    except OSError as exc:
        raise Unavailable(f"cannot reach Slack at {settings.slack_api_url} ({exc})") from exc
    return SlackIdentity(str(auth["team_id"]), str(auth["user_id"]), str(auth.get("bot_id", "")))


# What apps.connections.open answers for an app token that will never work: slack_sdk would
# retry it forever (a traceback a second), so `serve` stops at start instead.
REFUSED_APP_TOKEN = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "missing_scope",
    }
)


async def _check_app_token(client: AsyncWebClient, app_token: str) -> None:
    """Whether Slack takes the app-level token (an unused websocket URL is its answer);
    other failures are left to Socket Mode's retries (and /readyz says not ready)."""
    from slack_sdk.errors import SlackApiError  # noqa: PLC0415 - only with Slack enabled

    try:
        await client.apps_connections_open(app_token=app_token)
    except SlackApiError as exc:
        error = str(exc.response.get("error", "unknown"))
        if error in REFUSED_APP_TOKEN:
            raise SettingsError(
                f"SLACK_APP_TOKEN: Slack refused it ({error}); create an app-level token with "
                "the connections:write scope (the app's Basic Information page, App-Level "
                "Tokens), turn Socket Mode on, and set it as SLACK_APP_TOKEN=xapp-…"
            ) from exc
        log.warning("slack: apps.connections.open failed (%s); Socket Mode will retry", error)
    except OSError as exc:
        log.warning("slack: cannot reach apps.connections.open (%s); Socket Mode will retry", exc)


async def build_service(settings: Settings, policy: PolicyDocument, worker: bool = True) -> Service:
    redis = connect(settings.redis_url, cluster=settings.redis_cluster)
    OUTAGE.watch(redis)  # an outage is said once, and once more when it is over
    http = ClientSession()
    try:
        inbox = await _inbox(settings, redis)
        return await _build(settings, policy, redis, inbox, http, worker)
    except BaseException:
        await http.close()
        await redis.aclose()
        raise


async def _inbox(settings: Settings, redis: Redis) -> Inbox:
    wait_aof = False
    if settings.ingest_durability == "fsync":
        try:
            wait_aof = await fsync_mode(redis) == "waitaof"
        except DurabilityUnknown as exc:  # Redis (a master) is away: exit 1, not a bad setting
            where = shown_url(settings.redis_url or "the embedded store")
            raise Unavailable(f"cannot reach Redis at {where} ({exc})") from exc
        except DurabilityError as exc:
            raise SettingsError(
                f"CLAWGATE_INGEST_DURABILITY=fsync needs every accepted input on disk: {exc}"
            ) from exc
    keys = Keys(settings.redis_prefix)
    return Inbox(
        redis,
        keys,
        dedupe_ttl_s=settings.dedupe_ttl,
        wait_aof=wait_aof,
        partitions=settings.partitions,
    )


async def _build(
    settings: Settings,
    policy: PolicyDocument,
    redis: Redis,
    inbox: Inbox,
    http: ClientSession,
    with_worker: bool,
) -> Service:
    router = Router()
    # A `clawgate chat` conversation's run resumed here (decided from an approvers' channel)
    # shows in that chat's terminal.
    router.add("console", ConsoleRelay(redis, Keys(settings.redis_prefix)))
    sandbox = build_sandbox(settings)
    approvals = approval_store(settings, redis)
    ingest = Ingest(inbox, approvals)  # held messages released by the sweeper are queued
    mcp = build_mcp(settings, policy, sandbox)
    runtime = build_runtime(
        settings,
        policy,
        redis,
        router,
        sandbox=sandbox,
        approvals=approvals,
        release=_release_through(ingest),
        mcp=mcp,
        steering=Steering(inbox, steering_kind) if settings.steering == "steer" else None,
    )
    slack = feishu = None
    if settings.slack_enabled:
        from adapters.slack.app import SlackAdapter  # noqa: PLC0415 - only with Slack enabled
        from adapters.slack.channel import SlackChannel, web_client  # noqa: PLC0415

        assert settings.slack_bot_token is not None
        token = settings.slack_bot_token.get_secret_value()
        client = web_client(token, settings.slack_api_url, http)
        identity = await _slack_identity(client, settings)
        if settings.slack_app_token is not None:
            await _check_app_token(client, settings.slack_app_token.get_secret_value())
        secret = settings.slack_signing_secret
        slack = SlackAdapter(
            client, identity, ingest, secret.get_secret_value() if secret else None
        )
        reader = _slack_reader(settings, client, identity, http, runtime, router)
        answers = SlackChannel(client, settings.answer_file_chars, identity.bot_id)
        router.add("slack", answers, reader)
    if settings.feishu_enabled:
        feishu = await _feishu(settings, ingest, runtime)
        router.add("feishu", feishu.channel, _feishu_reader(settings, feishu, runtime, router))

    worker = None
    if with_worker:
        handler = JobHandler(runtime, router)
        worker = Worker(
            inbox,
            handler,
            runtime.worker_id,
            concurrency=settings.worker_concurrency,
            reclaim_idle=settings.reclaim_idle,
            liveness_ttl=settings.liveness_ttl,
            dropped=handler.dropped,
        )
    warnings = [*filter(None, [sandbox.missing])]
    if settings.redis_url:  # the embedded store says at start that it keeps nothing
        warnings += await durability_warnings(redis)
    for warning in warnings:
        log.warning("%s", warning)
    await mcp.settled()  # the MCP servers start with the service, not at the first message
    if settings.console == "on":  # links are made by any process that answers the chat
        runtime.sign_in = WebAccess(redis, Keys(settings.redis_prefix), settings.console_url)
    return Service(
        redis,
        inbox,
        runtime,
        worker,
        slack,
        feishu,
        http,
        sandbox,
        settings,
        warnings,
        mcp=mcp,
        ingest=ingest,
    )


def _slack_reader(
    settings: Settings,
    client: AsyncWebClient,
    identity: SlackIdentity,
    http: ClientSession,
    runtime: Runtime,
    router: Router,
) -> SlackReader:
    """What the model gets of a Slack message: the thread before it, the files attached."""
    from adapters.slack.history import History, names  # noqa: PLC0415 - only with Slack
    from adapters.slack.reading import SlackReader  # noqa: PLC0415

    return SlackReader(
        client,
        History(client, identity, names(client)),
        http,
        policies=runtime.policies,
        limits=settings.reading_limits(),
        send=router.send,
        knows=runtime.knows,
    )


def _release_through(ingest: Ingest) -> Release:
    """Held messages released by the sweeper run as a job in their session's lane."""

    async def release(session: str, conversation: ConversationRef) -> None:
        await ingest(
            Inbound(
                platform=conversation.platform,
                event_id=f"release:{session}",
                dedupe_keys=(f"release:{uuid.uuid4()}",),
                session=session,
                conversation=conversation,
                actor=Actor(platform=OPERATOR_PLATFORM, user_id="sweeper"),
                text="",
                kind="release",
            )
        )

    return release


async def _feishu(settings: Settings, ingest: Ingest, runtime: Runtime) -> FeishuAdapter:
    from adapters.feishu.app import FeishuAdapter  # noqa: PLC0415 - only with Feishu enabled
    from adapters.feishu.channel import (  # noqa: PLC0415
        FeishuChannel,
        FeishuError,
        FeishuUnreachable,
        feishu_client,
        fetch_identity,
    )

    assert settings.feishu_app_id is not None and settings.feishu_app_secret is not None
    app_id = settings.feishu_app_id
    client = feishu_client(
        app_id, settings.feishu_app_secret.get_secret_value(), settings.feishu_domain
    )
    try:
        identity = await asyncio.to_thread(fetch_identity, client)
    except FeishuUnreachable as exc:
        raise Unavailable(f"cannot reach Feishu at {settings.feishu_domain} ({exc})") from exc
    except FeishuError as exc:
        raise SettingsError(
            f"FEISHU_APP_ID / FEISHU_APP_SECRET: Feishu refused them ({exc})"
        ) from exc
    key, token = settings.feishu_encrypt_key, settings.feishu_verification_token
    adapter = FeishuAdapter(
        identity,
        ingest,
        runtime.precheck,
        key.get_secret_value() if key else None,
        token.get_secret_value() if token else None,
        FeishuChannel(client, app_id, settings.answer_file_chars, settings.feishu_streaming_cards),
        functools.partial(_notice, runtime),
    )
    adapter.bind(asyncio.get_running_loop())
    return adapter


async def _notice(runtime: Runtime, approval_id: str) -> ApprovalNotice | None:
    """An approval as the chats show it (redacted), for the card a click is answered with."""
    loaded = await runtime.approvals.load(approval_id)
    if loaded is None:
        return None
    record, checkpoint = loaded
    return notice_of(record, checkpoint.id if checkpoint.batch else "")


def _feishu_reader(
    settings: Settings, feishu: FeishuAdapter, runtime: Runtime, router: Router
) -> FeishuReader:
    from adapters.feishu.reading import FeishuReader  # noqa: PLC0415

    assert settings.feishu_app_id is not None
    return FeishuReader(
        feishu.channel.client,
        settings.feishu_app_id,
        feishu.identity.open_id,
        settings.reading_limits(),
        runtime.policies,
        router,
        runtime.knows,
    )


def build_app(
    service: Service, platforms: bool = True, body_timeout: float = DEFAULT_BODY_TIMEOUT
) -> web.Application:
    """The endpoints; `platforms=False` leaves out the platforms' (a worker's metrics port)."""
    app = web.Application(client_max_size=MAX_BODY)
    app[BODY_TIMEOUT] = body_timeout

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(_: web.Request) -> web.Response:
        problems = await service.ready()
        if problems:
            return web.Response(status=503, text="; ".join(problems) + "\n")
        # Degraded but working (every bash call asks; Redis may lose the last writes; an MCP
        # server down): ready, with the reasons in the details.
        return web.Response(text="ready\n" + "".join(f"{line}\n" for line in service.details()))

    async def metrics(_: web.Request) -> web.Response:
        await sample_inbox(service.inbox)
        return web.Response(body=generate_latest(), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    if platforms and service.slack is not None:
        app.router.add_post(SLACK_EVENTS_PATH, service.slack.handle_http)
    if platforms and service.feishu is not None:
        app.router.add_post(FEISHU_EVENTS_PATH, service.feishu.handle_http)
    sign_in, ingest = service.runtime.sign_in, service.ingest
    if platforms and ingest is not None and sign_in is not None:
        # Imported here: bot.health_facts builds on this module's Service.
        from bot.health_facts import ModelReachability, gather  # noqa: PLC0415

        health = functools.partial(gather, service, ModelReachability(service.settings))
        app.add_subapp(CONSOLE_PATH, console_app(service.runtime, sign_in, ingest, health))
    return app


def _stop_signal() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run(settings: Settings, policy: PolicyDocument, http: bool) -> int:
    """Serve until SIGTERM/SIGINT. `http=False` is `clawgate worker`: no endpoints."""
    if not http:
        die_with_parent()  # a child worker: serve's end is its end
    if problem := policy_file_problem(settings):
        raise SettingsError(problem)
    topology = settings.worker_topology if http else "inprocess"
    service = await build_service(settings, policy, worker=topology == "inprocess")
    # Everything loaded so far (the platform SDKs define thousands of classes) lives as long
    # as the process: keep it out of the garbage collector's full passes, which otherwise
    # pause the event loop for 100+ ms every few seconds under load.
    gc.collect()
    gc.freeze()
    stop = _stop_signal()
    runner: web.AppRunner | None = None
    tasks: list[asyncio.Task[None]] = []
    try:
        policies = service.runtime.policies
        fresh = keep_policy_fresh(policies, settings.policy_file, settings.workdir)
        tasks.append(asyncio.create_task(fresh))
        if service.worker is not None:
            tasks += await _start_worker(service.worker, service.runtime, settings, stop)
        else:  # a worker elsewhere: Redis must answer all the same
            async with _reaching_redis(settings):
                await service.redis.ping()
        port = settings.port if http else settings.metrics_port
        if port is not None:  # a worker serves only /healthz, /readyz and /metrics
            runner = await _listen(
                settings, build_app(service, http, settings.http_body_timeout), port
            )
        # Only `serve` takes inputs from the platforms; workers just answer through their APIs.
        if http and service.slack is not None and settings.slack_app_token is not None:
            socket_mode = service.socket_mode = service.slack.socket_mode_handler(
                settings.slack_app_token.get_secret_value()
            )
            if not await _connect(socket_mode, stop):
                return 0  # stopped while connecting
        if http and service.feishu is not None and settings.feishu_mode == "websocket":
            from adapters.feishu.app import LongConnection  # noqa: PLC0415 - Feishu only

            assert settings.feishu_app_id and settings.feishu_app_secret
            long_connection = LongConnection(
                settings.feishu_app_id,
                settings.feishu_app_secret.get_secret_value(),
                settings.feishu_domain,
                service.feishu,
            )
            long_connection.start()
            service.long_connection = long_connection
        if topology == "child":  # once serve's own checks passed (a child would repeat them)
            service.worker_child = WorkerChild(settings.shutdown_grace)
            await service.worker_child.start()
        await print_serving_checks(settings, sys.stderr)  # what `clawgate doctor` would say
        _announce(settings, service, http)
        await stop.wait()
        print("clawgate: stopping", file=sys.stderr, flush=True)
    finally:
        await _shut_down(settings, service, runner, tasks)
    # Its jobs were taken over after a stall: exit 1, so the supervisor starts it afresh.
    return 1 if service.worker is not None and service.worker.lease.fenced.is_set() else 0


async def _shut_down(
    settings: Settings,
    service: Service,
    runner: web.AppRunner | None,
    tasks: list[asyncio.Task[None]],
) -> None:
    """Stop taking inputs, then finish or hand back the work in hand, then let go. A child
    worker is told at once, so its grace runs beside serve's own (within the deploy files'
    stop periods)."""
    child = service.worker_child
    child_stopped = asyncio.create_task(child.stop()) if child is not None else None
    if service.socket_mode is not None:
        # Its close waits on a websocket that may never answer: at most the grace.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(max(settings.shutdown_grace, 0.1)):
                await service.socket_mode.close_async()  # type: ignore[no-untyped-call]
    if service.long_connection is not None:
        await service.long_connection.stop()
    if runner is not None:
        await runner.cleanup()  # stop accepting; requests in flight finish
    if service.worker is not None:
        await service.worker.stop(settings.shutdown_grace)
    if child_stopped is not None:
        await child_stopped
    await cancel(tasks)
    await service.aclose()


async def _start_worker(
    worker: Worker, runtime: Runtime, settings: Settings, stop: asyncio.Event
) -> list[asyncio.Task[None]]:
    """The worker polling, and the tasks beside it: the sweeper, the stop once fenced."""
    async with _reaching_redis(settings):
        await worker.start()
    return [
        asyncio.create_task(sweep_forever(runtime.sweep, SWEEP_INTERVAL)),
        asyncio.create_task(_stop_when_fenced(worker, stop)),
    ]


@contextlib.asynccontextmanager
async def _reaching_redis(settings: Settings) -> AsyncIterator[None]:
    """Redis away at start: one line and exit 1 (bot/errors.py), not a traceback."""
    try:
        yield
    except REDIS_DOWN as exc:
        where = shown_url(settings.redis_url or "the embedded store")
        raise Unavailable(f"cannot reach Redis at {where} ({exc})") from exc


async def _connect(socket_mode: AsyncSocketModeHandler, stop: asyncio.Event) -> bool:
    """Connect Socket Mode (True), unless `stop` is set first (False): slack_sdk retries a
    failing connect for ever, and SIGTERM must still stop the process."""
    task = asyncio.ensure_future(socket_mode.connect_async())  # type: ignore[no-untyped-call]
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([task, stopping], return_when=asyncio.FIRST_COMPLETED)
    await cancel([stopping] if task.done() else [task, stopping])
    if task.done() and not task.cancelled():
        task.result()  # its failure, if it failed
        return True
    return False


async def _stop_when_fenced(worker: Worker, stop: asyncio.Event) -> None:
    await worker.lease.fenced.wait()
    stop.set()


async def _listen(settings: Settings, app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(
        app,
        handle_signals=False,
        # Requests in flight get the same grace as the jobs in hand (aiohttp's own default
        # is 60 s per phase, and reads 0 as no limit).
        shutdown_timeout=max(settings.shutdown_grace, 0.1),
        # Between requests too, a connection waits no longer than for its first.
        keepalive_timeout=settings.http_header_timeout,
    )
    limits = ConnectionLimits(
        per_client=settings.http_client_connections,
        total=settings.http_max_connections,
        header_timeout=settings.http_header_timeout,
    )
    if short := raise_file_limit(settings.http_max_connections):
        log.warning("http: %s", short)
    await runner.setup()
    host = settings.host
    try:
        await GuardedSite(runner, host, port, limits).start()
    except OSError as exc:  # taken, or a host that is not this machine's
        await runner.cleanup()
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        raise Unavailable(f"cannot listen on {host}:{port} ({why})") from exc
    return runner


def _announce(settings: Settings, service: Service, http: bool) -> None:
    platforms = []
    if service.slack is not None:
        platforms.append("slack (socket mode)" if settings.slack_app_token else "slack")
    if service.feishu is not None:
        platforms.append(f"feishu ({settings.feishu_mode})")
    where = f"listening on http://{settings.host}:{settings.port}" if http else "worker"
    worker = _worker_line(settings, service)
    enabled = ", ".join(platforms) or "none (set SLACK_BOT_TOKEN or FEISHU_APP_ID)"
    print(
        f"clawgate: {where}; platforms: {enabled}; {worker}; "
        f"bash sandbox: {service.sandbox.describe()}",
        file=sys.stderr,
        flush=True,
    )


def _worker_line(settings: Settings, service: Service) -> str:
    """Where this process's worker runs, and where its metrics are served."""
    if service.worker is not None:
        return f"worker {service.runtime.worker_id}"
    child = service.worker_child
    if child is None:
        return "no worker here (CLAWGATE_WORKER_MODE=none: a `clawgate worker` does the work)"
    metrics = (
        f"its /metrics on port {settings.metrics_port}"
        if settings.metrics_port
        else "its metrics not served: set CLAWGATE_METRICS_PORT"
    )
    return f"worker in child process {child.pid} ({metrics})"
