"""The web console, served by `clawgate serve` under /console/ (docs/console.md): sign-in by a
one-time link from the chat, then the approvals inbox and the admins' pages. Server-rendered
(Jinja2, autoescaped), a little JavaScript for live updates, no build step."""
