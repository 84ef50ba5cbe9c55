"""What a person's text means, shared by every adapter: a command is answered (privately,
through `say`), anything else is a message for the agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from adapters.commands import Command, CommandError, parse_command
from adapters.console.channel import render_pending
from adapters.router import Router
from runtime.agent import Runtime
from runtime.inbound import Inbound
from runtime.models import Actor, ConversationRef, RunResult

Say = Callable[[str], Awaitable[None]]

HELP = """Commands:
  /approve <id> [once|always]   run a call that waits for approval (always: also allow
                                calls like it in this conversation from now on)
  /reject <id> [reason]         refuse it; the model is told who refused and why
  /pending                      approvals waiting in this conversation
  /cancel                       withdraw this session's pending approval
  /help                         this list
Anything else is a message to the assistant."""


async def dispatch(
    runtime: Runtime,
    session: str,
    text: str,
    actor: Actor,
    conversation: ConversationRef,
    say: Say,
    help_text: str = HELP,
) -> RunResult | None:
    """Handle one input; returns the run's result when the agent ran (or resumed)."""
    try:
        command = parse_command(text)
    except CommandError as exc:
        await say(str(exc))
        return None
    if command is None:
        return await runtime.run(session, text, actor, conversation)
    return await _command(runtime, command, session, actor, conversation, say, help_text)


async def _command(
    runtime: Runtime,
    command: Command,
    session: str,
    actor: Actor,
    conversation: ConversationRef,
    say: Say,
    help_text: str,
) -> RunResult | None:
    if command.name == "help":
        await say(help_text)
    elif command.name in ("approve", "reject"):
        assert command.approval_id is not None
        decision = await runtime.decide(
            command.approval_id,
            command.name == "approve",
            actor,
            conversation,
            reason=command.reason,
            always=command.scope == "always",
        )
        if not decision.accepted or command.scope == "always":
            await say(decision.message)
        return decision.run
    elif command.name == "pending":
        try:
            notices = await runtime.pending(conversation)
        except RedisError:
            await say("Cannot reach Redis; try again shortly.")
            return None
        await say("\n".join(map(render_pending, notices)) or "No approvals are pending.")
    elif command.name == "cancel":
        try:
            await say(await runtime.cancel(session, actor, conversation))
        except RedisError:
            await say("Cannot reach Redis, so nothing was cancelled; try again shortly.")
    else:
        await say(f"/{command.name} is not supported here yet.")
    return None


async def handle_inbound(runtime: Runtime, router: Router, inbound: Inbound) -> RunResult | None:
    """One queued input, from any platform; answers to the sender alone go through `router`."""
    if inbound.kind == "release":
        return await runtime.release_held(inbound.session)
    if inbound.needs_session and not await runtime.knows(inbound.session):
        return None  # a thread the bot was never part of

    async def say(text: str) -> None:
        await router.tell(inbound.conversation, inbound.actor, text, inbound.reply)

    return await dispatch(
        runtime, inbound.session, inbound.text, inbound.actor, inbound.conversation, say
    )
