"""What a person's text means, shared by every adapter: a command is answered (privately,
through `say`), anything else is a message for the agent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

from redis.exceptions import RedisError

from adapters.commands import Command, CommandError, parse_command
from adapters.help import HELP, blocks_for_columns, help_for
from adapters.pending import render_pending
from adapters.policy_text import mode_line, render_grant, render_policy
from adapters.reading import Prompt
from adapters.remote_decisions import carry_out
from adapters.router import Router
from runtime.agent import Runtime
from runtime.approval.decisions import Answer
from runtime.approval.grants import revoke_grant
from runtime.approval.models import ApprovalRecord
from runtime.approval.questions import answered_by
from runtime.channel import Notice
from runtime.feedback import THANKS, record_feedback
from runtime.models import Actor, ConversationRef, RunResult
from runtime.policy.choices import (
    ChoiceRefused,
    ConversationChoices,
    describe_mode,
    describe_models,
)
from runtime.policy.model import override_state
from runtime.policy.service import PolicyChangeError
from runtime.queue.inbound import Inbound
from runtime.queue.steering import Kind
from runtime.redact import shown

Say = Callable[[str], Awaitable[None]]
ASK_AN_ADMIN = "An admin can change who may (the policy file's [access] table)."


def shown_say(say: Say) -> Say:
    """`say` with its text as people may see it: a grant's rule or an edit's diff may quote a
    call (the runtime's events are redacted on their way, these answers go to the sender)."""

    async def told(text: str) -> None:
        await say(shown(text))

    return told


def too_long(length: int, limit: int) -> str:
    return (
        f"That message is {length:,} characters long; the limit here is {limit:,} "
        "(CLAWGATE_MAX_MESSAGE_CHARS). Nothing was run: send a shorter one, or attach the text "
        "as a file."
    )


async def dispatch(
    runtime: Runtime,
    session: str,
    text: str,
    actor: Actor,
    conversation: ConversationRef,
    say: Say,
    help_text: str = HELP,
    job: str = "",
    read: Callable[[], Awaitable[Prompt]] | None = None,
    attached: bool = False,
    whisper: Say | None = None,
) -> RunResult | None:
    """Handle one input; returns the run's result when the agent ran (or resumed). `job`: the
    inbox entry it came in (delivered again, its run continues where it stopped). `read`: a
    message's prompt for the model (thread context, attachments), asked only for a message
    someone may send here; else the text alone. `attached`: the message carries files, so it
    never answers a question (the files would be lost): it is held like any other.
    `whisper`: says what only the sender may ever see (a sign-in link); default `say`."""
    private, say = whisper or say, shown_say(say)
    try:
        command = parse_command(text)
    except CommandError as exc:
        await say(str(exc))
        return None
    if command is None:
        if await _refused(runtime, actor, conversation, say):  # said to them alone; nothing runs
            return None
        if len(text) > runtime.config.max_message_chars:
            await say(too_long(len(text), runtime.config.max_message_chars))
            return None
        prompt = Prompt(text) if read is None else await read()
        if not prompt.text.strip():
            return None  # nothing the model could read (a sticker, a refused file): told so
        run = partial(runtime.run, session, prompt.text, actor, conversation, job, prompt.images)
        # A message with files never answers a question (the files would be lost).
        result = await run(ask=not attached)
        if not result.asked:
            return result
        assert result.approval_id is not None
        question, how = await answered_by(runtime.approvals, result.approval_id, text, actor)
        # Words that answered a question already (their job resumed the run, then died)
        # answer no later question: delivered again, they retake that run.
        if (question or how) and await runtime.runs.is_latest(session, job):
            question, how = None, ""
        if how:  # the asker's words answer nothing: held, and they are told how to answer
            await say(how)
        if question is None:
            return await run()  # held: it runs after the decision
        # The asker's next words answer the question they were asked.
        command = Command(name="answer", approval_id=question, answer=text)
        async with runtime.audit.unit():
            return await _command(
                runtime, command, session, actor, conversation, say, help_text, job
            )
    if command.name == "console":  # the link is a secret for them alone: said unredacted
        if not await _refused(runtime, actor, conversation, say):
            await private(await _console_link(runtime, actor))
        return None
    async with runtime.audit.unit():  # the command's record goes with what it caused
        return await _command(runtime, command, session, actor, conversation, say, help_text, job)


async def _command(  # noqa: PLR0912 (one branch per command)
    runtime: Runtime,
    command: Command,
    session: str,
    actor: Actor,
    conversation: ConversationRef,
    say: Say,
    help_text: str,
    job: str,
) -> RunResult | None:
    # Every command is audited (who, what, where); ordinary messages never are.
    await runtime.audit.record(
        "command",
        actor.key,
        name=command.name,
        session=session,
        conversation=conversation.id,
        approval=command.approval_id,
        scope=command.scope if command.name == "approve" else None,
        reason=command.reason,
        action=command.policy_action,
        tool=command.tool,
    )
    if command.name == "help":
        await say(help_text)
    elif command.name in ("approve", "reject"):
        assert command.approval_id is not None
        approve, plain = command.name == "approve", not command.grant and not command.edit

        async def confirm(record: ApprovalRecord, _: str) -> None:
            """Told at once, before the call runs: whoever typed it knows it took."""
            if plain:  # a grant's or an edit's own message says more, at the end
                await say(f"{'Approved' if approve else 'Rejected'} {record.tool} ({record.id}).")

        decision = await runtime.decide(
            command.approval_id,
            approve,
            actor,
            conversation,
            reason=command.reason,
            always=command.grant,
            job=job,
            edit=command.edit,
            recorded=confirm,
        )
        if not decision.accepted or not plain or decision.run is None:
            await say(decision.message)  # a refusal, a grant, an edit, a count toward a quorum
        return decision.run
    elif command.name == "answer":
        assert command.approval_id is not None and command.answer is not None
        answer = Answer(command.answer)
        decision = await runtime.decide(command.approval_id, answer, actor, conversation, job=job)
        if not decision.accepted or decision.run is None:
            await say(decision.message)  # a refusal: told to them alone
        return decision.run
    elif command.name == "pending":
        # What waits here names commands and files: only for those who may use clawgate here.
        if await _refused(runtime, actor, conversation, say):
            return None
        try:
            notices = await runtime.pending(conversation)
            policy = await runtime.policies.effective(conversation.id)
        except RedisError:
            await say("Cannot reach Redis; try again shortly.")
            return None
        lines = [*map(render_pending, notices)] or ["No approvals are pending."]
        await say("\n".join([*lines, f"This conversation's {mode_line(policy)}."]))
    elif command.name == "cancel":
        try:
            await say(await runtime.cancel(session, actor, conversation, job))
        except RedisError:
            await say("Cannot reach Redis, so nothing was cancelled; try again shortly.")
    elif command.name in ("mode", "model"):
        await _choose(runtime, command, actor, conversation, say)
    elif command.policy_action in ("grants", "revoke"):
        await say(await _grants(runtime, command, session, actor, conversation))
    else:
        await say(await _policy(runtime, command, actor, conversation))
    return None


async def _console_link(runtime: Runtime, actor: Actor) -> str:
    """A one-time sign-in link to the web console, for `actor` alone."""
    if runtime.sign_in is None:
        return (
            "No sign-in link from here: the web console is served by `clawgate serve` (with "
            "CLAWGATE_CONSOLE=on) for chat identities; from a shell with REDIS_URL, "
            "`clawgate console link --as slack:U…` prints a link for one."
        )
    try:
        link = await runtime.sign_in.link(actor)
    except RedisError:
        return "Cannot reach Redis, so no sign-in link was made; try again shortly."
    await runtime.audit.record("console_link_issued", actor.key, person=actor.key)
    return (
        f"Your sign-in link to the clawgate console (it works once, for 10 minutes; do not "
        f"share it): {link}"
    )


async def _refused(runtime: Runtime, actor: Actor, conversation: ConversationRef, say: Say) -> bool:
    """Whether the policy's `[access]` leaves `actor` out here (and tells them so)."""
    refusal = await runtime.policies.admit(actor, conversation)
    if refusal is not None:
        await say(f"Sorry, you cannot use clawgate here: {refusal}. {ASK_AN_ADMIN}")
    return refusal is not None


async def _policy(
    runtime: Runtime, command: Command, actor: Actor, conversation: ConversationRef
) -> str:
    """`/policy show` for anyone; `allow`/`deny`/`reset <tool>` for admins, in this chat."""
    policies = runtime.policies
    try:
        if command.policy_action == "show":
            block = blocks_for_columns(conversation.platform)
            return render_policy(await policies.effective(conversation.id), block)
        assert command.tool is not None and command.policy_action is not None
        state = override_state(command.policy_action)
        return await policies.change(conversation.id, command.tool, state, actor)
    except PolicyChangeError as exc:
        return f"Policy not changed: {exc}."
    except RedisError:
        return "Cannot reach Redis, so the policy was neither read nor changed; try again."


async def _choose(
    runtime: Runtime, command: Command, actor: Actor, conversation: ConversationRef, say: Say
) -> None:
    """`/mode` and `/model`: shown to the sender; a switch is said in the conversation."""
    policies = runtime.policies
    try:
        if command.choice is None:
            policy = await policies.effective(conversation.id)
            models = policies.document.offered_models
            mode = command.name == "mode"
            block = blocks_for_columns(conversation.platform)
            await say(describe_mode(policy, block) if mode else describe_models(policy, models))
            return
        choices = ConversationChoices(policies)
        switch = choices.switch_mode if command.name == "mode" else choices.switch_model
        switched = await switch(command.choice, actor, conversation)
    except ChoiceRefused as exc:
        await say(f"{command.name.capitalize()} not changed: {exc}.")
        return
    except RedisError:
        await say(f"Cannot reach Redis, so the {command.name} was neither read nor changed.")
        return
    if switched.changed:  # everyone in the conversation sees what their runs may now do
        await runtime.channel.send(conversation, Notice(switched.text))
    else:
        await say(switched.text)


async def _grants(
    runtime: Runtime, command: Command, session: str, actor: Actor, conversation: ConversationRef
) -> str:
    """`/policy grants` (anyone) and `/policy revoke <grant>` (admins here, or the granter)."""
    store = runtime.approvals.grants
    try:
        grants = await store.here(conversation.id, session)
        if command.policy_action == "grants":
            return "\n".join(map(render_grant, grants)) or "No grants apply here."
        found = next((g for g in grants if g.id == command.tool), None)
        if found is None:
            return f"No grant {command.tool} applies here (see /policy grants)."
        policy = await runtime.policies.effective(conversation.id)
        admin = policy.approver_policy().is_admin(actor)
        refusal = await revoke_grant(store, runtime.audit, found, actor.key, admin=admin)
        if refusal is not None:
            return f"Grant {found.id} not revoked: {refusal}."
        return f"Grant {found.id} revoked: `{found.shown}` asks again from the next call on."
    except RedisError:
        return "Cannot reach Redis, so grants were neither read nor changed; try again."


async def _feedback(runtime: Runtime, router: Router, inbound: Inbound) -> None:
    answer, message = inbound.source.get("answer", ""), inbound.message
    # The conversation's model (/model), as near as a click can tell which one answered.
    listed = (await runtime.policies.effective(inbound.conversation.id)).model
    model = runtime.provider.name if listed is None else f"openai:{listed.model}"  # its name
    args = (inbound.actor, inbound.conversation, inbound.text, answer, message)
    if await record_feedback(runtime.audit, model, *args):
        await router.tell(inbound.conversation, inbound.actor, THANKS, inbound.reply)


def steering_kind(inbound: Inbound) -> Kind:
    """What a queued input is to the running run it waits behind (runtime/queue/steering.py):
    a plain message with text (no command, no file for the reader to fetch) may join it, a
    `/cancel` stops it, feedback on an answer stands aside (it changes nothing a message
    could depend on), anything else waits its turn."""
    if inbound.kind == "feedback":
        return "aside"
    if inbound.kind != "input" or inbound.approval_id or inbound.attachments:
        return "other"
    try:
        command = parse_command(inbound.text)
    except CommandError:
        return "other"
    if command is None:
        return "message" if inbound.text.strip() else "other"
    return "cancel" if command.name == "cancel" else "other"


async def handle_inbound(
    runtime: Runtime, router: Router, inbound: Inbound, job: str
) -> RunResult | None:
    """One queued input (`job`: its inbox entry), from any platform; answers to the sender
    alone go through `router`."""
    if inbound.kind == "release":
        return await runtime.release_held(inbound.session)
    if inbound.kind == "feedback":
        await _feedback(runtime, router, inbound)
        return None
    if inbound.kind == "decision":  # made outside the chat (the operator CLI, a console)
        return await carry_out(runtime, inbound, job)
    if inbound.needs_session and not await runtime.knows(inbound.session):
        return None  # a thread the bot was never part of

    async def say(text: str) -> None:
        await router.tell(inbound.conversation, inbound.actor, text, inbound.reply)

    async def whisper(text: str) -> None:
        await router.tell(inbound.conversation, inbound.actor, text, inbound.reply, secret=True)

    async def read() -> Prompt:
        return await router.read(inbound, job)

    return await dispatch(
        runtime,
        inbound.session,
        inbound.text,
        inbound.actor,
        inbound.conversation,
        say,
        help_for(inbound.conversation.platform),
        job=job,
        read=read,
        attached=bool(inbound.attachments),
        whisper=whisper,
    )
