"""Downloading a file a person shared in Slack: `url_private_download` with the bot token
(`Authorization: Bearer xoxb-…`), which Slack needs (`files:read`).

The token goes only to the host the URL names, and only when that is Slack's (a host under
slack.com, or the Web API's own host, SLACK_API_URL): redirects are followed by hand, and a
redirect to any other origin is followed without the token. Without a valid token Slack
answers with its sign-in page rather than an error, so an HTML page where a file was
expected is a failure. At most `max_bytes` + 1 bytes are ever read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import ClientError, ClientSession, ClientTimeout
from yarl import URL

from runtime.attachments import AttachmentRefused, human_size

REDIRECTS = 5
TIMEOUT = ClientTimeout(total=300, sock_connect=15, sock_read=60)
CHUNK = 64 * 1024
_REDIRECT_STATUSES = (301, 302, 303, 307, 308)


class DownloadFailed(Exception):
    """The file could not be fetched; the text says why, for the thread and the logs."""


def slack_host(url: URL, api: URL) -> bool:
    """Whether `url` is Slack's own, to which the bot token may go."""
    host = (url.host or "").lower()
    if url.scheme == "https" and (host == "slack.com" or host.endswith(".slack.com")):
        return True
    return url.origin() == api.origin()


async def download(
    http: ClientSession,
    url: str,
    token: str,
    api: URL,
    max_bytes: int,
    name: str,
    mimetype: str,
) -> bytes:
    """The file at `url`; raises `AttachmentRefused` past `max_bytes`, `DownloadFailed` when
    it is not there to take."""
    first = URL(url)
    if not slack_host(first, api):
        raise DownloadFailed(f"{name} is not on Slack's file servers ({first.host})")
    current = first
    for _ in range(REDIRECTS + 1):
        headers = {"Authorization": f"Bearer {token}"} if current.origin() == first.origin() else {}
        try:
            async with http.get(
                current, headers=headers, allow_redirects=False, timeout=TIMEOUT
            ) as response:
                if response.status in _REDIRECT_STATUSES and "Location" in response.headers:
                    current = current.join(URL(response.headers["Location"]))
                    continue
                if response.status != 200:
                    raise DownloadFailed(f"{name}: Slack answered HTTP {response.status}")
                got = response.content_type
                if got == "text/html" and not mimetype.startswith("text/html"):
                    raise DownloadFailed(
                        f"{name}: Slack answered with its sign-in page (does the app have the "
                        "files:read scope?)"
                    )
                return await _read(response.content.iter_chunked(CHUNK), max_bytes, name)
        except (ClientError, TimeoutError) as exc:
            raise DownloadFailed(f"{name}: the download failed ({type(exc).__name__})") from exc
    raise DownloadFailed(f"{name}: too many redirects")


async def _read(chunks: AsyncIterator[bytes], max_bytes: int, name: str) -> bytes:
    data = bytearray()
    async for chunk in chunks:
        data += chunk
        if len(data) > max_bytes:  # stop reading: the rest is never fetched
            raise AttachmentRefused(
                f"{name} is over the limit of {human_size(max_bytes)} "
                "(CLAWGATE_ATTACHMENT_MAX_BYTES)"
            )
    return bytes(data)
