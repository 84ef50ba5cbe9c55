"""Pydantic models of the Slack payloads clawgate reads: what is required is checked here, so
a malformed request is refused (400) before anything is queued. Unknown fields are ignored."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Malformed(Exception):
    """A signed request whose content is not what Slack sends."""


class _Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SlackFile(_Payload):
    """One of a message's `files`. A file Slack withholds (`mode` "tombstone" or
    "hidden_by_limit", Slack Connect's `file_access` "check_file_info") comes without its
    download URL; `files.info` gives it in the last case."""

    id: str = Field(min_length=1)
    name: str | None = None
    title: str | None = None
    mimetype: str = "application/octet-stream"
    size: int | None = Field(None, ge=0)
    url_private_download: str | None = None
    mode: str | None = None
    file_access: str | None = None


class MessageEvent(_Payload):
    """`app_mention` and `message` events (all subtypes)."""

    type: str
    channel: str = Field(min_length=1)
    ts: str = Field(min_length=1)
    user: str | None = None
    text: str = ""
    thread_ts: str | None = None
    channel_type: str | None = None
    subtype: str | None = None
    bot_id: str | None = None
    files: list[SlackFile] = Field(default_factory=list)
    edited: dict[str, Any] | None = None  # an `app_mention` sent again for an edit


class _Authorization(_Payload):
    team_id: str | None = None


class EventCallback(_Payload):
    """An Events API request. In a Slack Connect channel `team_id` may be the workspace of the
    person who wrote; `context_team_id` and `authorizations` say which installations see it."""

    type: str
    event_id: str = Field(min_length=1)
    team_id: str = Field(min_length=1)
    context_team_id: str | None = None
    authorizations: list[_Authorization] = Field(default_factory=list)
    event: dict[str, Any]

    def seen_by(self, team: str) -> bool:
        """Whether the installation in `team` sees this event."""
        teams = {self.team_id, self.context_team_id, *(a.team_id for a in self.authorizations)}
        return team in teams

    @field_validator("event")
    @classmethod
    def _typed(cls, event: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(event.get("type"), str):
            raise ValueError("event.type: expected a string")
        return event


class SlashCommand(_Payload):
    command: str = Field(pattern=r"^/\w+$")
    text: str = ""
    user_id: str = Field(min_length=1)
    channel_id: str = Field(min_length=1)
    team_id: str = Field(min_length=1)
    channel_name: str = ""  # "directmessage" in a DM, "mpdm-…" in a group DM
    trigger_id: str = Field(min_length=1)
    response_url: str | None = None


class _Id(_Payload):
    id: str = Field(min_length=1)


class _Channel(_Id):
    name: str | None = None


class _Container(_Payload):
    message_ts: str | None = None
    thread_ts: str | None = None


class _Message(_Payload):
    ts: str
    thread_ts: str | None = None


class Action(_Payload):
    action_id: str
    value: str = ""


class BlockActions(_Payload):
    type: str
    user: _Id
    team: _Id
    channel: _Channel
    container: _Container = Field(default_factory=_Container)
    message: _Message | None = None
    actions: list[Action] = Field(min_length=1)
    trigger_id: str = Field(min_length=1)
    response_url: str | None = None


class View(_Payload):
    id: str = Field(min_length=1)
    callback_id: str = ""
    private_metadata: str = ""
    state: dict[str, Any] = Field(default_factory=dict)
    app_installed_team_id: str | None = None


class ViewSubmission(_Payload):
    type: str
    user: _Id
    team: _Id
    view: View

    @property
    def home(self) -> str:
        """The workspace the modal was opened from: `team` is the submitter's, another
        organisation's for a Slack Connect user (as bolt reads it)."""
        return self.view.app_installed_team_id or self.team.id


class ModalContext(_Payload):
    """What the reject and edit modals carry in `private_metadata`: which approval, and the
    thread of the notice they were opened from."""

    approval_id: str
    channel: str
    thread_ts: str | None = None
